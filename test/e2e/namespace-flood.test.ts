// Issue #19 §2: a caller of /mutate chooses request.namespace, and the Azure peer's metric
// azwi_mutation_request had it as a label: each new value added series for good, until the replica
// was OOM-killed. Here `serve` runs inside the chart's memory limit (a memory cgroup with the
// chart's NODE_OPTIONS) and gets 10,000 reviews of Azure-labelled Pods in made-up namespaces and
// one with a 2.8 MiB namespace: the series count, the scrape size and the RSS stay flat, and the
// webhook still answers a normal review with its patch.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { Agent } from 'node:https';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { httpsRequest, type HttpsResponse } from '../support/https-client.ts';
import { CLIENT, TENANT } from '../support/identities.ts';

const NAMESPACES = 10_000;
// The heap grows to its working size over the first few thousand reviews, and once for a body of
// megabytes: the warm-up brings both, so that what follows measures what the namespaces keep.
const WARM_UP = 2_000;
/** Series a bounded set of outcomes may still add (an error result seen for the first time). */
const NEW_SERIES_ALLOWED = 16;
const CONCURRENCY = 8;

let cp: ControlPlane;
let wh: WebhookProcess;
let cgroup: MemoryCgroup;
let agent: Agent;

before(async () => {
  const memory = chartMemory();
  cgroup = memoryCgroup('namespace-flood', memory.limit);
  cp = await startControlPlane({ name: 'namespace-flood' });
  await createNamespace(cp, 'team-a');
  await createServiceAccount(cp, 'team-a', 'app', {
    'azure.workload.identity/client-id': CLIENT,
    'azure.workload.identity/tenant-id': TENANT,
  });
  wh = await startWebhook(cp, [], { wrap: cgroup.wrap, env: { NODE_OPTIONS: memory.nodeOptions } });
  agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: wh.caPem });
});

after(async () => {
  agent?.destroy();
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

function review(namespace: string, uid: string, annotations: Record<string, string> = {}): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace,
      operation: 'CREATE',
      object: {
        metadata: { generateName: 'app-', labels: { 'azure.workload.identity/use': 'true' }, annotations },
        spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
      },
    },
  });
}

/** A review POSTed to the webhook over the keep-alive agent. */
function post(body: string): Promise<HttpsResponse> {
  return httpsRequest(`${wh.url}/mutate`, {
    method: 'POST',
    ca: wh.caPem,
    agent,
    body,
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    timeoutMs: 15_000,
  });
}

/** Sends reviews for namespaces `from`..`to`-1, CONCURRENCY at a time; the count of each HTTP status. */
async function flood(from: number, to: number): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  let next = from;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < to; i = next++) {
        const { status } = await post(review(`made-up-${i}`, `u-${i}`)).catch(() => ({ status: 0 }));
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  return statuses;
}

async function scrape(when: string) {
  const exited = wh.process.exitStatus();
  if (exited !== null) throw new Error(`the webhook exited (${exited}) ${when}; OOM kills ${cgroup.oomKills()}`);
  // A connection of its own: a kept-alive one may be closed by the server just as it is reused.
  const text = await new Promise<string>((resolve, reject) => {
    const req = httpGet({ host: '127.0.0.1', port: wh.metricsPort, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', reject);
  }).catch(async (err: Error) => {
    // A scrape cut off is most often the webhook dying (heap exhausted building it): say so.
    const status = await Promise.race([wh.process.exited, new Promise((r) => setTimeout(r, 5000, 'running'))]);
    throw new Error(
      `the scrape ${when} failed (${err.message}); webhook: ${status}, OOM kills ${cgroup.oomKills()}\n${wh.process.logTail(5)}`,
    );
  });
  const series = text.split('\n').filter((l) => l && !l.startsWith('#'));
  const heap = Number(/^nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1]) / 2 ** 20;
  assert.ok(Number.isFinite(heap), 'the scrape has nodejs_heap_size_used_bytes');
  return { text, series: series.length, bytes: Buffer.byteLength(text), heap, ...rssMiB(wh.process.pid) };
}

type Scrape = Awaited<ReturnType<typeof scrape>>;
const summary = (s: Scrape) =>
  `series ${s.series}, scrape ${s.bytes} bytes, heap used ${s.heap.toFixed(0)} MiB, RSS ${s.rss.toFixed(0)} MiB (peak ${s.hwm.toFixed(0)})`;

describe('namespace flood', () => {
  test(`${NAMESPACES} made-up namespaces and one of 2.8 MiB leave the metric series and RSS flat; the webhook keeps answering`, async (t) => {
    // Warm-up: the heap at its working size, every label value a made-up namespace can bring in.
    const warm = await flood(0, WARM_UP);
    const large = await post(review('team-a', 'large', { 'example.com/large': 'v'.repeat(2.8 * 2 ** 20) }));
    assert.equal(large.status, 200, 'a 2.8 MiB review in a real namespace');
    const before = await scrape('after the warm-up');
    t.diagnostic(`warm-up ${JSON.stringify(warm)}: ${summary(before)}`);
    const half = NAMESPACES / 2;
    const first = await flood(WARM_UP, WARM_UP + half);
    const middle = await scrape(`after ${half} namespaces`);
    t.diagnostic(`${half} namespaces ${JSON.stringify(first)}: ${summary(middle)}`);
    const second = await flood(WARM_UP + half, WARM_UP + NAMESPACES);
    const end = await scrape(`after ${NAMESPACES} namespaces`);
    t.diagnostic(`${NAMESPACES} namespaces, the second half ${JSON.stringify(second)}: ${summary(end)}`);
    const huge = await post(review('n'.repeat(2.8 * 2 ** 20), 'huge')).catch((err: Error) => ({
      status: 0,
      text: err.message,
    }));
    const last = await scrape('after the 2.8 MiB namespace');
    t.diagnostic(`2.8 MiB namespace, HTTP ${huge.status}: ${summary(last)}`);
    t.diagnostic(
      `cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB (its log's page cache included), OOM kills ${cgroup.oomKills()}`,
    );
    const normal = await post(review('team-a', 'normal'));

    assert.equal(cgroup.oomKills(), 0, 'OOM kills in the cgroup');
    // Every review got an answer: an AdmissionReview (200), or a refusal of the envelope (400).
    for (const statuses of [first, second]) assert.deepEqual(Object.keys(statuses), ['200'], JSON.stringify(statuses));
    assert.ok(huge.status === 200 || huge.status === 400, `2.8 MiB namespace: HTTP ${huge.status}`);
    assert.equal(normal.status, 200);
    assert.ok(
      (JSON.parse(normal.body) as { response: { patch?: string } }).response.patch,
      'a normal review still gets its patch',
    );
    // Flat: no series per namespace, no label of megabytes. (A namespace label cost ~25 KiB of
    // heap and 18 series each: 5,000 namespaces were +90,000 series and +123 MiB.)
    for (const s of [middle, end, last])
      assert.ok(s.series <= before.series + NEW_SERIES_ALLOWED, `metric series ${before.series} -> ${s.series}`);
    assert.doesNotMatch(last.text, /made-up-|nnnnnnnn/);
    assert.ok(last.bytes < before.bytes + 16 * 1024, `scrape ${before.bytes} -> ${last.bytes} bytes`);
    // Memory: a leak of the old size (~25 KiB a namespace) would add ~120 MiB over the second half.
    // The heap in use swings by ~10 MiB (garbage not yet collected); RSS under the capped heap by
    // tens of MiB with no leak at all, as V8 grows its heap late.
    assert.ok(
      end.heap < middle.heap + 32,
      `heap used over the second ${half} namespaces: ${middle.heap} -> ${end.heap} MiB`,
    );
    assert.ok(end.rss < middle.rss + 48, `RSS over the second ${half} namespaces: ${middle.rss} -> ${end.rss} MiB`);
    assert.ok(last.rss < before.rss + 96, `RSS ${before.rss.toFixed(0)} -> ${last.rss.toFixed(0)} MiB`);
  });
});
