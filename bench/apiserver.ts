// npm run bench:apiserver: the webhook as users feel it, through kube-apiserver (issue #30 §1).
// A real kube-apiserver + etcd; one webhook registered at a time (`serve` from the image's bundle,
// the AWS peer, the Azure peer, built by scripts/provide-peers.sh, and none for the baseline);
// dry-run Pod creates at fixed rates from an open-loop client. Per rate and server: kube-apiserver's
// own apiserver_admission_webhook_admission_duration_seconds (mean, and p50/p99 from its buckets),
// the client's create latency, failed creates by message, the connections the webhook accepted
// (at its side), the protocol ALPN picked, and the webhook's CPU per Pod. Then two `serve`
// replicas behind a round-robin TCP balancer (a Service's per-connection balancing): how the
// reviews spread, with and without --max-connection-age-seconds.
//
// Each webhook is registered as users have it: at a non-loopback address of this host (in the
// URL and the serving certificate), which kube-apiserver treats as it treats a Service: it offers
// HTTP/1.1 alone (k8s.io/apiserver pkg/util/webhook/client.go, kubernetes/kubernetes#75791).
// --localhost registers them at 127.0.0.1 instead, the one case where it offers h2 (a webhook
// serving beside kube-apiserver on a control-plane host); the header says which.
//
// The webhook runs on CPU 0 (taskset; GOMAXPROCS=1 for the Go peers); kube-apiserver, etcd and
// the client on the others. No figure is judged here: the table is printed, the machine with it.
//
// `floor` and `core` split serve's cost: the floor (support/floor.ts) is a bare Node HTTPS server that
// parses the review and allows it, what any Node webhook pays; `core` is the same server answering
// with serve's admission core (support/floor-core.ts: the review parsed and checked, admitPod,
// the answer) and the corpus's ServiceAccounts in a Map, no framework, budgets, log or metrics.
// serve minus core is what those cost; core minus floor what the admission itself costs.
//
// `policy` (issue 32 item 5): the chart's MutatingAdmissionPolicy, each namespace's parameters
// rendered by the core, no webhook; with it every server runs on the newest kube-apiserver (1.36
// or later), its time is kube-apiserver's for the MutatingAdmissionPolicy plugin. Every row gives
// kube-apiserver's CPU per Pod (/proc/<pid>/stat).
//
//   npm run bench:apiserver [-- --rates 25,50,100,200,500,1000] [--seconds 10] [--servers none,serve,aws,azure,policy,floor,core]
//                           [--spread-rate 100] [--spread-seconds 30] [--spread-age 10] [--phases rates,spread]
//                           [--localhost] [--corpus bench|charts] [--patch-rounds 5] [--warm-reviews 3000]
//                           [--idle-seconds 10]
//
// --warm-reviews: creates through each webhook before it is measured (closed loop, 16 at a time),
// as a webhook in a cluster has served for a while: a fresh Node process compiles its code as it
// first runs it, and `serve`'s first 100 reviews at 25 a second cost it about 1.6 ms of CPU each,
// against 0.8 once warm (the Go peers have no such start). 0 measures the cold start.
// --idle-seconds: the webhook's CPU with no review, measured that long once the warm-up settled
// (17 s after it), shown beside its CPU per Pod; 0 skips it.
//
// --corpus: the Pods created. `bench` (the default): bench:peers' generated Pods (5 to 40 KB, mean
// 26 KB), each as a ServiceAccount with the stream's identity. `charts`: the Pods of real charts
// (test/fixtures/peer-diff/corpus via support/corpora.ts, mean 2 KB) in their namespaces, as their
// own ServiceAccounts (some without identity, some edge cases); Azure's stream has only the Pods
// its objectSelector's label sends. The header says which, with the sizes.
//
// The `patch` phase (--phases ...,patch; not a default): what kube-apiserver pays to apply serve's
// JSON Patch, against the same Pod as one whole-array `add` of /spec/containers (and
// initContainers) as the AWS peer answers, per Pod of the corpus (bench/patch-cost/).
import { writeFileSync } from 'node:fs';
import { cpus, homedir, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { CLI } from '../test/harness/cli-process.ts';
import { chartMemory } from '../test/support/cgroup.ts';
import { TENANT as AZURE_TENANT } from '../test/support/identities.ts';
import { providePeers, servingCertificate, startPeer, type TlsFiles } from '../test/support/peer-diff.ts';
import { startTcpProxy } from '../test/support/tcp-proxy.ts';
import { hostAddress, startWebhook, until } from '../test/support/webhook.ts';
import {
  adminAgent,
  createAtRate,
  createMany,
  histogramOf,
  negotiated,
  offeredBy,
  quantile,
  since,
  watchConnections,
  type CreateRun,
  type Histogram,
  type PodToCreate,
} from './support/apiserver.ts';
import { createAll } from './support/cluster.ts';
import type { CoreFile } from './support/floor-core.ts';
import { startFloorProcess } from './support/floor-process.ts';
import { chartAccounts, chartObjects, chartPods, CORPORA, type Corpus } from './support/corpora.ts';
import { patchCases, providePatchCost, runPatchCost, type PatchCost, type PatchTool } from './patch-cost/patch-cost.ts';
import type { ServiceAccountView } from '../src/kube/types.ts';
import { createProviders } from '../src/clouds/index.ts';
import { loadConfig } from '../src/config.ts';
import { renderParameters } from '../src/policy-mode/parameters.ts';
import {
  PARAMETERS_GROUP,
  PARAMETERS_PLURAL,
  PARAMETERS_VERSION,
  parametersObject,
} from '../src/policy-mode/policy.ts';
import { chartPolicyMode, installPolicyMode } from '../test/support/policy-mode.ts';
import { cpuCount, cpuSecondsOf, foreignLoad, pin } from './support/host.ts';
import { percentile } from './support/load.ts';
import { benchPod, rng } from './support/reviews.ts';

const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');
const { values: opts } = parseArgs({
  options: {
    rates: { type: 'string', default: '25,50,100,200,500,1000' },
    seconds: { type: 'string', default: '10' },
    warm: { type: 'string', default: '2' },
    'warm-reviews': { type: 'string', default: '3000' },
    'idle-seconds': { type: 'string', default: '10' },
    servers: { type: 'string', default: 'none,serve,aws,azure' },
    connections: { type: 'string', default: '256' },
    phases: { type: 'string', default: 'rates,spread' },
    'spread-rate': { type: 'string', default: '100' },
    'spread-seconds': { type: 'string', default: '30' },
    'spread-age': { type: 'string', default: '10' },
    localhost: { type: 'boolean', default: false },
    corpus: { type: 'string', default: 'bench' },
    'patch-rounds': { type: 'string', default: '5' },
  },
});
const RATES = opts.rates.split(',').map(Number);
const SECONDS = Number(opts.seconds);
const WARM_S = Number(opts.warm);
const WARM_REVIEWS = Number(opts['warm-reviews']);
const IDLE_S = Number(opts['idle-seconds']);
if (!(IDLE_S >= 0)) throw new Error(`--idle-seconds: "${opts['idle-seconds']}" is not a number of 0 or more`);
if (!Number.isInteger(WARM_REVIEWS) || WARM_REVIEWS < 0)
  throw new Error(`--warm-reviews: "${opts['warm-reviews']}" is not a whole number of 0 or more`);
const SERVERS = opts.servers.split(',').filter(Boolean);
const CONNECTIONS = Number(opts.connections);
const PHASES = new Set(opts.phases.split(','));
for (const p of PHASES)
  if (!['rates', 'spread', 'patch'].includes(p))
    throw new Error(`--phases: unknown phase "${p}"; expected rates, spread or patch`);
if (!(CORPORA as string[]).includes(opts.corpus))
  throw new Error(`--corpus: unknown corpus "${opts.corpus}"; expected ${CORPORA.join(' or ')}`);
const CORPUS = opts.corpus as Corpus;
const PATCH_ROUNDS = Number(opts['patch-rounds']);
if (!Number.isInteger(PATCH_ROUNDS) || PATCH_ROUNDS < 1)
  throw new Error(`--patch-rounds: "${opts['patch-rounds']}" is not a whole number of 1 or more`);
const SPREAD = { rate: Number(opts['spread-rate']), seconds: Number(opts['spread-seconds']), age: opts['spread-age'] };
const NODE_FLAGS = chartMemory().nodeOptions;
const WEBHOOK_CPU = '0';
/** Where kube-apiserver reaches the webhooks: loopback only with --localhost (then it offers h2). */
const LOCALHOST = opts.localhost;
const ADDRESS = LOCALHOST ? '127.0.0.1' : hostAddress();
const urlAt = (port: number, path = '/mutate') => `https://${ADDRESS}:${port}${path}`;
for (const s of SERVERS)
  if (!['none', 'serve', 'aws', 'azure', 'policy', 'floor', 'core'].includes(s))
    throw new Error(`--servers: unknown server "${s}"; expected none, serve, aws, azure, policy, floor or core`);
/** The policy mode needs kube-apiserver 1.36: with it every server runs on the newest one. */
const POLICY = SERVERS.includes('policy');

// ------------------------------------------------------------------ the cluster's contents

type Stream = 'aws' | 'azure';
const NAMESPACES = 20;
const ACCOUNTS = 50;
const ANNOTATIONS: Record<Stream, Record<string, string>> = {
  aws: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench' },
  azure: {
    'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
    'azure.workload.identity/tenant-id': AZURE_TENANT,
  },
};
/** What a mutated Pod of the stream carries, and the label the Azure peer's objectSelector asks for. */
const MARKER: Record<Stream, string> = { aws: 'AWS_ROLE_ARN', azure: 'AZURE_CLIENT_ID' };
const LABELS: Record<Stream, Record<string, string> | undefined> = {
  aws: undefined,
  azure: { 'azure.workload.identity/use': 'true' },
};

async function populate(cp: ControlPlane) {
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `team-${i}`);
  await createAll(
    cp,
    namespaces.map((name) => ({ path: '/api/v1/namespaces', body: { metadata: { name } } })),
  );
  const accounts = [];
  for (const stream of ['aws', 'azure'] as Stream[])
    for (let i = 0; i < ACCOUNTS; i++)
      accounts.push({
        path: `/api/v1/namespaces/team-${i % NAMESPACES}/serviceaccounts`,
        body: { metadata: { name: `sa-${stream}-${i}`, annotations: ANNOTATIONS[stream] } },
      });
  await createAll(cp, accounts);
  // The charts' namespaces, then their ServiceAccounts (both clouds': the policy's parameters name all).
  if (CORPUS === 'charts') for (const items of chartObjects(['aws', 'azure'])) await createAll(cp, items);
  // Each namespace's `default`, as kube-controller-manager (not run here) would create it: the charts'
  // Pods that name no ServiceAccount run as it, and a webhook that reads it would find none.
  if (CORPUS === 'charts')
    await createAll(
      cp,
      chartNamespaces().map((ns) => defaultAccount(ns)),
    );
}

const chartNamespaces = () => [...new Set(chartAccounts(['aws', 'azure']).map((a) => a.namespace))];
const defaultAccount = (namespace: string) => ({
  path: `/api/v1/namespaces/${namespace}/serviceaccounts`,
  body: { metadata: { name: 'default' } },
});

/** The ServiceAccounts the corpus's Pods run as, as the core sees them. */
function accountsOf(): ServiceAccountView[] {
  if (CORPUS === 'charts') {
    const accounts: ServiceAccountView[] = chartAccounts(['aws', 'azure']);
    const named = new Set(accounts.map((a) => `${a.namespace}/${a.name}`));
    for (const namespace of chartNamespaces())
      if (!named.has(`${namespace}/default`)) accounts.push({ namespace, name: 'default', uid: '', annotations: {} });
    return accounts;
  }
  return (['aws', 'azure'] as Stream[]).flatMap((stream) =>
    Array.from({ length: ACCOUNTS }, (_, i) => ({
      namespace: `team-${i % NAMESPACES}`,
      name: `sa-${stream}-${i}`,
      uid: '',
      annotations: ANNOTATIONS[stream],
    })),
  );
}

interface CorpusPod extends PodToCreate {
  /** Its ServiceAccount carries the stream's identity. */
  mutated: boolean;
}

const streams = new Map<Stream, CorpusPod[]>();
/**
 * The Pods of a stream. `bench`: bench:peers' shapes (bench/support/reviews.ts), each with the
 * stream's identity. `charts`: the charts' Pods of the stream's cloud, in their own namespaces.
 */
function podsOf(stream: Stream): CorpusPod[] {
  const known = streams.get(stream);
  if (known) return known;
  const rand = rng(42);
  const pods =
    CORPUS === 'charts'
      ? chartPods(stream).map(({ namespace, pod, mutated }) => ({
          namespace,
          body: Buffer.from(JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...pod })),
          mutated,
        }))
      : Array.from({ length: 300 }, (_, i) => {
          // The namespace populate() created this ServiceAccount in: every Pod names one that exists.
          const account = i % ACCOUNTS;
          const namespace = `team-${account % NAMESPACES}`;
          const place = { namespace, serviceAccount: `sa-${stream}-${account}`, labels: LABELS[stream] };
          return { namespace, body: Buffer.from(JSON.stringify(benchPod(i, place, rand))), mutated: true };
        });
  streams.set(stream, pods);
  return pods;
}

/** The Pod whose create shows whether the webhook is called: one it must mutate, not marked already. */
function probeOf(stream: Stream): PodToCreate {
  const probe = podsOf(stream).find((p) => p.mutated && !`${p.body}`.includes(MARKER[stream]));
  if (!probe) throw new Error(`the ${CORPUS} corpus has no ${stream} Pod to be mutated, to probe with`);
  return probe;
}

/** "charts, AWS: 24 Pods (18 to be mutated), 0.9 to 6.1 KB, mean 2.3, median 1.9" for the header. */
function describePods(stream: Stream): string {
  const pods = podsOf(stream);
  const kb = pods.map((p) => p.body.length / 1000).sort((a, b) => a - b);
  const mean = kb.reduce((a, b) => a + b, 0) / kb.length;
  const mutated = pods.filter((p) => p.mutated).length;
  return `${CORPUS}, ${stream === 'aws' ? 'AWS' : 'Azure'}: ${pods.length} Pods (${mutated} to be mutated), ${kb[0].toFixed(1)} to ${kb.at(-1)?.toFixed(1)} KB, mean ${mean.toFixed(1)}, median ${kb[kb.length >> 1].toFixed(1)}`;
}

// ------------------------------------------------------------------ the webhooks

interface Running {
  /** The processes whose CPU is the webhook's. */
  pids: number[];
  /** Where kube-apiserver sends the reviews, and the ports the webhook itself listens on. */
  url: string;
  ports: number[];
  caPem: string;
  /** Connections `serve` closed so far, by reason (its wiw_connections_closed_total), all replicas. */
  closed?: () => Promise<Map<string, number>>;
  stop(): Promise<void>;
}

async function startServe(cp: ControlPlane, tls: TlsFiles, args: string[] = []) {
  const wh = await startWebhook(cp, ['--azure-tenant-id', AZURE_TENANT, ...args], {
    tls,
    host: LOCALHOST ? '127.0.0.1' : '0.0.0.0',
    wrap: (command, rest) => ['taskset', ['-c', WEBHOOK_CPU, command, ...rest]],
    env: { NODE_OPTIONS: NODE_FLAGS },
  });
  const reviews = async () => {
    const text = await wh.metrics();
    let n = 0;
    for (const m of text.matchAll(/^wiw_admission_requests_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
    return n;
  };
  return { wh, reviews };
}

/** Connections the replicas closed so far, by reason. */
async function closedBy(replicas: { wh: { metrics(): Promise<string> } }[]) {
  const out = new Map<string, number>();
  for (const r of replicas)
    for (const m of (await r.wh.metrics()).matchAll(/^wiw_connections_closed_total\{reason="(\w+)"\} (\d+)/gm))
      out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[2]));
  return out;
}

async function startOne(cp: ControlPlane, tls: TlsFiles, server: string, binaries: Record<string, string>) {
  if (server === 'serve') {
    const replica = await startServe(cp, tls);
    const { wh } = replica;
    const running: Running = {
      pids: [wh.process.pid],
      url: urlAt(wh.port),
      ports: [wh.port],
      caPem: tls.caPem,
      closed: () => closedBy([replica]),
      stop: wh.stop,
    };
    return running;
  }
  if (server === 'floor') return startFloor(cp, tls);
  if (server === 'core') return startFloor(cp, tls, coreFile(cp));
  const kind = server as Stream;
  const peer = await startPeer(
    cp,
    {
      id: `${kind}/bench-apiserver`,
      peer: kind,
      peerArgs: [],
      peerEnv: { GOMAXPROCS: '1', ...(kind === 'azure' ? { AZURE_TENANT_ID: AZURE_TENANT } : {}) },
      ourArgs: [],
    },
    binaries[`${kind.toUpperCase()}_PEER`],
    tls,
    CACHE,
  );
  pin(peer.proc.pid, WEBHOOK_CPU);
  // The peers listen on every address; kube-apiserver reaches them where it reaches serve.
  const { port, pathname } = new URL(peer.url);
  const running: Running = {
    pids: [peer.proc.pid],
    url: urlAt(Number(port), pathname),
    ports: [Number(port)],
    caPem: tls.caPem,
    stop: () => peer.proc.stop(),
  };
  return running;
}

/**
 * The floor of bench:peers (support/floor.ts: a bare Node HTTPS server that parses the review and
 * allows it, no patch), on the webhook's CPU with serve's Node flags: what any Node webhook pays.
 * With `core`, the same server answers with serve's admission core (support/floor-core.ts).
 */
async function startFloor(cp: ControlPlane, tls: TlsFiles, core?: string): Promise<Running> {
  const host = LOCALHOST ? '127.0.0.1' : '0.0.0.0';
  const log = join(cp.dir, core ? 'core.log' : 'floor.log');
  const { proc, port } = await startFloorProcess({ tls, cpu: WEBHOOK_CPU, nodeOptions: NODE_FLAGS, log, host, core });
  return { pids: [proc.pid], url: urlAt(port), ports: [port], caPem: tls.caPem, stop: () => proc.stop() };
}

/** The core's flags (serve's, as startServe passes them) and the corpus's ServiceAccounts, in a file. */
function coreFile(cp: ControlPlane): string {
  const file = join(cp.dir, 'core.json');
  const core: CoreFile = { flags: { 'azure-tenant-id': AZURE_TENANT }, accounts: accountsOf() };
  writeFileSync(file, JSON.stringify(core));
  return file;
}

const CONFIGS = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

/** Registers the webhook at `url` for Pod CREATEs and waits until kube-apiserver calls it. */
async function register(
  cp: ControlPlane,
  server: string,
  name: string,
  where: { url: string; caPem: string },
  stream: Stream,
  probe: PodToCreate,
) {
  const { url, caPem } = where;
  const webhook = `w.${name}.workload-identity-webhook.io`;
  const res = await cp.request('POST', CONFIGS, {
    metadata: { name },
    webhooks: [
      {
        name: webhook,
        // The AWS peer answers a v1 review without apiVersion and kind, which kube-apiserver
        // refuses: its own configuration (deploy/mutatingwebhook.yaml) asks for v1beta1.
        admissionReviewVersions: server === 'aws' ? ['v1beta1'] : ['v1'],
        sideEffects: 'None',
        timeoutSeconds: 10,
        failurePolicy: 'Fail',
        reinvocationPolicy: 'IfNeeded',
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        ...(stream === 'azure' ? { objectSelector: { matchLabels: LABELS.azure } } : {}),
        clientConfig: { url, caBundle: Buffer.from(caPem).toString('base64') },
      },
    ],
  });
  if (res.status !== 201) throw new Error(`registering ${name}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
  // The floor mutates nothing: kube-apiserver's count of its calls shows that it is called.
  const called = (yes: boolean) =>
    server === 'floor' ? untilCalled(cp, probe, webhook, yes) : untilMutated(cp, probe, stream, yes);
  await called(true);
  return {
    webhook,
    remove: async () => {
      await cp.request('DELETE', `${CONFIGS}/${name}`);
      await called(false);
    },
  };
}

/** The clouds as `serve` is started here (--azure-tenant-id), for the core's own answers. */
const serveProviders = () => createProviders(loadConfig(new Map([['azure-tenant-id', AZURE_TENANT]]), {}));

const BINDINGS = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings';
/** The metric kube-apiserver times the policy plugin with (it has none per policy). */
const POLICY_PLUGIN = 'MutatingAdmissionPolicy';

/**
 * The policy mode as the chart installs it, each namespace's parameters rendered by the core from
 * the benchmark's ServiceAccounts (as the controller writes them); removing it deletes the binding.
 */
async function registerPolicy(cp: ControlPlane, probe: PodToCreate) {
  await installPolicyMode(cp);
  const byNamespace = new Map<string, ServiceAccountView[]>();
  for (const view of accountsOf()) byNamespace.set(view.namespace, [...(byNamespace.get(view.namespace) ?? []), view]);
  for (const [namespace, views] of byNamespace) {
    const { spec } = renderParameters(serveProviders(), namespace, views);
    const path = `/apis/${PARAMETERS_GROUP}/${PARAMETERS_VERSION}/namespaces/${namespace}/${PARAMETERS_PLURAL}`;
    const r = await cp.request('POST', path, parametersObject(namespace, spec));
    if (r.status !== 201) throw new Error(`parameters of ${namespace}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
  }
  await untilMutated(cp, probe, 'aws', true);
  const { binding } = await chartPolicyMode();
  return {
    webhook: POLICY_PLUGIN,
    remove: async () => {
      await cp.request('DELETE', `${BINDINGS}/${(binding as unknown as { metadata: { name: string } }).metadata.name}`);
      await untilMutated(cp, probe, 'aws', false);
    },
  };
}

async function untilMutated(cp: ControlPlane, probe: PodToCreate, stream: Stream, mutated: boolean) {
  let last = '';
  await until(
    mutated ? 'kube-apiserver to call the webhook' : 'kube-apiserver to stop calling the webhook',
    async () => {
      const r = await cp.request(
        'POST',
        `/api/v1/namespaces/${probe.namespace}/pods?dryRun=All`,
        JSON.parse(`${probe.body}`),
      );
      last = `HTTP ${r.status}: ${r.body.slice(0, 300)}`;
      return r.status === 201 && r.body.includes(MARKER[stream]) === mutated;
    },
    60_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; the last create: ${last}`);
  });
}

/** Until a create of `probe` is (or is no longer) counted in kube-apiserver's calls of `webhook`. */
async function untilCalled(cp: ControlPlane, probe: PodToCreate, webhook: string, called: boolean) {
  await until(called ? 'kube-apiserver to call the floor' : 'kube-apiserver to stop calling the floor', async () => {
    const before = (await scrape(cp, webhook))?.count ?? 0;
    const r = await cp.request(
      'POST',
      `/api/v1/namespaces/${probe.namespace}/pods?dryRun=All`,
      JSON.parse(`${probe.body}`),
    );
    const after = (await scrape(cp, webhook))?.count ?? 0;
    return r.status === 201 && after > before === called;
  });
}

// ------------------------------------------------------------------ one measured run

interface Figures {
  server: string;
  stream: Stream;
  rate: number;
  run: CreateRun;
  webhook?: Histogram;
  cpuUsPerPod?: number;
  connections?: { accepted: number; mostAtOnce: number };
  protocol?: string;
  /** Share of the webhook's CPU other processes took meanwhile (the machine is shared). */
  foreign?: number;
  /** Connections `serve` closed during the run, by reason. */
  closed?: Map<string, number>;
  /** The webhook's CPU with no Pods coming, ms a second (timers, watches, the garbage collector). */
  idleMsPerS?: number;
  /** kube-apiserver's CPU per Pod created (/proc/<pid>/stat), µs. */
  apiserverUsPerPod?: number;
}

/** CPU the processes use doing nothing for `seconds`, ms a second. */
/** --warm-reviews creates through the server before it is measured: a process that has served for a while. */
async function warmUp(cp: ControlPlane, server: string, pods: PodToCreate[]) {
  const agent = adminAgent(cp, CONNECTIONS);
  try {
    const { failed } = await createMany(agent, cp, pods, WARM_REVIEWS);
    if (failed) console.log(`  ${NAMES[server]}: ${fmt(failed)} of the ${fmt(WARM_REVIEWS)} warm-up creates failed`);
  } finally {
    agent.destroy();
  }
}

/**
 * CPU ms a second with no review, once the work before has settled: 17 s after it (serve hands
 * memory back once quiet for 10 s, checked every 5 s), then `seconds` measured.
 */
async function idleCpu(pids: number[], seconds: number): Promise<number> {
  await sleep(17_000);
  const before = cpuOf(pids);
  await sleep(seconds * 1000);
  return ((cpuOf(pids) - before) / seconds) * 1000;
}

async function scrape(cp: ControlPlane, webhook: string | undefined): Promise<Histogram | undefined> {
  if (!webhook) return undefined;
  const text = (await cp.request('GET', '/metrics')).body;
  // The policy: the admission plugin's own time (mutating step), as kube-apiserver times no policy alone.
  if (webhook === POLICY_PLUGIN)
    return histogramOf(
      text,
      'apiserver_admission_controller_admission_duration_seconds',
      (l) => l.includes(`name="${POLICY_PLUGIN}"`) && l.includes('type="admit"'),
    );
  return histogramOf(text, 'apiserver_admission_webhook_admission_duration_seconds', (l) =>
    l.includes(`name="${webhook}"`),
  );
}

const cpuOf = (pids: number[]) => pids.reduce((s, pid) => s + cpuSecondsOf(pid), 0);

async function measure(
  cp: ControlPlane,
  target: { running?: Running; webhook?: string; server: string; stream: Stream; idleMsPerS?: number },
  pods: PodToCreate[],
  rate: number,
  seconds = SECONDS,
): Promise<Figures> {
  const agent = adminAgent(cp, CONNECTIONS);
  try {
    await createAtRate(agent, cp, pods, rate, WARM_S);
    const { running, webhook } = target;
    const before = await scrape(cp, webhook);
    const cpu0 = running ? cpuOf(running.pids) : 0;
    const apiserver0 = cpuSecondsOf(cp.pids.kubeApiserver);
    const closed0 = await running?.closed?.();
    const watch = running ? watchConnections(running.ports[0]) : undefined;
    const work = () => createAtRate(agent, cp, pods, rate, seconds);
    const { result: run, foreign } = running
      ? await foreignLoad(Number(WEBHOOK_CPU), running.pids[0], work)
      : { result: await work(), foreign: undefined };
    const connections = watch?.stop();
    const apiserverUsPerPod = run.latencies.length
      ? ((cpuSecondsOf(cp.pids.kubeApiserver) - apiserver0) / run.latencies.length) * 1e6
      : undefined;
    const after = await scrape(cp, webhook);
    const calls = before && after ? since(before, after) : undefined;
    const cpuUsPerPod = running && calls?.count ? ((cpuOf(running.pids) - cpu0) / calls.count) * 1e6 : undefined;
    const protocol = running ? await negotiated(running.url, running.caPem) : undefined;
    const closed = await running?.closed?.();
    for (const [reason, n] of closed ?? []) closed?.set(reason, n - (closed0?.get(reason) ?? 0));
    return {
      ...target,
      rate,
      run,
      webhook: calls,
      cpuUsPerPod,
      connections,
      protocol,
      foreign,
      closed,
      apiserverUsPerPod,
    };
  } finally {
    agent.destroy();
  }
}

// ------------------------------------------------------------------ the phases

/** The rate was kept: every create answered within 2 s of the run's end, and 90 % of the rate done. */
const sustained = (f: Figures) =>
  f.run.seconds <= SECONDS + 2 && f.run.latencies.length + failed(f.run) >= 0.9 * f.rate * SECONDS;
/** Rates above this are not run: one below was not sustained (by the baseline, or by this server). */
let ceiling = { rate: Number.POSITIVE_INFINITY, why: '' };

/** Each server alone, at each rate. */
async function ratesPhase(cp: ControlPlane, tls: TlsFiles, binaries: Record<string, string>) {
  const out: Figures[] = [];
  const plan: { server: string; stream: Stream }[] = [];
  const peers = SERVERS.filter((s) => s === 'aws' || s === 'azure') as Stream[];
  for (const server of SERVERS) {
    if (server === 'none' || server === 'policy' || server === 'floor' || server === 'core')
      plan.push({ server, stream: 'aws' });
    else if (server === 'serve')
      for (const stream of peers.length ? peers : ['aws' as Stream]) plan.push({ server, stream });
    else plan.push({ server, stream: server as Stream });
  }
  let baseline = { rate: Number.POSITIVE_INFINITY, why: '' };
  for (const { server, stream } of plan) {
    ceiling = baseline;
    const pods = podsOf(stream);
    const running = server === 'none' || server === 'policy' ? undefined : await startOne(cp, tls, server, binaries);
    try {
      const reg =
        server === 'policy'
          ? await registerPolicy(cp, probeOf('aws'))
          : running
            ? await register(cp, server, `bench-${server}-${stream}`, running, stream, probeOf(stream))
            : undefined;
      if (reg && WARM_REVIEWS) await warmUp(cp, server, pods);
      const idleMsPerS = running && IDLE_S ? await idleCpu(running.pids, IDLE_S) : undefined;
      for (const rate of RATES) {
        // A rate above what kube-apiserver sustains here only queues (each create waits up to 60 s).
        if (rate > ceiling.rate) {
          console.log(`  ${fmt(rate)}/s ${NAMES[server]}: not run (${ceiling.why})`);
          continue;
        }
        const f = await measure(cp, { running, webhook: reg?.webhook, server, stream, idleMsPerS }, pods, rate);
        out.push(f);
        console.log(`  ${rowOf(f).join(' | ')}`);
        if (!sustained(f)) ceiling = { rate, why: `${NAMES[server]} at ${fmt(rate)}/s was not sustained` };
      }
      await reg?.remove();
      if (server === 'none')
        baseline = { ...ceiling, why: `kube-apiserver without a webhook did not sustain ${fmt(ceiling.rate)}/s here` };
    } finally {
      await running?.stop();
    }
  }
  return out;
}

interface Spread {
  setting: string;
  reviews: number[];
  connections: number[];
  figures: Figures;
}

let spreadRuns = 0;
/** Two `serve` replicas behind a round-robin TCP balancer; kube-apiserver dials the balancer. */
async function spreadRun(cp: ControlPlane, tls: TlsFiles, setting: string, args: string[]): Promise<Spread> {
  const replicas = [await startServe(cp, tls, args), await startServe(cp, tls, args)];
  const connections = [0, 0];
  let next = 0;
  const proxy = await startTcpProxy(() => {
    const i = next++ % 2;
    connections[i]++;
    return replicas[i].wh.port;
  }, ADDRESS);
  try {
    const pods = podsOf('aws');
    const url = urlAt(proxy.port);
    const where = { url, caPem: tls.caPem };
    const reg = await register(cp, 'serve', `bench-spread-${++spreadRuns}`, where, 'aws', probeOf('aws'));
    const before = await Promise.all(replicas.map((r) => r.reviews()));
    const c0 = [...connections];
    const running: Running = {
      pids: replicas.map((r) => r.wh.process.pid),
      url,
      ports: [proxy.port],
      caPem: tls.caPem,
      closed: () => closedBy(replicas),
      stop: async () => {},
    };
    const server = `2 x serve, ${setting}`;
    const figures = await measure(
      cp,
      { running, webhook: reg.webhook, server, stream: 'aws' },
      pods,
      SPREAD.rate,
      SPREAD.seconds,
    );
    const after = await Promise.all(replicas.map((r) => r.reviews()));
    await reg.remove();
    console.log(`  ${setting}: reviews per replica ${after.map((n, i) => n - before[i]).join(' / ')}`);
    return {
      setting,
      reviews: after.map((n, i) => n - before[i]),
      connections: connections.map((n, i) => n - c0[i]),
      figures,
    };
  } finally {
    proxy.close();
    for (const r of replicas) await r.wh.stop();
  }
}

/**
 * What the two-replica runs compare. Behind a Service (the default) kube-apiserver speaks HTTP/1.1:
 * without and with a connection age. Over h2 (--localhost) one connection can carry every review.
 */
function spreadSettings(): [string, string[]][] {
  const age = ['--max-connection-age-seconds', SPREAD.age];
  const never = ['--max-connection-age-seconds', '0'];
  if (!LOCALHOST)
    return [
      ['HTTP/1.1, no connection age', never],
      [`HTTP/1.1, --max-connection-age-seconds ${SPREAD.age}`, age],
    ];
  return [
    ['HTTP/2, no connection age', never],
    [`HTTP/2, --max-connection-age-seconds ${SPREAD.age}`, age],
    ['HTTP/1.1 (--http2=false)', ['--http2=false', ...never]],
  ];
}

interface PatchRow {
  stream: Stream;
  cost: PatchCost;
  unpatched: number;
}

/**
 * Each stream's Pods through the core (serve's patch) and then through json-patch as kube-apiserver
 * applies it, against the whole-array patch of the same Pod. No webhook is registered meanwhile.
 */
async function patchPhase(cp: ControlPlane, tool: PatchTool): Promise<PatchRow[]> {
  const accounts = new Map(accountsOf().map((a) => [`${a.namespace}/${a.name}`, a]));
  const out: PatchRow[] = [];
  for (const stream of ['aws', 'azure'] as Stream[]) {
    const { cases, unpatched } = await patchCases(cp, podsOf(stream), serveProviders(), (namespace, name) =>
      accounts.get(`${namespace}/${name}`),
    );
    const cost = runPatchCost(tool, cases, PATCH_ROUNDS, WEBHOOK_CPU);
    out.push({ stream, cost, unpatched });
    console.log(`  ${patchRowOf(out.at(-1) as PatchRow).join(' | ')}`);
  }
  return out;
}

// ------------------------------------------------------------------ the tables

const fmt = (x: number | undefined, digits = 0) =>
  x === undefined || !Number.isFinite(x)
    ? '–'
    : x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ms = (x: number | undefined) => fmt(x, x !== undefined && x < 10 ? 1 : 0);
const NAMES: Record<string, string> = {
  none: 'no webhook',
  serve: 'serve',
  aws: 'AWS peer',
  azure: 'Azure peer',
  policy: 'policy (MAP)',
  floor: 'floor (bare Node)',
  core: "core (floor + serve's admission)",
};
const failed = (run: CreateRun) => [...run.failures.values()].reduce((a, b) => a + b, 0);

const HEADER = [
  'Pods/s asked (done)',
  'server (Pods)',
  'protocol',
  'connections accepted (most at once)',
  "kube-apiserver's webhook (policy: plugin) time: mean / p50 / p99, ms",
  'client create p50 / p99, ms',
  'kube-apiserver CPU per Pod',
  'webhook CPU per Pod',
  'failed creates',
];

function rowOf(f: Figures): string[] {
  const { run, webhook: h } = f;
  const done = (run.latencies.length + failed(run)) / run.seconds;
  return [
    `${fmt(f.rate)} (${fmt(done)})`,
    `${NAMES[f.server] ?? f.server} (${f.stream === 'aws' ? 'AWS' : 'Azure'})`,
    f.protocol ?? '–',
    f.connections ? `${fmt(f.connections.accepted)} (${fmt(f.connections.mostAtOnce)})` : '–',
    h ? `${ms((h.sum / h.count) * 1000)} / ${ms(quantile(h, 0.5) * 1000)} / ${ms(quantile(h, 0.99) * 1000)}` : '–',
    `${ms(percentile(run.latencies, 0.5))} / ${ms(percentile(run.latencies, 0.99))}`,
    f.apiserverUsPerPod === undefined ? '–' : `${fmt(f.apiserverUsPerPod)} µs`,
    f.cpuUsPerPod === undefined
      ? '–'
      : `${fmt(f.cpuUsPerPod)} µs${f.idleMsPerS === undefined ? '' : ` (idle ${fmt(f.idleMsPerS, 1)} ms/s)`}`,
    fmt(failed(run)),
  ];
}

const markdown = (header: string[], rows: string[][]) =>
  [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

const PATCH_HEADER = [
  'corpus, cloud (Pods patched of the stream)',
  "serve's patch: CPU µs per apply (ops, bytes)",
  'whole /spec/containers: CPU µs per apply (ops, bytes)',
  'serve / whole',
  'same Pod',
];

function patchRowOf({ stream, cost: c, unpatched }: PatchRow): string[] {
  const us = (x: number) => fmt(x, x < 100 ? 1 : 0);
  return [
    `${CORPUS}, ${stream === 'aws' ? 'AWS' : 'Azure'} (${fmt(c.pods)} of ${fmt(c.pods + unpatched)})`,
    `${us(c.serveUs)} µs (${fmt(c.serveOps, 1)} ops, ${fmt(c.serveBytes)} B)`,
    `${us(c.wholeUs)} µs (${fmt(c.wholeOps, 1)} ops, ${fmt(c.wholeBytes)} B)`,
    `${fmt(c.serveUs / c.wholeUs, 2)}x`,
    `${c.same === c.pods ? 'yes' : 'NO'}, ${fmt(c.same)} of ${fmt(c.pods)}`,
  ];
}

function spreadTable(runs: Spread[]) {
  const share = (xs: number[]) => {
    const total = xs.reduce((a, b) => a + b, 0);
    return xs.map((x) => `${fmt(x)} (${fmt(total ? (100 * x) / total : Number.NaN)} %)`).join(' / ');
  };
  return markdown(
    [
      `2 replicas at ${fmt(SPREAD.rate)} Pods/s, ${SPREAD.seconds} s`,
      'reviews per replica (share)',
      'connections opened per replica',
      'protocol',
      "kube-apiserver's webhook time: mean / p99, ms",
      'failed creates',
    ],
    runs.map((r) => {
      const h = r.figures.webhook;
      return [
        r.setting,
        share(r.reviews),
        r.connections.map((n) => fmt(n)).join(' / '),
        r.figures.protocol ?? '–',
        h ? `${ms((h.sum / h.count) * 1000)} / ${ms(quantile(h, 0.99) * 1000)}` : '–',
        fmt(failed(r.figures.run)),
      ];
    }),
  );
}

function failures(all: Figures[]) {
  const lines: string[] = [];
  const closing: string[] = [];
  for (const f of all) {
    const who = `${NAMES[f.server] ?? f.server} at ${f.rate}/s`;
    for (const [message, n] of f.run.failures) lines.push(`  ${who}: ${n} x ${message}`);
    const closed = [...(f.closed ?? [])].filter(([, n]) => n > 0).map(([reason, n]) => `${reason} ${n}`);
    if (closed.length) closing.push(`  ${who}: ${closed.join(', ')}`);
  }
  return [
    lines.length ? `failed creates, by message:\n${lines.join('\n')}` : 'failed creates: none',
    closing.length ? `connections serve closed, by reason:\n${closing.join('\n')}` : 'connections serve closed: none',
  ].join('\n');
}

// ------------------------------------------------------------------ main

if (cpuCount() < 2) throw new Error('bench:apiserver needs two CPUs: one for the webhook, one for kube-apiserver');
const peers = SERVERS.filter((s) => s === 'aws' || s === 'azure');
const binaries = peers.length ? providePeers(peers) : {};
const patchTool = PHASES.has('patch') ? providePatchCost() : undefined;
const others = Array.from({ length: cpuCount() - 1 }, (_, i) => i + 1).join(',');
pin(process.pid, others);
const cp = await startControlPlane({ name: 'bench-apiserver', ...(POLICY ? { version: 'newest' as const } : {}) });
const rows: Figures[] = [];
const spreads: Spread[] = [];
const patches: PatchRow[] = [];
try {
  for (const pid of Object.values(cp.pids)) pin(pid, others);
  const version = JSON.parse((await cp.request('GET', '/version')).body).gitVersion;
  console.log(
    `bench:apiserver on ${cpuCount()} CPUs (${cpus()[0]?.model ?? 'unknown'}), shared with other work: load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' / ')} at the start\n` +
      `  kube-apiserver ${version} + etcd, kube-apiserver, etcd and the client on CPU ${others}; the webhook on CPU ${WEBHOOK_CPU} (taskset; GOMAXPROCS=1 for the Go peers)\n` +
      `  serve: ${CLI} with NODE_OPTIONS="${NODE_FLAGS}"; peers: ${peers.map((p) => `${p} ${binaries[`${p.toUpperCase()}_PEER_VERSION`]}`).join(', ') || 'none'}\n` +
      `  Pods: --corpus ${CORPUS}, ${CORPUS === 'bench' ? "bench:peers' generated Pods (bench/support/reviews.ts: 1 to 10 containers)" : "real charts' Pods (test/fixtures/peer-diff/corpus; Azure: those its objectSelector's label sends)"}; dry-run creates (?dryRun=All)\n` +
      (['aws', 'azure'] as Stream[]).map((s) => `    ${describePods(s)}\n`).join('') +
      `  webhooks registered at https://${ADDRESS}: kube-apiserver offers ${offeredBy(urlAt(443)).join(' and ')}${LOCALHOST ? ' (--localhost: as to a webhook beside it on a control-plane host)' : ' (not loopback: as to a webhook behind a Service; --localhost for h2)'}\n` +
      `  client: Node https, open loop (each create sent on schedule), keep-alive, up to ${CONNECTIONS} connections to kube-apiserver; each webhook first warmed by ${fmt(WARM_REVIEWS)} creates (16 at a time), then per rate ${WARM_S} s at the rate and ${SECONDS} s measured` +
      (patchTool
        ? `\n  patch: gopkg.in/evanphx/json-patch.v4 ${patchTool.jsonPatch} (k8s.io/apiserver ${patchTool.apiserver}'s pin), DecodePatch + Apply per Pod as kube-apiserver does, on CPU ${WEBHOOK_CPU} (GOMAXPROCS=1); its CPU time (getrusage), the median of ${PATCH_ROUNDS} round${PATCH_ROUNDS === 1 ? '' : 's'}`
        : ''),
  );
  const tls = await servingCertificate(join(cp.dir, 'tls'), LOCALHOST ? [] : [ADDRESS]);
  await populate(cp);
  if (PHASES.has('rates')) {
    console.log(`\n| ${HEADER.join(' | ')} |`);
    rows.push(...(await ratesPhase(cp, tls, binaries)));
  }
  if (PHASES.has('spread')) {
    console.log(`\ntwo replicas behind a round-robin TCP balancer at ${ADDRESS}:`);
    for (const [setting, args] of spreadSettings()) spreads.push(await spreadRun(cp, tls, setting, args));
  }
  if (patchTool) {
    console.log(`\nthe patch as kube-apiserver applies it, serve's against the whole arrays:`);
    patches.push(...(await patchPhase(cp, patchTool)));
  }
} finally {
  await cp.stop();
}

if (rows.length) console.log(`\n${markdown(HEADER, rows.map(rowOf))}\n`);
if (spreads.length) console.log(`${spreadTable(spreads)}\n`);
if (patches.length) console.log(`${markdown(PATCH_HEADER, patches.map(patchRowOf))}\n`);
console.log(failures([...rows, ...spreads.map((s) => s.figures)]));
const foreign = rows.flatMap((f) => (f.foreign === undefined ? [] : [f.foreign]));
console.log(
  `\nCPU ${WEBHOOK_CPU} busy with other processes during the runs: ${fmt(Math.min(...foreign) * 100)} to ${fmt(Math.max(...foreign) * 100)} %; load average at the end ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' / ')}`,
);
