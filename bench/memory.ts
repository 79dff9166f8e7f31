// node bench/memory.ts (as root; `npm run bench` runs it after bench/admission.ts): where `serve`'s
// memory goes, idle and after load (issue 30). `serve` runs as its Pod does: the image's bundle
// (WIW_CLI; scripts/dev.sh builds it), in a memory cgroup of the chart's limit, with the chart's
// NODE_OPTIONS (the Dockerfile's unless the chart sets nodeOptions) and the image's MALLOC_* settings
// (the cgroup's wrap sets them). Corpus: --service-accounts ServiceAccounts in 200 namespaces, as
// bench/peers.ts makes them (a third AWS, a third Azure, a third without identity, each with
// kubectl's last-applied annotation). Client: this process, HTTPS/1.1 keep-alive
// (bench/support/load.ts) with Pods of 5 to 40 KB: 16 then 32 connections closed loop, then 500 and
// 1,000 reviews/s open loop, --seconds each. Condition: idle is 15 s after ready (past the quiet
// period after the first list), "after the load" at once, "rested" --rest s later (past the quiet
// period after the load, src/http/memory-release.ts).
// Printed for each: RSS (its anonymous and file-backed parts), the V8 heap (used after a full GC,
// committed, new space), external and ArrayBuffer memory, and the anonymous memory outside V8's
// heap (malloc: TLS, buffers, Node's native state, by mapping). Then the same with glibc's
// allocator defaults (the image's MALLOC_* unset), and each --variant, for comparison.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { CLI } from '../test/harness/cli-process.ts';
import { chartMemory, imageEnv, memoryCgroup, rssMiB } from '../test/support/cgroup.ts';
import { TENANT as AZURE_TENANT } from '../test/support/identities.ts';
import { startWebhook } from '../test/support/webhook.ts';
import { createAll } from './support/cluster.ts';
import { cpuCount, cpuSecondsOf, loadAverage } from './support/host.ts';
import { closedLoop, openLoop, type Target } from './support/load.ts';
import { makeReviews } from './support/reviews.ts';

const { values: opts } = parseArgs({
  strict: false,
  options: {
    'service-accounts': { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    rest: { type: 'string', default: '25' },
    'node-options': { type: 'string' },
    // Another environment to run `serve` with, e.g. --variant 'MALLOC_ARENA_MAX=1;NODE_OPTIONS=...'
    // (an empty value unsets the variable); repeatable, each a ';'-separated list of K=V.
    variant: { type: 'string', multiple: true, default: [] },
  },
});
const SAS = Number(opts['service-accounts']);
const SECONDS = Number(opts.seconds);
const REST_S = Number(opts.rest);
const { limit, nodeOptions: chartFlags } = chartMemory();
const NODE_FLAGS = typeof opts['node-options'] === 'string' ? opts['node-options'] : chartFlags;
const NAMESPACES = 200;
const ROLE = { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench' };
const AZURE = {
  'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
  'azure.workload.identity/tenant-id': AZURE_TENANT,
};

async function createCorpus(cp: ControlPlane) {
  await createAll(
    cp,
    Array.from({ length: NAMESPACES }, (_, n) => ({
      path: '/api/v1/namespaces',
      body: { metadata: { name: `team-${n}` } },
    })),
  );
  await createAll(
    cp,
    Array.from({ length: SAS }, (_, i) => {
      const metadata = { name: `sa-${i}`, namespace: `team-${i % NAMESPACES}`, annotations: [ROLE, AZURE, {}][i % 3] };
      const applied = JSON.stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata });
      return {
        path: `/api/v1/namespaces/${metadata.namespace}/serviceaccounts`,
        body: {
          metadata: {
            name: metadata.name,
            annotations: { ...metadata.annotations, 'kubectl.kubernetes.io/last-applied-configuration': applied },
          },
        },
      };
    }),
  );
}

/** Pods of the first 1,800 ServiceAccounts: two of three with an identity (AWS or Azure), one without. */
const reviews = makeReviews(300, (i) => {
  const index = i % 1800;
  return {
    namespace: `team-${index % NAMESPACES}`,
    serviceAccount: `sa-${index}`,
    labels: index % 3 === 1 ? { 'azure.workload.identity/use': 'true' } : undefined,
  };
});

interface Probe {
  rss: number;
  rssAfterGc: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  rssAnon: number;
  rssFile: number;
  spaces: Record<string, { size: number; used: number }>;
  anonMaps: { brk: number; small: number; large: number };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

function line(what: string, p: Probe) {
  const newSpace = p.spaces.new_space?.size ?? 0;
  // Anonymous memory V8's heap does not account for: malloc's (TLS, zlib, buffers, Node's state).
  const outside = p.rssAnon - p.heapTotal;
  return (
    `  ${what.padEnd(22)} RSS ${mib(p.rss).padStart(6)} MiB (after a full GC ${mib(p.rssAfterGc)}: anonymous ${mib(p.rssAnon)}, ` +
    `files ${mib(p.rssFile)}); heap used ${mib(p.heapUsed)} of ${mib(p.heapTotal)} committed (new space ${mib(newSpace)}); ` +
    `external ${mib(p.external)} (ArrayBuffers ${mib(p.arrayBuffers)}); anonymous outside the heap ${mib(outside)} ` +
    `(resident in brk ${mib(p.anonMaps.brk)}, maps of 64 MiB and more ${mib(p.anonMaps.large)}, smaller maps ${mib(p.anonMaps.small)})`
  );
}

interface Figures {
  label: string;
  idle: number;
  after: number;
  peak: number;
  rested: number;
  cpuUs: number;
}

/** `serve` with the image's environment changed by `variant` (an empty value unsets the variable). */
async function run(cp: ControlPlane, label: string, variant: Record<string, string>): Promise<Figures> {
  const cgroup = memoryCgroup('bench-memory', limit);
  const probeOut = join(cp.dir, `memory-probe-${label.replace(/\W+/g, '-')}.jsonl`);
  const flags = variant.NODE_OPTIONS || NODE_FLAGS;
  const set = Object.entries(variant).filter(([k, v]) => v && k !== 'NODE_OPTIONS');
  const unset = Object.keys(variant).filter((k) => !variant[k]);
  const env = {
    ...Object.fromEntries(set),
    NODE_OPTIONS: `${flags} --expose-gc --import ${join(import.meta.dirname, 'support/memory-probe.mjs')}`,
    WIW_MEMORY_PROBE_OUT: probeOut,
  };
  const wh = await startWebhook(cp, ['--azure-tenant-id', AZURE_TENANT, '--log-level', 'info'], {
    // `env -u` after the cgroup's wrap, which sets the image's settings.
    wrap: (command, args) => cgroup.wrap('env', [...unset.flatMap((k) => ['-u', k]), command, ...args]),
    env,
    readyTimeoutMs: 300_000,
  });
  const target: Target = { url: `${wh.url}/mutate`, caPem: wh.caPem };
  const probe = async (): Promise<Probe> => {
    const lines = () => readFileSync(probeOut, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean);
    const before = lines().length;
    process.kill(wh.process.pid, 'SIGUSR2');
    for (let i = 0; i < 400 && lines().length === before; i++) await sleep(25);
    return JSON.parse(lines().at(-1) ?? '{}') as Probe;
  };
  try {
    const malloc = Object.entries({ ...imageEnv(), ...Object.fromEntries(set) }).filter(([k]) => !unset.includes(k));
    console.log(
      `${label}: ${CLI} in a ${limit / 2 ** 20} MiB cgroup, NODE_OPTIONS="${flags}", ` +
        `${malloc.map(([k, v]) => `${k}=${v}`).join(' ') || "glibc's allocator defaults"}; ${SAS} ServiceAccounts`,
    );
    await sleep(15_000);
    const idle = await probe();
    console.log(line('idle', idle));
    const cpu0 = cpuSecondsOf(wh.process.pid);
    let answered = 0;
    let errors = 0;
    for (const connections of [16, 32]) {
      const r = await closedLoop(target, reviews, connections, SECONDS);
      answered += r.latencies.length;
      errors += r.errors;
    }
    for (const rate of [500, 1000]) {
      const r = await openLoop(target, reviews, rate, SECONDS, 16);
      answered += r.latencies.length;
      errors += r.errors;
    }
    const cpuUs = ((cpuSecondsOf(wh.process.pid) - cpu0) / answered) * 1e6;
    const peak = rssMiB(wh.process.pid).hwm;
    const after = await probe();
    console.log(line(`after ${answered} reviews`, after) + `; peak RSS ${peak.toFixed(1)} MiB, errors ${errors}`);
    console.log(`  server CPU per review over the load: ${cpuUs.toFixed(0)} µs`);
    await sleep(REST_S * 1000);
    const rested = await probe();
    console.log(line(`${REST_S} s later`, rested));
    console.log(`  cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB, OOM kills ${cgroup.oomKills()}`);
    const m = (b: number) => b / 2 ** 20;
    return { label, idle: m(idle.rss), after: m(after.rss), peak, rested: m(rested.rss), cpuUs };
  } finally {
    await wh.stop();
    cgroup.remove();
  }
}

function table(runs: Figures[]) {
  const f = (x: number) => x.toFixed(1);
  console.log(
    `\n| serve, ${SAS} ServiceAccounts | RSS idle | after the load (peak) | ${REST_S} s later | later − idle | CPU per review |`,
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of runs)
    console.log(
      `| ${r.label} | ${f(r.idle)} MiB | ${f(r.after)} (${f(r.peak)}) MiB | ${f(r.rested)} MiB | ${f(r.rested - r.idle)} MiB | ${r.cpuUs.toFixed(0)} µs |`,
    );
  console.log(
    `machine: ${cpuCount()} CPUs shared with other work, 1-minute load average ${loadAverage()} at the end; the load generator runs beside the server, unpinned`,
  );
}

const cp = await startControlPlane({ name: 'bench-memory' });
try {
  await createCorpus(cp);
  const runs = [await run(cp, 'the image', {})];
  const defaults = Object.fromEntries(Object.keys(imageEnv()).map((k) => [k, '']));
  runs.push(await run(cp, "glibc's defaults", defaults));
  for (const v of opts.variant as string[]) {
    const pairs = v.split(';').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]);
    runs.push(await run(cp, v, Object.fromEntries(pairs)));
  }
  table(runs);
} finally {
  await cp.stop();
}
