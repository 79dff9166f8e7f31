// node bench/connections.ts: connections kube-apiserver opens to the webhook per 10,000 admissions,
// HTTP/1.1 (`serve --http2=false`) against HTTP/2 (the default), through a real kube-apiserver.
// The webhook is registered at 127.0.0.1, the one kind of URL kube-apiserver offers h2 to; behind
// a Service it speaks HTTP/1.1 whatever serve offers (test/e2e/kube-apiserver-alpn.test.ts).
// Each round sends dry-run Pod creates in bursts (a controller scaling out), `concurrency` at a
// time, and reads the webhook's wiw_connections_total before and after. Prints, per protocol:
// connections opened, connections per 10,000 admissions, Pods refused, and per-source closes.
import { parseArgs } from 'node:util';
import { createNamespace, createServiceAccount, startControlPlane } from '../test/harness/control-plane.ts';
import { podBurst, refusedCount } from '../test/support/pod-burst.ts';
import { registerWebhook, startWebhook, type WebhookProcess } from '../test/support/webhook.ts';

const { values: opts } = parseArgs({
  options: {
    admissions: { type: 'string', default: '10000' },
    burst: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '300' },
  },
});
const ADMISSIONS = Number(opts.admissions);
const BURST = Number(opts.burst);
const CONCURRENCY = Number(opts.concurrency);

const counter = async (wh: WebhookProcess, pattern: RegExp) =>
  [...(await wh.metrics()).matchAll(pattern)].reduce((n, m) => n + Number(m[1]), 0);
const opened = (wh: WebhookProcess) => counter(wh, /^wiw_connections_total\{[^}]*\} (\d+)/gm);
const closedPerSource = (wh: WebhookProcess) =>
  counter(wh, /^wiw_connections_closed_total\{reason="per_source_\w+"\} (\d+)/gm);

const cp = await startControlPlane({
  name: 'bench-connections',
  extraArgs: ['--disable-admission-plugins=DefaultStorageClass'],
});
try {
  for (const http2 of [false, true]) {
    const protocol = http2 ? 'HTTP/2' : 'HTTP/1.1';
    const ns = http2 ? 'h2' : 'h1';
    // The per-source cap raised to the overall cap: what is measured is what kube-apiserver opens.
    const wh = await startWebhook(cp, [`--http2=${http2}`, '--max-connections-per-source', '512']);
    try {
      await createNamespace(cp, ns, { 'bench.workload-identity-webhook.io/connections': ns });
      await createServiceAccount(cp, ns, 'default', {});
      await createServiceAccount(cp, ns, 'app', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/b' });
      await registerWebhook(
        cp,
        wh,
        `bench-${ns}`,
        [{ namespaceSelector: { matchLabels: { 'bench.workload-identity-webhook.io/connections': ns } } }],
        ns,
      );
      const before = await opened(wh);
      let refused = 0;
      let mutated = 0;
      const started = performance.now();
      for (let sent = 0; sent < ADMISSIONS; sent += BURST) {
        const r = await podBurst(cp, ns, 'app', Math.min(BURST, ADMISSIONS - sent), CONCURRENCY);
        refused += refusedCount(r);
        mutated += r.mutated;
      }
      const seconds = (performance.now() - started) / 1000;
      const connections = (await opened(wh)) - before;
      console.log(
        `${protocol.padEnd(8)} ${mutated} admitted, ${refused} refused in ${seconds.toFixed(1)} s; ` +
          `${connections} connections opened (${((connections * 10_000) / ADMISSIONS).toFixed(0)} per 10,000 admissions), ` +
          `${await closedPerSource(wh)} closed by the per-source rules`,
      );
    } finally {
      await wh.stop();
    }
  }
} finally {
  await cp.stop();
}
