// npm run bench: the admission server as production runs it (`serve` in its own process with a
// kubeconfig, behind a real kube-apiserver for the ServiceAccount cache), driven over HTTPS
// keep-alive connections with a realistic mix of Pods. Prints throughput, latency percentiles,
// peak RSS, and the memory the ServiceAccount cache needs for 50,000 ServiceAccounts.
import { Agent, request } from 'node:https';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { serviceAccountAnnotations } from '../src/clouds/index.ts';
import { slimServiceAccount } from '../src/kube/serviceaccount-cache.ts';
import { providers } from '../test/support/builders.ts';
import { makeReviews } from './support/reviews.ts';
import { createNamespace, createServiceAccount, startControlPlane } from '../test/harness/control-plane.ts';
import { startWebhook } from '../test/support/webhook.ts';

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '16' },
    rate: { type: 'string', default: '1000' },
    'service-accounts': { type: 'string', default: '2000' },
  },
});
const SECONDS = Number(opts.seconds);
const CONNECTIONS = Number(opts.connections);
const RATE = Number(opts.rate);
const EXTRA_SAS = Number(opts['service-accounts']);
const NS = 'bench';

const IDENTITIES: Record<string, Record<string, string>> = {
  aws: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench' },
  azure: {
    'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
    'azure.workload.identity/tenant-id': '72f988bf-86f1-41af-91ab-2d7cd011db47',
  },
  gcp: {
    'cloud.google.com/workload-identity-provider':
      'projects/123456789012/locations/global/workloadIdentityPools/pool-1/providers/cluster',
    'cloud.google.com/service-account-email': 'b@proj-1234.iam.gserviceaccount.com',
  },
  multi: {
    'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench',
    'cloud.google.com/workload-identity-provider':
      'projects/123456789012/locations/global/workloadIdentityPools/pool-1/providers/cluster',
  },
  plain: {},
};

function reviewsOfTheMix(count: number): Buffer[] {
  return makeReviews(count, (i) => {
    // A third of the Pods have no identity.
    const sa = i % 3 === 0 ? 'plain' : ['aws', 'azure', 'gcp', 'multi'][i % 4];
    return {
      namespace: NS,
      serviceAccount: sa,
      labels: sa === 'azure' ? { 'azure.workload.identity/use': 'true' } : undefined,
    };
  });
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function report(name: string, latencies: number[], seconds: number, errors: number) {
  const sorted = Float64Array.from(latencies).sort();
  const ms = (v: number) => v.toFixed(2).padStart(7);
  console.log(
    `${name.padEnd(28)} ${String(Math.round(latencies.length / seconds)).padStart(6)} reviews/s   ` +
      `p50 ${ms(percentile(sorted, 0.5))} ms   p99 ${ms(percentile(sorted, 0.99))} ms   p99.9 ${ms(percentile(sorted, 0.999))} ms   errors ${errors}`,
  );
}

/** CPU seconds (user + system) the process has used so far. */
function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) =>
    Number(/\s(\d+) kB/.exec(status.split('\n').find((l) => l.startsWith(key)) ?? '')?.[1] ?? 0);
  return { rss: kb('VmRSS:') / 1024, peak: kb('VmHWM:') / 1024 };
}

console.log('setting up: control plane, ServiceAccounts, webhook ...');
const cp = await startControlPlane({ name: 'bench' });
try {
  await createNamespace(cp, NS);
  for (const [name, annotations] of Object.entries(IDENTITIES)) await createServiceAccount(cp, NS, name, annotations);
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  for (let i = 0; i < EXTRA_SAS; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, EXTRA_SAS - i) }, (_, j) =>
        core.createNamespacedServiceAccount({
          namespace: NS,
          body: {
            metadata: {
              name: `sa-${i + j}`,
              annotations: { ...IDENTITIES.aws, 'example.com/unrelated': 'x'.repeat(200) },
            },
          },
        }),
      ),
    );
  }
  const wh = await startWebhook(cp, ['--log-level', 'info']);
  const reviews = reviewsOfTheMix(300);
  const sizes = reviews.map((b) => b.length).sort((a, b) => a - b);
  console.log(
    `mix: ${reviews.length} distinct Pods, ${sizes[0]}..${sizes[sizes.length - 1]} bytes per review, a third without identity; ${EXTRA_SAS + 5} ServiceAccounts cached`,
  );

  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS, ca: wh.caPem });
  let errors = 0;
  const outcomes: Record<string, number> = {};
  const send = (body: Buffer, inspect = false) =>
    new Promise<number>((resolve) => {
      const start = process.hrtime.bigint();
      const req = request(
        `${wh.url}/mutate`,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => {
            if (inspect) chunks.push(c);
          });
          res.on('end', () => {
            if (res.statusCode !== 200) errors++;
            if (inspect) {
              const { response } = JSON.parse(Buffer.concat(chunks).toString());
              const outcome = !response.allowed
                ? `denied (${response.status?.message})`
                : response.patch
                  ? 'mutated'
                  : 'unchanged';
              outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
            }
            resolve(Number(process.hrtime.bigint() - start) / 1e6);
          });
        },
      );
      req.on('error', () => {
        errors++;
        resolve(Number(process.hrtime.bigint() - start) / 1e6);
      });
      req.end(body);
    });

  // Warm-up (JIT, connections), checking that the mix gets the decisions it should.
  for (let i = 0; i < 2000; i += CONNECTIONS)
    await Promise.all(
      Array.from({ length: CONNECTIONS }, (_, j) => send(reviews[(i + j) % reviews.length], i < reviews.length)),
    );
  console.log(`decisions for the mix: ${JSON.stringify(outcomes)}`);
  if (Object.keys(outcomes).some((k) => k.startsWith('denied'))) throw new Error('the benchmark mix must be admitted');

  // Closed loop: as fast as the server answers, CONNECTIONS requests in flight.
  errors = 0;
  const closed: number[] = [];
  const deadline = Date.now() + SECONDS * 1000;
  let next = 0;
  const cpu0 = cpuSecondsOf(wh.process.pid);
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < deadline) closed.push(await send(reviews[next++ % reviews.length]));
    }),
  );
  const closedSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  report(`max throughput (${CONNECTIONS} conns)`, closed, closedSeconds, errors);
  // The load generator shares the machine's cores; the server's own CPU time per review tells
  // what one core of the server sustains, whatever the client costs.
  const cpuPerReview = (cpuSecondsOf(wh.process.pid) - cpu0) / closed.length;
  console.log(
    `server CPU per review: ${(cpuPerReview * 1e6).toFixed(0)} µs, i.e. ${Math.round(1 / cpuPerReview)} reviews/s per core of the webhook (server busy ${(((cpuPerReview * closed.length) / closedSeconds) * 100).toFixed(0)}% of one core)`,
  );

  // Open loop at a fixed rate: latency when the server is not saturated.
  errors = 0;
  const open: Promise<number>[] = [];
  const start = performance.now();
  let sent = 0;
  while (performance.now() - start < SECONDS * 1000) {
    const due = Math.floor(((performance.now() - start) / 1000) * RATE);
    for (; sent < due; sent++) open.push(send(reviews[sent % reviews.length]));
    await new Promise((r) => setTimeout(r, 1));
  }
  const fixed = await Promise.all(open);
  report(`fixed rate ${RATE}/s`, fixed, SECONDS, errors);

  const mem = rssOf(wh.process.pid);
  console.log(`webhook process: RSS ${mem.rss.toFixed(0)} MiB now, peak RSS ${mem.peak.toFixed(0)} MiB`);
  agent.destroy();
  await wh.stop();
} finally {
  await cp.stop();
}

// The cache's footprint for 50,000 ServiceAccounts, each with an identity annotation and a
// large unrelated one that the cache drops.
globalThis.gc?.();
const before = process.memoryUsage().heapUsed;
const kept = new Map<string, unknown>();
for (let i = 0; i < 50_000; i++) {
  const raw = {
    metadata: {
      name: `sa-${i}`,
      namespace: `ns-${i % 500}`,
      uid: `5f0c6a2e-1b3d-4c5e-8f9a-${String(i).padStart(12, '0')}`,
      annotations: { ...IDENTITIES.aws, 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(2000) },
    },
  };
  kept.set(
    `${raw.metadata.namespace}/${raw.metadata.name}`,
    slimServiceAccount(raw, serviceAccountAnnotations(providers())),
  );
}
globalThis.gc?.();
const after = process.memoryUsage().heapUsed;
console.log(
  `ServiceAccount cache: ${kept.size} entries take ${((after - before) / 1024 / 1024).toFixed(1)} MiB of heap`,
);
