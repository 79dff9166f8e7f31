// node bench/hostile.ts (as root): the webhook under the chart's memory limit (a memory cgroup of
// 256 MiB and NODE_OPTIONS=--max-old-space-size-percentage=50, as the chart sets them) serves a
// normal stream of reviews while hostile callers do what issue #10 found: Pods of 8,000
// containers, 5.9 MB bodies that stall, clients that never read their answers, thousands of idle
// TLS connections and reviews with unique kinds, all from 127.0.0.1. Prints, before and during the
// attack, the normal stream's throughput, p50/p99 and errors (from 127.0.0.2, as kube-apiserver
// comes from an address of its own), what a fresh connection from that address gets during the
// attack; then the webhook's peak memory, OOM kills and whether it is still alive. Every attack loop is bounded in count and time and targets loopback only.
import { Agent, request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import { parseArgs } from 'node:util';
import { createNamespace, createServiceAccount, startControlPlane } from '../test/harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB } from '../test/support/cgroup.ts';
import { startWebhook } from '../test/support/webhook.ts';

const { values: opts } = parseArgs({
  options: {
    'memory-mib': { type: 'string', default: String(chartMemory().limit / 2 ** 20) },
    seconds: { type: 'string', default: '15' },
    // The chart's default; '' for Node's own heap sizing (the whole cgroup limit).
    'node-options': { type: 'string', default: chartMemory().nodeOptions },
  },
});
const MEMORY = Number(opts['memory-mib']) * 1024 * 1024;
const SECONDS = Number(opts.seconds);
const NS = 'bench';
// The normal stream comes from another address than the attacks, as kube-apiserver does.
const API_SERVER_ADDRESS = '127.0.0.2';
const ATTACKER_ADDRESS = '127.0.0.1';

function review(object: unknown, kind = 'Pod', uid = 'u'): Buffer {
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: { uid, kind: { group: '', version: 'v1', kind }, namespace: NS, operation: 'CREATE', object },
    }),
  );
}

function normalPod(i: number) {
  return {
    metadata: { generateName: `app-${i}-`, namespace: NS, labels: { app: 'a', 'azure.workload.identity/use': 'true' } },
    spec: {
      serviceAccountName: i % 2 ? 'aws' : 'multi',
      containers: Array.from({ length: 1 + (i % 4) }, (_, c) => ({
        name: `c${c}`,
        image: 'registry.example.com/app:1',
        env: Array.from({ length: 20 }, (_, e) => ({ name: `SETTING_${e}`, value: `value-${e}-${'x'.repeat(40)}` })),
      })),
    },
  };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

const cgroup = memoryCgroup('bench-hostile', MEMORY);
const cp = await startControlPlane({ name: 'bench-hostile' });
let stopAttacks = false;
try {
  await createNamespace(cp, NS);
  await createServiceAccount(cp, NS, 'aws', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench' });
  await createServiceAccount(cp, NS, 'multi', {
    'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench',
    'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
    'azure.workload.identity/tenant-id': '72f988bf-86f1-41af-91ab-2d7cd011db47',
    'cloud.google.com/workload-identity-provider':
      'projects/123456789012/locations/global/workloadIdentityPools/pool-1/providers/cluster',
  });
  const wh = await startWebhook(cp, ['--log-level', 'info'], {
    wrap: cgroup.wrap,
    env: { NODE_OPTIONS: opts['node-options'] },
  });
  const port = wh.port;
  const normal = Array.from({ length: 64 }, (_, i) => review(normalPod(i), 'Pod', `n-${i}`));
  console.log(
    `webhook in a ${MEMORY / 2 ** 20} MiB memory cgroup, NODE_OPTIONS="${opts['node-options']}"; normal reviews ${normal[0].length}..${normal[63].length} bytes`,
  );

  const agent = new Agent({ keepAlive: true, maxSockets: 4, ca: wh.caPem });
  const post = (body: Buffer, a: Agent | false = agent, from = API_SERVER_ADDRESS) =>
    new Promise<{ status: number; ms: number }>((resolve) => {
      const t = performance.now();
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: '/mutate',
          method: 'POST',
          agent: a,
          localAddress: from,
          ca: wh.caPem,
          servername: 'localhost',
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t }));
        },
      );
      req.on('error', () => resolve({ status: 0, ms: performance.now() - t }));
      req.setTimeout(15_000, () => req.destroy());
      req.end(body);
    });

  /** The normal stream: 4 connections, closed loop, for `seconds`. */
  async function normalLoad(label: string, seconds: number) {
    const lat: number[] = [];
    let errors = 0;
    const end = Date.now() + seconds * 1000;
    let i = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < end) {
          const r = await post(normal[i++ % normal.length]);
          if (r.status === 200) lat.push(r.ms);
          else errors++;
        }
      }),
    );
    lat.sort((a, b) => a - b);
    console.log(
      `${label.padEnd(22)} ${String(Math.round(lat.length / seconds)).padStart(5)} reviews/s   p50 ${percentile(lat, 0.5).toFixed(2)} ms   p99 ${percentile(lat, 0.99).toFixed(2)} ms   errors ${errors}`,
    );
  }

  await normalLoad('normal, no attack', 5);

  const counts: Record<string, Record<string, number>> = {};
  const count = (attack: string, outcome: string) => {
    counts[attack] ??= {};
    counts[attack][outcome] = (counts[attack][outcome] ?? 0) + 1;
  };
  const openTls = () =>
    new Promise<TLSSocket | undefined>((resolve) => {
      const s = connect({ host: '127.0.0.1', port, ca: wh.caPem, servername: 'localhost' }, () => resolve(s));
      s.on('error', () => resolve(undefined));
      s.on('close', () => resolve(undefined));
    });
  const held: TLSSocket[] = [];
  const deadline = Date.now() + SECONDS * 1000;
  const attacks = [
    // 1. Pods of 8,000 small containers, as a dry-run through the API server would send them.
    (async () => {
      const huge = review({
        metadata: { name: 'huge' },
        spec: {
          serviceAccountName: 'multi',
          containers: Array.from({ length: 8000 }, (_, i) => ({ name: `c${i}`, image: 'i' })),
        },
      });
      const a = new Agent({ keepAlive: true, maxSockets: 2, ca: wh.caPem });
      while (!stopAttacks && Date.now() < deadline)
        count('8,000-container Pods', String((await post(huge, a, ATTACKER_ADDRESS)).status));
      a.destroy();
    })(),
    // 2. 30 senders announcing 5.9 MB and stalling after 64 KB; and 22 announcing 8 MB.
    (async () => {
      for (const [n, size] of [
        [30, 5.9e6],
        [22, 8e6],
      ] as const) {
        for (let i = 0; i < n && !stopAttacks; i++) {
          const s = await openTls();
          if (!s) {
            count('stalled bodies', 'refused');
            continue;
          }
          held.push(s);
          s.on('data', (d: Buffer) => count('stalled bodies', d.toString().split(' ')[1] ?? '?'));
          s.write(
            `POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Math.round(size)}\r\n\r\n`,
          );
          s.write('x'.repeat(64 * 1024));
        }
      }
    })(),
    // 3. 18 clients that send an 8,000-container review and never read the answer.
    (async () => {
      const body = review({
        metadata: { name: 'x' },
        spec: {
          serviceAccountName: 'multi',
          containers: Array.from({ length: 500 }, (_, i) => ({ name: `c${i}`, image: 'i' })),
        },
      });
      for (let i = 0; i < 18 && !stopAttacks; i++) {
        const s = await openTls();
        if (!s) continue;
        held.push(s);
        s.pause();
        s.write(
          `POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
        );
        s.write(body);
        count('non-reading clients', 'sent');
      }
    })(),
    // 4. 3,000 idle TLS connections.
    (async () => {
      for (let i = 0; i < 3000 && !stopAttacks && Date.now() < deadline; i++) {
        const s = await openTls();
        if (s) held.push(s);
        count('idle TLS connections', s ? 'open' : 'refused');
      }
    })(),
    // 5. Reviews with unique kinds (each would have been a new metric label).
    (async () => {
      const a = new Agent({ keepAlive: true, maxSockets: 2, ca: wh.caPem });
      for (let i = 0; i < 20_000 && !stopAttacks && Date.now() < deadline; i++)
        count('unique kinds', String((await post(review(normalPod(i), `Kind${i}`), a, ATTACKER_ADDRESS)).status));
      a.destroy();
    })(),
  ];
  // What kube-apiserver sees when it opens a new connection during the attack (5 a second).
  const fresh: { status: number; ms: number }[] = [];
  const probing = (async () => {
    while (!stopAttacks && Date.now() < deadline) {
      fresh.push(await post(normal[0], false));
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  await normalLoad('normal, under attack', SECONDS);
  stopAttacks = true;
  await Promise.all([...attacks, probing]);
  const freshOk = fresh
    .filter((f) => f.status === 200)
    .map((f) => f.ms)
    .sort((a, b) => a - b);
  console.log(
    `fresh connections from kube-apiserver's address: ${fresh.length}, answered ${freshOk.length}, p50 ${percentile(freshOk, 0.5).toFixed(0)} ms, max ${(freshOk.at(-1) ?? NaN).toFixed(0)} ms`,
  );
  const open = held.filter((s) => !s.destroyed).length;
  for (const s of held) s.destroy();
  const metrics = await wh.metrics();
  const series = metrics.split('\n').filter((l) => l.startsWith('wiw_admission_requests_total')).length;
  for (const [attack, outcomes] of Object.entries(counts))
    console.log(`attack: ${attack.padEnd(22)} ${JSON.stringify(outcomes)}`);
  console.log(`hostile connections still open at the end: ${open} of ${held.length}`);
  console.log(`metric series of wiw_admission_requests_total after the unique kinds: ${series}`);
  await normalLoad('normal, after attack', 3);
  const alive = wh.process.exitStatus() === null;
  const hwm = alive ? rssMiB(wh.process.pid).hwm : NaN;
  console.log(
    `webhook: ${alive ? 'alive' : `exited (${wh.process.exitStatus()})`}, peak RSS ${hwm.toFixed(0)} MiB; cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB of ${MEMORY / 2 ** 20} MiB (page cache of its log file included), OOM kills ${cgroup.oomKills()}`,
  );
  agent.destroy();
  await wh.stop();
} finally {
  stopAttacks = true;
  await cp.stop();
  cgroup.remove();
}
