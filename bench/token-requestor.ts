// node bench/token-requestor.ts [--namespaces 2000] [--secrets 20000] [--scope namespaces|cluster]
//   [--renewals] [--token-expiration 600] [--chart-heap | --chart-limit]
// The token requestor at scale on a real kube-apiserver (issue 30 item 5): N namespaces, each a
// ServiceAccount and its share of M labelled Secrets, created in parallel batches; then a requestor
// (leader) and a standby, started with every namespace in --namespaces. It prints, per phase:
// connections to kube-apiserver (the requestor's established TCP sockets to its port), RSS and
// heap, kube-apiserver's requests by verb (apiserver_request_total) and its CPU (/proc), and
// tokens written per second. Phases: the first issuance (every Secret lacks a token), idle, a
// leader failover (SIGKILL; the standby takes over and judges every Secret again), and with
// --renewals the renewal wave (tokens of --token-expiration seconds renewed at 45-55 %), then a
// check that no Secret holds an expired token. WIW_CLI names another build (before/after).
// --chart-limit runs each requestor as its Pod does (as root): in a memory cgroup of the chart's
// tokenRequestor.resources.limits.memory with no swap, with the image's NODE_OPTIONS and MALLOC_*;
// each phase then also prints the limit, the cgroup's peak, VmHWM, OOM kills and whether it lives.
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createNamespace, startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { until } from '../test/harness/until.ts';
import {
  chartMemory,
  imageEnv,
  type MemoryCgroup,
  memoryCgroup,
  rssMiB,
  tokenRequestorMemory,
} from '../test/support/cgroup.ts';
import { labelledSecret } from '../test/support/secrets.ts';
import {
  connectionsTo,
  leaseHolder,
  requestorKubeconfig,
  startTokenRequestor,
  type RequestorProcess,
} from '../test/support/token-requestor.ts';
import { createAll } from './support/cluster.ts';
import { cpuSecondsOf, loadAverage } from './support/host.ts';

const { values: args } = parseArgs({
  options: {
    namespaces: { type: 'string', default: '2000' },
    secrets: { type: 'string', default: '20000' },
    scope: { type: 'string', default: 'namespaces' },
    renewals: { type: 'boolean', default: false },
    'token-expiration': { type: 'string', default: '600' },
    /** Give up on a phase after this long (the code before issue 30 did not finish at 2,000 namespaces). */
    deadline: { type: 'string', default: '900' },
    /** Run it with the image's NODE_OPTIONS for the chart's memory limit (heap at half of it), as deployed. */
    'chart-heap': { type: 'boolean', default: false },
    /** Run it in a memory cgroup of the chart's tokenRequestor limit, with the image's env (as root). */
    'chart-limit': { type: 'boolean', default: false },
  },
});
const CHART_LIMIT = args['chart-limit'];
/** The requestors' cgroups, by pid (--chart-limit). */
const cgroups = new Map<number, MemoryCgroup>();
const N = Number(args.namespaces);
const M = Number(args.secrets);
const EXPIRATION = Number(args['token-expiration']);
const SYSTEM = 'wiw-system';
const LEASE = 'token-requestor';
const namespaceName = (i: number) => `team-${String(i).padStart(5, '0')}`;

/** kube-apiserver's apiserver_request_total summed by verb. */
async function requestsByVerb(cp: ControlPlane): Promise<Record<string, number>> {
  const text = (await cp.request('GET', '/metrics')).body;
  const by: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? '?';
    by[verb] = (by[verb] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return by;
}

function metric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(name) && (line[name.length] === '{' || line[name.length] === ' '))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

interface Snapshot {
  at: number;
  requests: Record<string, number>;
  apiserverCpu: number;
}
async function snapshot(cp: ControlPlane): Promise<Snapshot> {
  return { at: Date.now(), requests: await requestsByVerb(cp), apiserverCpu: cpuSecondsOf(cp.pids.kubeApiserver) };
}

/** One phase's figures, from two snapshots and the requestor's state at the end. */
async function report(phase: string, cp: ControlPlane, from: Snapshot, r: RequestorProcess, extra = '') {
  const to = await snapshot(cp);
  const seconds = (to.at - from.at) / 1000;
  const verbs = Object.keys(to.requests)
    .map((v) => [v, to.requests[v] - (from.requests[v] ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([v, n]) => `${v} ${n}`)
    .join(', ');
  const alive = r.process.exitStatus() === null;
  const text = alive ? await metricsOf(r) : '';
  const rss = alive ? rssMiB(r.process.pid).rss : Number.NaN;
  const heap = metric(text, 'nodejs_heap_size_used_bytes') / 2 ** 20;
  const cpu = (to.apiserverCpu - from.apiserverCpu) / seconds;
  console.log(
    `${phase.padEnd(22)} ${seconds.toFixed(1).padStart(6)} s | connections ${String(connectionsTo(r.process.pid, port(cp))).padStart(4)} | ` +
      `RSS ${rss.toFixed(1)} MiB, heap ${heap.toFixed(1)} MiB${limitLine(r)} | kube-apiserver ${(cpu * 100).toFixed(0)} % of a core, requests: ${verbs || 'none'}${extra}`,
  );
  return to;
}

/**
 * The process's anonymous resident memory (RssAnon): what the cgroup cannot reclaim without swap.
 * Its RSS also counts the pages of node's binary and the bundle, which the page cache may have
 * charged to another cgroup (here: whoever read them first; on a node: maybe the webhook's Pod).
 */
function anonMiB(pid: number): number {
  return Number(/RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN) / 1024;
}

/** With --chart-limit: the cgroup's limit and peak, the process's VmHWM, OOM kills, whether it lives. */
function limitLine(r: RequestorProcess): string {
  const cgroup = cgroups.get(r.process.pid);
  if (!cgroup) return '';
  const { limit } = tokenRequestorMemory();
  const peak = cgroup.peakMiB();
  const status = r.process.exitStatus();
  const hwm = status === null ? `${rssMiB(r.process.pid).hwm.toFixed(1)} MiB` : '-';
  const anon = status === null ? `${anonMiB(r.process.pid).toFixed(1)} MiB` : '-';
  return ` | limit ${limit / 2 ** 20} MiB: cgroup peak ${peak.toFixed(1)} MiB (${((peak * 2 ** 20 * 100) / limit).toFixed(0)} %), VmHWM ${hwm}, RssAnon ${anon}, oom_kill ${cgroup.oomKills()}, ${status === null ? 'alive' : `DIED (${status})`}`;
}

const port = (cp: ControlPlane) => Number(new URL(cp.server).port);

/** The requestor's metrics, or '' while its metrics port does not answer (the code before issue 30 ran out of sockets). */
async function metricsOf(r: RequestorProcess): Promise<string> {
  try {
    return await r.metrics();
  } catch (err) {
    const status = r.process.exitStatus();
    if (status !== null) throw new Error(`the requestor exited (${status}); its log ends:\n${r.process.logTail(15)}`);
    console.error(`  its metrics do not answer: ${(err as Error).cause ?? err}`);
    return '';
  }
}

/** Tokens the requestor wrote so far, counted in its log (which needs no socket of its own). */
function tokenCounter(r: RequestorProcess): () => number {
  let offset = 0;
  let count = 0;
  let partial = '';
  return () => {
    const fd = openSync(r.process.logPath, 'r');
    try {
      const size = fstatSync(fd).size;
      const buffer = Buffer.alloc(size - offset);
      readSync(fd, buffer, 0, buffer.length, offset);
      offset = size;
      const lines = (partial + buffer.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line.includes('"msg":"token written"')) count++;
    } finally {
      closeSync(fd);
    }
    return count;
  };
}

/** Tokens written per second, sampled every `everyMs` until `done`; prints the spread. */
async function rates(r: RequestorProcess, done: (issued: number) => boolean, everyMs = 5000, fromStart = false) {
  const samples: number[] = [];
  const written = tokenCounter(r);
  let last = written();
  // The first issuance counts the tokens written before the first sample too (a small run writes some at once).
  const start = fromStart ? 0 : last;
  const began = Date.now();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, everyMs));
    const now = written();
    if (r.process.exitStatus() !== null) {
      console.log(
        `  the requestor exited (${r.process.exitStatus()})${limitLine(r)}; its log ends:\n${r.process.logTail(5)}`,
      );
      break;
    }
    if (samples.length % 5 === 0)
      console.error(
        `  ${((Date.now() - began) / 1000).toFixed(0)} s: ${now - start} tokens, ${connectionsTo(r.process.pid, port(cp))} connections, RSS ${rssMiB(r.process.pid).rss.toFixed(0)} MiB${limitLine(r)}`,
      );
    samples.push((now - last) / (everyMs / 1000));
    last = now;
    if (done(now - start)) break;
    if (Date.now() - began > Number(args.deadline) * 1000) {
      console.log(`  gave up after ${args.deadline} s: ${now - start} tokens written`);
      break;
    }
  }
  const active = samples.filter((s) => s > 0);
  const mean = active.reduce((a, b) => a + b, 0) / Math.max(1, active.length);
  return {
    line: ` | tokens/s per ${everyMs / 1000} s: peak ${Math.max(0, ...samples).toFixed(0)}, mean ${mean.toFixed(0)} over ${(active.length * everyMs) / 1000} s [${samples.map((s) => s.toFixed(0)).join(' ')}]`,
    issued: last - start,
  };
}

let cp: ControlPlane;

async function main() {
  cp = await startControlPlane({ name: 'bench-requestor' });
  try {
    await createNamespace(cp, SYSTEM);
    const kubeconfig = await requestorKubeconfig(cp, SYSTEM, LEASE);
    const names = Array.from({ length: N }, (_, i) => namespaceName(i));
    let t = Date.now();
    await createAll(
      cp,
      names.map((name) => ({ path: '/api/v1/namespaces', body: { metadata: { name } } })),
    );
    await createAll(
      cp,
      names.map((ns) => ({ path: `/api/v1/namespaces/${ns}/serviceaccounts`, body: { metadata: { name: 'app' } } })),
    );
    await createAll(
      cp,
      Array.from({ length: M }, (_, i) => {
        const namespace = names[i % N];
        return {
          path: `/api/v1/namespaces/${namespace}/secrets`,
          body: labelledSecret('aws', { name: `creds-${i}`, namespace }),
        };
      }),
    );
    const nodeOptions = CHART_LIMIT
      ? tokenRequestorMemory().nodeOptions
      : args['chart-heap']
        ? chartMemory().nodeOptions
        : undefined;
    console.log(
      `token requestor, ${N} namespaces, ${M} labelled Secrets (created in ${((Date.now() - t) / 1000).toFixed(0)} s), scope ${args.scope}, tokens of ${EXPIRATION} s, NODE_OPTIONS ${nodeOptions ? `"${nodeOptions}"` : 'none'}${CHART_LIMIT ? `, each requestor in a memory cgroup of ${tokenRequestorMemory().limit / 2 ** 20} MiB (the chart's tokenRequestor limit) with ${JSON.stringify(imageEnv())}` : ''}; load average ${loadAverage().toFixed(1)} (the machine is shared)`,
    );
    const common = [
      '--lease-namespace',
      SYSTEM,
      '--lease-name',
      LEASE,
      '--lease-duration-seconds',
      '5',
      '--token-expiration',
      String(EXPIRATION),
    ];
    const env = {
      ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
      WIW_NAMESPACES: names.join(','),
      ...(args.scope === 'namespaces' ? {} : { WIW_WATCH_SCOPE: args.scope }),
    };
    let s0 = await snapshot(cp);
    const leader = await startRequestor(kubeconfig, common, env, 'leader');
    await until(
      'the first requestor to lead',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === leader.identity || undefined,
      60_000,
    );
    const first = await rates(leader, (issued) => issued >= M, 2000, true);
    s0 = await report('first issuance', cp, s0, leader, first.line);
    if (first.issued < M) {
      if (leader.process.exitStatus() === null) await leader.stop();
      return;
    }
    const standby = await startRequestor(kubeconfig, common, env, 'standby');
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    s0 = await report('idle, leader', cp, s0, leader);
    console.log(
      `${'idle, standby'.padEnd(22)}        | connections ${connectionsTo(standby.process.pid, port(cp))} | RSS ${rssMiB(standby.process.pid).rss.toFixed(1)} MiB${limitLine(standby)}`,
    );
    // Failover: the leader dies without releasing the Lease.
    if (leader.process.exitStatus() !== null) return;
    t = Date.now();
    process.kill(leader.process.pid, 'SIGKILL');
    await until(
      'the standby to lead',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === standby.identity || undefined,
      60_000,
    );
    const takeover = (Date.now() - t) / 1000;
    await until(
      'the standby to track every Secret',
      async () => metric(await standby.metrics(), 'wiw_token_requestor_secrets') >= M || undefined,
      300_000,
    );
    const synced = (Date.now() - t) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    s0 = await report(
      'failover',
      cp,
      s0,
      standby,
      ` | Lease taken over after ${takeover.toFixed(1)} s (lease 5 s), every Secret tracked after ${synced.toFixed(1)} s, tokens written ${metric(await standby.metrics(), 'wiw_token_requestor_tokens_issued_total')}`,
    );
    if (args.renewals) {
      // Every Secret renewed once by the new leader: those it renewed during the failover count.
      const already = tokenCounter(standby)();
      const wave = await rates(standby, (issued) => already + issued >= M, 10_000);
      s0 = await report('renewal wave (standby)', cp, s0, standby, wave.line);
      const expired = await expiredTokens(cp, new Set(names));
      console.log(`after the wave: ${expired.expired} of ${expired.total} Secrets hold an expired or no token`);
    }
    if (standby.process.exitStatus() === null) await standby.stop();
  } finally {
    await cp.stop();
    for (const cgroup of cgroups.values()) cgroup.remove();
  }
}

/** A requestor; with --chart-limit in a memory cgroup of its own, as its Pod. */
async function startRequestor(kubeconfig: string, common: string[], env: Record<string, string>, name: string) {
  if (!CHART_LIMIT) return startTokenRequestor(cp, kubeconfig, common, { env });
  const cgroup = memoryCgroup(`requestor-${name}`, tokenRequestorMemory().limit);
  const r = await startTokenRequestor(cp, kubeconfig, common, { env, wrap: cgroup.wrap });
  cgroups.set(r.process.pid, cgroup);
  return r;
}

/** Secrets whose token is missing or expired now (read through the admin's list). */
async function expiredTokens(
  cp: ControlPlane,
  names: ReadonlySet<string>,
): Promise<{ expired: number; total: number }> {
  let expired = 0;
  let total = 0;
  let cont = '';
  do {
    const page = JSON.parse(
      (
        await cp.request(
          'GET',
          `/api/v1/secrets?labelSelector=workload-identity-webhook.io/provider&limit=500${cont ? `&continue=${cont}` : ''}`,
        )
      ).body,
    );
    for (const s of page.items) {
      if (!names.has(s.metadata.namespace)) continue;
      total++;
      const token = s.data?.token ? Buffer.from(s.data.token, 'base64').toString() : '';
      const exp = token ? JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp : 0;
      if (exp * 1000 <= Date.now()) expired++;
    }
    cont = page.metadata.continue ?? '';
  } while (cont);
  return { expired, total };
}

await main();
