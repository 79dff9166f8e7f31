// npm run bench:peers: `serve` side by side with the peers it replaces (the AWS peer and the Azure
// peer, built by scripts/provide-peers.sh as the differential harness has them) and with the floor
// (support/floor.ts: a bare Node HTTPS server that parses the review and allows it) on one real
// kube-apiserver, with the same ServiceAccounts, serving certificate and two corpora of reviews
// (support/corpora.ts: generated large Pods, and real charts' Pods). Each server runs alone on
// CPU 0 (taskset; GOMAXPROCS=1 for the Go peers); the load generator, the API server and etcd on
// the other CPUs. `serve` runs as its Pod does: the image's bundle (WIW_CLI; scripts/dev.sh builds
// it), in a memory cgroup of the chart's limit, with the Node flags of the Dockerfile's
// NODE_OPTIONS (the chart keeps them unless nodeOptions is set); the floor with the same flags.
// Every figure is the median of --rounds rounds, the ratios with their spread over the rounds; the
// table ends with the issue's goals, each met or not, and how busy the machine was meanwhile.
//
//   npm run bench:peers [-- --rounds 3] [--seconds 10] [--peers aws,azure] [--phases base,scale]
//                       [--corpora bench,charts] [--scale 50000] [--settle 75] [--image-archive FILE]
//                       [--baseline OTHER/bundle/cli.js]   (another build of serve beside this one: before/after)
import { readFileSync, statSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { TENANT as AZURE_TENANT } from '../test/support/identities.ts';
import { startFloorProcess } from './support/floor-process.ts';
import { providePeers, servingCertificate, startPeer, type TlsFiles } from '../test/support/peer-diff.ts';
import { CLI } from '../test/harness/cli-process.ts';
import { startWebhook } from '../test/support/webhook.ts';
import { createAll } from './support/cluster.ts';
import { cpuCount, cpuSecondsOf, foreignLoad, loadAverage, pin } from './support/host.ts';
import { chartMemory, memoryCgroup, rssMiB } from '../test/support/cgroup.ts';
import { agentFor, closedLoop, openLoop, percentile, post, type Run, type Target } from './support/load.ts';
import { makeReviews } from './support/reviews.ts';
import {
  CORPORA,
  NAMESPACES,
  PROBE_IDENTITY,
  chartObjects,
  describeCorpus,
  serviceAccount,
  streamReviews,
  type Cloud,
  type Corpus,
  type StreamReviews,
} from './support/corpora.ts';

const ROOT = join(import.meta.dirname, '..');
const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');
const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    peers: { type: 'string', default: 'aws,azure' },
    // base: 2,000 ServiceAccounts, load and memory; scale: time to ready and memory with --scale of them.
    phases: { type: 'string', default: 'base,scale' },
    corpora: { type: 'string', default: CORPORA.join(',') },
    'service-accounts': { type: 'string', default: '2000' },
    scale: { type: 'string', default: '50000' },
    settle: { type: 'string', default: '75' },
    'memory-mib': { type: 'string', default: '256' },
    'node-options': { type: 'string' },
    'image-archive': { type: 'string', default: process.env.WEBHOOK_IMAGE_ARCHIVE ?? '' },
    baseline: { type: 'string' },
  },
});
const ROUNDS = Number(opts.rounds);
const SECONDS = Number(opts.seconds);
const BASE_SAS = Number(opts['service-accounts']);
const SCALE_SAS = Number(opts.scale);
const SETTLE_S = Number(opts.settle);
const MEMORY = Number(opts['memory-mib']) * 2 ** 20;
const NODE_FLAGS = opts['node-options'] ?? chartMemory().nodeOptions;
const PEERS = opts.peers.split(',').filter(Boolean) as Kind[];
const PHASES = new Set(opts.phases.split(','));
const CORPUS_LIST = opts.corpora.split(',').filter(Boolean) as Corpus[];
/** The clouds whose Pods are sent: those of the peers asked for (AWS's when none is). */
const PEER_CLOUDS = PEERS.filter((p): p is Cloud => p === 'aws' || p === 'azure');
const CLOUDS: Cloud[] = PEER_CLOUDS.length ? PEER_CLOUDS : ['aws'];
const SERVER_CPU = '0';

type Kind = 'project' | 'baseline' | 'aws' | 'azure' | 'floor';
/** A stream: one cloud's Pods of one corpus, e.g. "aws/charts". */
type Stream = `${Cloud}/${Corpus}`;
const streamsOf = (clouds: Cloud[]) => clouds.flatMap((c) => CORPUS_LIST.map((k) => `${c}/${k}` as Stream));
const STREAMS_OF: Record<Kind, Stream[]> = {
  project: streamsOf(CLOUDS),
  baseline: streamsOf(CLOUDS),
  aws: streamsOf(['aws']),
  azure: streamsOf(['azure']),
  floor: streamsOf(CLOUDS),
};
const STREAMS = new Map<Stream, StreamReviews>();
/** The reviews of a stream, made once (the same bytes for every server and round). */
function reviewsOf(stream: Stream): StreamReviews {
  let s = STREAMS.get(stream);
  if (!s) {
    const [cloud, corpus] = stream.split('/') as [Cloud, Corpus];
    s = streamReviews(cloud, corpus, BASE_SAS);
    STREAMS.set(stream, s);
  }
  return s;
}

// ------------------------------------------------------------------ the cluster's contents

/** Listed last (the list is ordered by namespace): a Pod of it is mutated once the list is in. */
const PROBE = { namespace: 'zz-probe', name: 'zz-probe' };

async function createServiceAccounts(cp: ControlPlane, from: number, to: number) {
  const started = performance.now();
  const items = [];
  for (let i = from; i < to; i++) {
    const { namespace, body } = serviceAccount(i);
    items.push({ path: `/api/v1/namespaces/${namespace}/serviceaccounts`, body });
  }
  await createAll(cp, items);
  console.log(`  ${to - from} ServiceAccounts created in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

// ------------------------------------------------------------------ the servers

interface Server {
  kind: Kind;
  pid: number;
  target: Target;
  /** The TLS version, cipher and ALPN protocol a client of the load generator gets. */
  tls?: string;
  /** From the start of the process to the first Pod of the probe ServiceAccount mutated, ms. */
  readyMs: number;
  /** Heap used after a full GC and RSS, MiB (`serve` only: its memory probe). */
  heap(): Promise<{ heapMiB: number; rssMiB: number; anonMiB: number; fileMiB: number } | undefined>;
  stop(): Promise<void>;
}

const probeReview = makeReviews(1, () => ({
  namespace: PROBE.namespace,
  serviceAccount: PROBE.name,
  labels: { 'azure.workload.identity/use': 'true' },
}))[0];

/** Polls until the server mutates the probe Pod: its ServiceAccounts are listed. */
async function untilMutates(target: Target, exited: () => boolean, what: string) {
  const agent = agentFor(target, 1);
  const deadline = Date.now() + 300_000;
  try {
    for (;;) {
      if (exited()) throw new Error(`${what} exited before it was ready`);
      const a = await post(agent, target, probeReview, true);
      if (a.status === 200 && JSON.parse(a.body?.toString() ?? '{}').response?.patch) return;
      if (Date.now() > deadline) throw new Error(`${what} did not mutate the probe Pod in 300 s`);
      await sleep(20);
    }
  } finally {
    agent.destroy();
  }
}

let cgroupSeq = 0;
async function startProject(
  cp: ControlPlane,
  tls: TlsFiles,
  kind: 'project' | 'baseline' = 'project',
): Promise<Server> {
  const cgroup = memoryCgroup(`bench-peers-${++cgroupSeq}`, MEMORY);
  const probeOut = join(cp.dir, `memory-probe-${cgroupSeq}.jsonl`);
  const probe = join(ROOT, 'bench/support/memory-probe.mjs');
  const started = performance.now();
  const wh = await startWebhook(cp, ['--azure-tenant-id', AZURE_TENANT, '--log-level', 'info'], {
    tls,
    wrap: (command, args) => {
      // The baseline: the same command line with the other build's cli.js.
      const [inCgroup, rest] = cgroup.wrap(
        command,
        kind === 'baseline' ? [opts.baseline as string, ...args.slice(1)] : args,
      );
      return ['taskset', ['-c', SERVER_CPU, inCgroup, ...rest]];
    },
    env: { NODE_OPTIONS: `${NODE_FLAGS} --expose-gc --import ${probe}`, WIW_MEMORY_PROBE_OUT: probeOut },
    readyTimeoutMs: 300_000,
  }).catch((err: Error) => {
    const kills = cgroup.oomKills();
    cgroup.remove();
    throw new Error(`${kills ? `OOM-killed in its ${MEMORY / 2 ** 20} MiB cgroup; ` : ''}${err.message}`);
  });
  const target = { url: `${wh.url}/mutate`, caPem: tls.caPem };
  await untilMutates(target, () => wh.process.exitStatus() !== null, kindName(kind));
  const readyMs = performance.now() - started;
  return {
    kind,
    pid: wh.process.pid,
    target,
    readyMs,
    async heap() {
      const lines = () => readFileSync(probeOut, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean);
      const before = lines().length;
      process.kill(wh.process.pid, 'SIGUSR2');
      for (let i = 0; i < 200 && lines().length === before; i++) await sleep(25);
      const last = lines().at(-1);
      if (!last || lines().length === before) return undefined;
      const m = JSON.parse(last) as { heapUsed: number; rssAfterGc: number; rssAnon: number; rssFile: number };
      const mib = (bytes: number) => bytes / 2 ** 20;
      return { heapMiB: mib(m.heapUsed), rssMiB: mib(m.rssAfterGc), anonMiB: mib(m.rssAnon), fileMiB: mib(m.rssFile) };
    },
    async stop() {
      const kills = cgroup.oomKills();
      if (kills) console.log(`  serve: ${kills} OOM kill(s) in its ${MEMORY / 2 ** 20} MiB cgroup`);
      await wh.stop();
      cgroup.remove();
    },
  };
}

/** The lock the controller-runtime peers share for port 9443 (see startPeer): wait until it is free. */
async function port9443Free() {
  const { execFileSync } = await import('node:child_process');
  for (let i = 0; ; i++) {
    try {
      execFileSync('flock', ['-n', join(CACHE, 'peer-port-9443.lock'), 'true'], { stdio: 'ignore' });
      return;
    } catch {
      if (i % 100 === 0) console.log('  waiting for port 9443 (another run holds the Azure peer)');
      await sleep(100);
    }
  }
}

async function startPeerServer(cp: ControlPlane, tls: TlsFiles, kind: 'aws' | 'azure', binary: string) {
  if (kind === 'azure') await port9443Free();
  const started = performance.now();
  const peer = await startPeer(
    cp,
    {
      id: `${kind}/bench`,
      peer: kind,
      peerArgs: [],
      // One core, as taskset gives it (Go reads the affinity only at start: set it outright).
      peerEnv: { GOMAXPROCS: '1', ...(kind === 'azure' ? { AZURE_TENANT_ID: AZURE_TENANT } : {}) },
      ourArgs: [],
    },
    binary,
    tls,
    CACHE,
  );
  pin(peer.proc.pid, SERVER_CPU);
  const target = { url: peer.url, caPem: tls.caPem };
  await untilMutates(target, () => peer.proc.exitStatus() !== null, `the ${kind} peer`);
  const readyMs = performance.now() - started;
  pin(peer.proc.pid, SERVER_CPU); // threads started since
  return {
    kind,
    pid: peer.proc.pid,
    target,
    readyMs,
    heap: async () => undefined,
    stop: () => peer.proc.stop(),
  } satisfies Server;
}

/** The floor (support/floor.ts): serve's certificate, TLS policy, Node flags and core; nothing else. */
async function startFloor(cp: ControlPlane, tls: TlsFiles): Promise<Server> {
  const started = performance.now();
  const log = join(cp.dir, `floor-${++cgroupSeq}.log`);
  const { proc, port } = await startFloorProcess({ tls, cpu: SERVER_CPU, nodeOptions: NODE_FLAGS, log });
  return {
    kind: 'floor',
    pid: proc.pid,
    target: { url: `https://127.0.0.1:${port}/mutate`, caPem: tls.caPem },
    readyMs: performance.now() - started,
    heap: async () => undefined,
    stop: () => proc.stop(),
  };
}

/** What the load generator's connections to a server negotiate: "TLSv1.3 TLS_AES_256_GCM_SHA384, http/1.1". */
function negotiated(target: Target): Promise<string> {
  const agent = new Agent({ keepAlive: false, ca: target.caPem });
  return new Promise((resolve) => {
    const req = request(target.url, { method: 'GET', agent }, (res) => {
      const socket = res.socket as TLSSocket;
      resolve(`${socket.getProtocol()} ${socket.getCipher().standardName}, HTTP/${res.httpVersion}`);
      res.resume();
    });
    req.on('error', (err) => resolve(`unknown (${err.message})`));
    req.end();
  });
}

// ------------------------------------------------------------------ measurements

const RATES = [500, 1000] as const;
type Rate = (typeof RATES)[number];

interface LoadFigures {
  rps16: number;
  rps32: number;
  cpuUs: number;
  /** p50, p99, p99.9 (ms) at each fixed rate; NaN where the server's maximum is below the rate. */
  at: Record<Rate, [number, number, number]>;
  errors: number;
  /** Connections the client opened in the 16- and 32-connection runs (keep-alive: as many as it runs). */
  opened: [number, number];
  /** Share of the server's CPU used by other processes during each run. */
  foreign: number[];
}

const tail = (r: Run): [number, number, number] => [
  percentile(r.latencies, 0.5),
  percentile(r.latencies, 0.99),
  percentile(r.latencies, 0.999),
];

/**
 * Connections and JIT warmed up; each `bench` Pod with the stream's identity checked to be
 * mutated, and some of the charts' (the floor mutates nothing: not judged).
 */
async function warmUp(server: Server, stream: Stream, { reviews, mutated }: StreamReviews) {
  const agent = agentFor(server.target, 16);
  let patched = 0;
  for (let i = 0; i < reviews.length; i += 16) {
    const answers = await Promise.all(reviews.slice(i, i + 16).map((r) => post(agent, server.target, r, true)));
    answers.forEach((a, j) => {
      if (a.status !== 200) throw new Error(`${server.kind}: HTTP ${a.status} in the warm-up`);
      const patch = JSON.parse(a.body?.toString() ?? '{}').response?.patch;
      if (patch) patched++;
      // Without identity, peers differ (Azure's mutates every Pod with its label): not judged.
      if (stream.endsWith('/bench') && server.kind !== 'floor' && mutated[i + j] && !patch)
        throw new Error(`${server.kind} did not mutate Pod ${i + j} of the ${stream} stream`);
    });
  }
  agent.destroy();
  if (server.kind !== 'floor' && patched === 0)
    throw new Error(`${server.kind} mutated no Pod of the ${stream} stream`);
  await closedLoop(server.target, reviews, 16, 3);
}

async function measureLoad(server: Server, stream: Stream, corpus: StreamReviews): Promise<LoadFigures> {
  await warmUp(server, stream, corpus);
  const { reviews } = corpus;
  const foreign: number[] = [];
  const onCpu = async <T>(fn: () => Promise<T>) => {
    const { result, foreign: f } = await foreignLoad(Number(SERVER_CPU), server.pid, fn);
    foreign.push(f);
    return result;
  };
  const cpu0 = cpuSecondsOf(server.pid);
  const c16 = await onCpu(() => closedLoop(server.target, reviews, 16, SECONDS));
  const cpuUs = ((cpuSecondsOf(server.pid) - cpu0) / c16.latencies.length) * 1e6;
  const c32 = await onCpu(() => closedLoop(server.target, reviews, 32, SECONDS));
  const rps16 = c16.latencies.length / c16.seconds;
  const at = {} as LoadFigures['at'];
  let errors = c16.errors + c32.errors;
  const opened: [number, number] = [c16.opened, c32.opened];
  for (const rate of RATES) {
    // A rate above the server's maximum only queues without end: "cannot sustain it".
    // The floor's tail is not what it is there for: its CPU per review is.
    if (server.kind === 'floor' || Math.max(rps16, c32.latencies.length / c32.seconds) < rate) {
      at[rate] = [Number.NaN, Number.NaN, Number.NaN];
      continue;
    }
    const run = await onCpu(() => openLoop(server.target, reviews, rate, SECONDS, 16));
    at[rate] = tail(run);
    errors += run.errors;
  }
  return { rps16, rps32: c32.latencies.length / c32.seconds, cpuUs, at, errors, opened, foreign };
}

interface BaseFigures {
  readyMs: number;
  idle: number;
  idleHeap?: number;
  afterLoad: number;
  peak: number;
  afterLoadHeap?: number;
  load: Partial<Record<Stream, LoadFigures>>;
}

interface ScaleFigures {
  readyMs: number;
  synced: number;
  syncedHeap?: number;
  settled: number;
  settledHeap?: number;
}

type Starter = () => Promise<Server>;

/** The server started, or undefined (its failure printed and counted) when it could not start or get ready. */
async function started(kind: Kind, starters: Record<Kind, Starter>): Promise<Server | undefined> {
  try {
    return await starters[kind]();
  } catch (err) {
    failures.push(`${kind}: ${(err as Error).message.split('\n')[0]}`);
    console.log(`  ${kind.padEnd(7)} FAILED to start or get ready: ${(err as Error).message}`);
    return undefined;
  }
}

async function baseRound(starters: Record<Kind, Starter>, kinds: Kind[]) {
  const out: Partial<Record<Kind, BaseFigures>> = {};
  for (const kind of kinds) {
    const server = await started(kind, starters);
    if (!server) continue;
    try {
      await sleep(5000);
      const idleHeap = await server.heap();
      const idle = rssMiB(server.pid).rss;
      const load: BaseFigures['load'] = {};
      server.tls ??= await negotiated(server.target);
      tlsOf[kind] ??= server.tls;
      for (const stream of STREAMS_OF[kind]) {
        load[stream] = await measureLoad(server, stream, reviewsOf(stream));
        const l = load[stream];
        console.log(
          `  ${kind.padEnd(7)} ${stream} stream: ${l.rps16.toFixed(0)} / ${l.rps32.toFixed(0)} reviews/s, ${l.cpuUs.toFixed(0)} µs CPU per review, ` +
            (kind === 'floor' ? '' : `p99.9 ${ms(l.at[500][2])} ms at 500/s, ${ms(l.at[1000][2])} ms at 1,000/s, `) +
            `errors ${l.errors}, connections opened ${l.opened.join(' / ')}; ` +
            `CPU ${SERVER_CPU} busy with other processes ${l.foreign.map((f) => (f * 100).toFixed(0)).join('/')} %`,
        );
      }
      const mem = rssMiB(server.pid);
      const afterHeap = await server.heap();
      out[kind] = {
        readyMs: server.readyMs,
        idle,
        idleHeap: idleHeap?.heapMiB,
        afterLoad: mem.rss,
        peak: mem.hwm,
        afterLoadHeap: afterHeap?.heapMiB,
        load,
      };
      console.log(
        `  ${kind.padEnd(7)} ready in ${server.readyMs.toFixed(0)} ms, RSS idle ${idle.toFixed(0)} MiB${idleHeap ? ` (heap after GC ${idleHeap.heapMiB.toFixed(1)}; anonymous ${idleHeap.anonMiB.toFixed(0)}, files ${idleHeap.fileMiB.toFixed(0)})` : ''}, after load ${mem.rss.toFixed(0)} (peak ${mem.hwm.toFixed(0)})`,
      );
    } finally {
      await server.stop();
    }
  }
  return out;
}

/** With many ServiceAccounts: each server started in turn (time to ready, RSS once synced), then RSS after `settle`. */
async function scaleRound(starters: Record<Kind, Starter>, kinds: Kind[]) {
  const out: Partial<Record<Kind, ScaleFigures>> = {};
  const running: { server: Server; readyAt: number }[] = [];
  try {
    for (const kind of kinds) {
      const server = await started(kind, starters);
      if (!server) continue;
      const readyAt = performance.now();
      running.push({ server, readyAt });
      const h = await server.heap();
      out[kind] = { readyMs: server.readyMs, synced: rssMiB(server.pid).rss, syncedHeap: h?.heapMiB, settled: 0 };
    }
    for (const { server, readyAt } of running) {
      await sleep(Math.max(0, readyAt + SETTLE_S * 1000 - performance.now()));
      const figures = out[server.kind] as ScaleFigures;
      figures.settled = rssMiB(server.pid).rss;
      figures.settledHeap = (await server.heap())?.heapMiB;
      console.log(
        `  ${server.kind.padEnd(7)} ready in ${figures.readyMs.toFixed(0)} ms; RSS ${figures.synced.toFixed(0)} MiB once synced, ${figures.settled.toFixed(0)} MiB after ${SETTLE_S} s` +
          (figures.settledHeap !== undefined
            ? ` (heap after GC ${figures.syncedHeap?.toFixed(1)} / ${figures.settledHeap.toFixed(1)} MiB)`
            : ''),
      );
    }
  } finally {
    for (const { server } of running.reverse()) await server.stop();
  }
  return out;
}

// ------------------------------------------------------------------ the table

const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : Number.NaN;
};
const fmt = (x: number | undefined, digits = 0) =>
  x === undefined || !Number.isFinite(x)
    ? '–'
    : x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ms = (x: number | undefined) => fmt(x, x !== undefined && x < 10 ? 2 : 1);

function imageSize(): string {
  const file = opts['image-archive'];
  if (!file) return 'n/a (no --image-archive or WEBHOOK_IMAGE_ARCHIVE)';
  try {
    return `${(statSync(file).size / 1e6).toFixed(0)} MB`;
  } catch {
    return `n/a (${file} unreadable)`;
  }
}

function table(
  base: Partial<Record<Kind, BaseFigures>>[],
  scale: Partial<Record<Kind, ScaleFigures>>[],
  kinds: Kind[],
) {
  const med = <F>(rounds: Partial<Record<Kind, F>>[], kind: Kind, pick: (f: F) => number | undefined) =>
    median(rounds.map((r) => (r[kind] ? (pick(r[kind] as F) ?? Number.NaN) : Number.NaN)));
  const loadMed = (kind: Kind, stream: Stream, pick: (l: LoadFigures) => number) =>
    med(base, kind, (f) => (f.load[stream] ? pick(f.load[stream] as LoadFigures) : undefined));
  const rows: string[][] = [];
  const header = ['figure (median of rounds)', ...kinds.map(kindName)];
  const cell = (kind: Kind, stream: Stream, f: (kind: Kind) => string) =>
    STREAMS_OF[kind].includes(stream) ? f(kind) : '–';
  for (const stream of STREAMS_OF.project) {
    const per = (label: string, f: (kind: Kind) => string) =>
      rows.push([label, ...kinds.map((k) => cell(k, stream, f))]);
    per(
      `max reviews/s, 16 / 32 connections (${stream} stream)`,
      (k) => `${fmt(loadMed(k, stream, (l) => l.rps16))} / ${fmt(loadMed(k, stream, (l) => l.rps32))}`,
    );
    per(
      `server CPU per review at 16 connections (${stream} stream)`,
      (k) => `${fmt(loadMed(k, stream, (l) => l.cpuUs))} µs`,
    );
    per(`reviews/s per core (${stream} stream)`, (k) => fmt(1e6 / loadMed(k, stream, (l) => l.cpuUs)));
    for (const rate of RATES)
      per(`p50 / p99 / p99.9 at ${fmt(rate)} reviews/s (${stream} stream)`, (k) => {
        const t = [0, 1, 2].map((i) => loadMed(k, stream, (l) => l.at[rate][i]));
        if (Number.isFinite(t[2])) return `${t.map(ms).join(' / ')} ms`;
        const max = loadMed(k, stream, (l) => Math.max(l.rps16, l.rps32));
        if (k === 'floor') return 'not measured';
        return Number.isFinite(max) ? `cannot sustain it (max ${fmt(max)}/s)` : '–';
      });
  }
  const all = (label: string, f: (kind: Kind) => string) => rows.push([label, ...kinds.map(f)]);
  const heapNote = (x: number) => (Number.isFinite(x) ? ` (heap ${fmt(x, 1)})` : '');
  all(
    `RSS idle, ${fmt(BASE_SAS)} ServiceAccounts, MiB`,
    (k) => fmt(med(base, k, (f) => f.idle)) + heapNote(med(base, k, (f) => f.idleHeap)),
  );
  all(
    'RSS after the load runs (peak), MiB',
    (k) => `${fmt(med(base, k, (f) => f.afterLoad))} (${fmt(med(base, k, (f) => f.peak))})`,
  );
  if (scale.length) {
    all(`RSS with ${fmt(SCALE_SAS)} ServiceAccounts: synced / after ${SETTLE_S} s, MiB`, (k) => {
      const h = [med(scale, k, (f) => f.syncedHeap), med(scale, k, (f) => f.settledHeap)];
      return `${fmt(med(scale, k, (f) => f.synced))} / ${fmt(med(scale, k, (f) => f.settled))}${Number.isFinite(h[0]) ? ` (heap ${fmt(h[0], 1)} / ${fmt(h[1], 1)})` : ''}`;
    });
  }
  all(
    `time to ready, ${fmt(BASE_SAS)}${scale.length ? ` / ${fmt(SCALE_SAS)}` : ''} ServiceAccounts, s`,
    (k) =>
      `${fmt(med(base, k, (f) => f.readyMs) / 1000, 2)}${scale.length ? ` / ${fmt(med(scale, k, (f) => f.readyMs) / 1000, 2)}` : ''}`,
  );
  rows.push(['image, uncompressed', imageSize(), ...kinds.slice(1).map(() => '–')]);
  rows.push(['TLS and protocol the load generator gets', ...kinds.map((k) => tlsOf[k] ?? '–')]);
  const out = [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ];
  return { text: out.join('\n'), med, loadMed };
}

const KIND_NAMES: Partial<Record<Kind, string>> = { project: 'serve', baseline: 'serve (baseline)', floor: 'floor' };
const kindName = (k: Kind) => KIND_NAMES[k] ?? `${k} peer`;

/** Per round, serve's CPU per review against another server's on a stream: theirs / ours. */
function perRound(stream: Stream, other: Kind): number[] {
  return baseRounds
    .map((r) => (r[other]?.load[stream]?.cpuUs ?? Number.NaN) / (r.project?.load[stream]?.cpuUs ?? Number.NaN))
    .filter(Number.isFinite);
}

/** "2.92x (2.81 to 3.10)": the median over the rounds and their spread. */
function spread(xs: number[], unit: (x: number) => string): string {
  if (!xs.length) return '–';
  const s = [...xs].sort((a, b) => a - b);
  return `${unit(median(s))}${s.length > 1 ? ` (${unit(s[0])} to ${unit(s.at(-1) as number)})` : ''}`;
}

/** The reconciliation table: each corpus, serve's CPU per review against each peer's and the floor's. */
function ratios(t: ReturnType<typeof table>, kinds: Kind[]): string {
  const others = kinds.filter((k) => k !== 'project');
  const header = [
    'stream (cloud/corpus)',
    ...kinds.map((k) => `${kindName(k)}, µs CPU per review`),
    ...others.map((k) =>
      k === 'floor'
        ? "serve's reviews/s per core, % of the floor's"
        : `serve's reviews/s per core, x the ${kindName(k)}'s`,
    ),
  ];
  const busy = (stream: Stream) =>
    median(baseRounds.flatMap((r) => Object.values(r).flatMap((f) => f?.load[stream]?.foreign ?? [])));
  header.push('CPU 0 taken by other processes, median run');
  const rows = STREAMS_OF.project.map((stream) => [
    stream,
    ...kinds.map((k) => (STREAMS_OF[k].includes(stream) ? fmt(t.loadMed(k, stream, (l) => l.cpuUs)) : '–')),
    ...others.map((k) =>
      !STREAMS_OF[k].includes(stream)
        ? '–'
        : k === 'floor'
          ? spread(perRound(stream, k), (x) => `${fmt(x * 100)} %`)
          : spread(perRound(stream, k), (x) => `${fmt(x, 2)}x`),
    ),
    `${fmt(busy(stream) * 100)} %`,
  ]);
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

function goals(t: ReturnType<typeof table>, scale: boolean) {
  const lines: string[] = [];
  // A figure that is missing (a server failed: see the failures below) meets no goal.
  const verdict = (ok: boolean, text: string, ...figures: number[]) =>
    lines.push(`${ok && figures.every(Number.isFinite) ? 'met    ' : 'NOT met'}  ${text}`);
  const idle = t.med(baseRounds, 'project', (f) => f.idle);
  verdict(idle <= 80, `RSS idle with ${fmt(BASE_SAS)} ServiceAccounts <= 80 MiB: ${fmt(idle)} MiB`, idle);
  if (scale) {
    const ours = Math.max(
      t.med(scaleRounds, 'project', (f) => f.synced),
      t.med(scaleRounds, 'project', (f) => f.settled),
    );
    const aws = Math.min(
      t.med(scaleRounds, 'aws', (f) => f.synced),
      t.med(scaleRounds, 'aws', (f) => f.settled),
    );
    verdict(
      ours <= 128 && !(ours >= aws),
      `RSS with ${fmt(SCALE_SAS)} ServiceAccounts <= 128 MiB and below the AWS peer's: ${fmt(ours)} MiB (AWS ${fmt(aws)})`,
      ours,
    );
    const r = [t.med(scaleRounds, 'project', (f) => f.readyMs), t.med(scaleRounds, 'aws', (f) => f.readyMs)];
    verdict(
      !(r[0] > r[1]),
      `time to ready with ${fmt(SCALE_SAS)} ServiceAccounts <= the AWS peer's: ${fmt(r[0] / 1000, 2)} s (AWS ${fmt(r[1] / 1000, 2)} s)`,
      ...r,
    );
  }
  if (PEERS.includes('aws')) {
    const firstAws = STREAMS_OF.aws[0];
    for (const rate of [...RATES].reverse()) {
      const [ours, aws] = (['project', 'aws'] as Kind[]).map((k) => t.loadMed(k, firstAws, (l) => l.at[rate][2]));
      const theirs = Number.isFinite(aws) ? `${ms(aws)} ms` : 'cannot sustain it';
      verdict(
        Number.isFinite(ours) && !(ours > aws),
        `p99.9 at ${fmt(rate)}/s <= the AWS peer's (${firstAws}): ${Number.isFinite(ours) ? `${ms(ours)} ms` : 'cannot sustain it'} (AWS ${theirs})`,
      );
    }
    for (const stream of STREAMS_OF.aws) {
      const ratio = median(perRound(stream, 'aws'));
      verdict(ratio >= 3, `reviews/s per core >= 3x the AWS peer's (${stream}): ${fmt(ratio, 2)}x`, ratio);
    }
  }
  for (const stream of STREAMS_OF.floor) {
    const share = median(perRound(stream, 'floor'));
    verdict(share >= 0.8, `reviews/s per core >= 80 % of the floor's (${stream}): ${fmt(share * 100)} %`, share);
  }
  return lines.join('\n');
}

// ------------------------------------------------------------------ main

const baseRounds: Partial<Record<Kind, BaseFigures>>[] = [];
const scaleRounds: Partial<Record<Kind, ScaleFigures>>[] = [];
const loads: number[] = [];
const failures: string[] = [];
const foreign: number[] = [];

if (cpuCount() < 2) throw new Error('the side-by-side benchmark needs two CPUs: one for the server, one for the load');
const vars = PEERS.length ? providePeers(PEERS) : {};
const kinds: Kind[] = ['project', ...(opts.baseline ? (['baseline'] as Kind[]) : []), ...PEERS, 'floor'];
const tlsOf: Partial<Record<Kind, string>> = {};
const others = Array.from({ length: cpuCount() - 1 }, (_, i) => i + 1).join(',');
pin(process.pid, others);
console.log(
  `bench:peers: ${ROUNDS} rounds, ${SECONDS} s per load run; serve (${CLI}) in a ${MEMORY / 2 ** 20} MiB memory cgroup with NODE_OPTIONS="${NODE_FLAGS}"; ` +
    `servers on CPU ${SERVER_CPU}, load, kube-apiserver and etcd on CPU ${others}; peers: ${PEERS.map((p) => `${p} ${vars[`${p.toUpperCase()}_PEER_VERSION`]}`).join(', ') || 'none'}; ` +
    'the floor: bench/support/floor.ts, same flags and CPU',
);
console.log(
  `client: this process on CPU ${others}, Node ${process.version} https.Agent, keep-alive HTTP/1.1 (each connection opened once per run: the count is printed), 16 and 32 connections closed loop, then ${RATES.join(' and ')} reviews/s open loop; ` +
    "CPU per review: the server process's utime + stime (/proc/PID/stat, every thread) over the 16-connection run / the reviews answered",
);
for (const stream of STREAMS_OF.project) {
  const [cloud, corpus] = stream.split('/') as [Cloud, Corpus];
  console.log(`corpus ${cloud}/${describeCorpus(corpus, reviewsOf(stream))}`);
}
const sampler = setInterval(() => loads.push(loadAverage()), 5000);
const cp = await startControlPlane({ name: 'bench-peers' });
try {
  const tls = await servingCertificate(join(cp.dir, 'tls'));
  const starters: Record<Kind, Starter> = {
    project: () => startProject(cp, tls),
    baseline: () => startProject(cp, tls, 'baseline'),
    aws: () => startPeerServer(cp, tls, 'aws', vars.AWS_PEER),
    azure: () => startPeerServer(cp, tls, 'azure', vars.AZURE_PEER),
    floor: () => startFloor(cp, tls),
  };
  console.log('setting up: namespaces and ServiceAccounts ...');
  await createAll(cp, [
    ...Array.from({ length: NAMESPACES }, (_, i) => ({
      path: '/api/v1/namespaces',
      body: { metadata: { name: `team-${i}` } },
    })),
    { path: '/api/v1/namespaces', body: { metadata: { name: PROBE.namespace } } },
  ]);
  await createAll(cp, [
    {
      path: `/api/v1/namespaces/${PROBE.namespace}/serviceaccounts`,
      body: { metadata: { name: PROBE.name, annotations: PROBE_IDENTITY } },
    },
  ]);
  await createServiceAccounts(cp, 0, BASE_SAS);
  if (CORPUS_LIST.includes('charts')) for (const items of chartObjects(CLOUDS)) await createAll(cp, items);
  for (const pid of Object.values(cp.pids)) pin(pid, others);
  for (let round = 1; PHASES.has('base') && round <= ROUNDS; round++) {
    console.log(`round ${round}/${ROUNDS}, ${fmt(BASE_SAS)} ServiceAccounts (load average ${loadAverage()}):`);
    const r = await baseRound(starters, kinds);
    baseRounds.push(r);
    for (const f of Object.values(r)) for (const l of Object.values(f.load)) foreign.push(...l.foreign);
  }
  if (PHASES.has('scale') && SCALE_SAS > BASE_SAS) {
    for (const pid of Object.values(cp.pids)) pin(pid, `0,${others}`);
    console.log(`setting up: ${fmt(SCALE_SAS)} ServiceAccounts ...`);
    await createServiceAccounts(cp, BASE_SAS, SCALE_SAS);
    for (const pid of Object.values(cp.pids)) pin(pid, others);
    for (let round = 1; round <= ROUNDS; round++) {
      console.log(`round ${round}/${ROUNDS}, ${fmt(SCALE_SAS)} ServiceAccounts (load average ${loadAverage()}):`);
      scaleRounds.push(
        await scaleRound(
          starters,
          kinds.filter((k) => k !== 'floor'),
        ),
      );
    }
  }
} finally {
  clearInterval(sampler);
  await cp.stop();
}

const t = table(baseRounds, scaleRounds, kinds);
console.log(`\n${t.text}\n`);
if (baseRounds.length)
  console.log(
    `CPU per review by corpus, median of rounds (spread: single rounds; where other processes take much of CPU 0, serve's CPU per review grows more than a Go peer's: docs/figures.md):\n\n${ratios(t, kinds)}\n`,
  );
console.log(goals(t, scaleRounds.length > 0));
const sortedLoads = [...loads].sort((a, b) => a - b);
console.log(
  `\nmachine: ${cpuCount()} CPUs; 1-minute load average during the run ${fmt(sortedLoads[0], 1)} .. ${fmt(median(loads), 1)} (median) .. ${fmt(sortedLoads.at(-1), 1)}; ` +
    `CPU ${SERVER_CPU} busy with other processes during the load runs: ${fmt(median(foreign) * 100)} % median, ${fmt(Math.max(...foreign) * 100)} % at most`,
);
if (failures.length) console.log(`\nfailures (figures missing from the medians):\n${failures.join('\n')}`);
console.log(`rounds, raw: ${JSON.stringify({ base: baseRounds, scale: scaleRounds })}`);
