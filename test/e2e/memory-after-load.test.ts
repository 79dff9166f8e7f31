// Issue 30, item 3: RSS grew from 81 MiB idle to 110 MiB after a load of reviews and stayed there.
// Two causes: V8 keeps the heap pages a collection frees in a pool, resident, and its memory
// reducer, which would return them, never starts in Node; glibc's allocator keeps what a burst
// freed (an arena per thread, and freed buffers and bodies between longer-lived blocks). Here
// `serve` runs as its Pod does (the chart's memory cgroup, its NODE_OPTIONS, the image's MALLOC_*
// settings through the cgroup's wrap), takes a load of realistic Pods over 16 and then 32 TLS
// connections, and once it idles its RSS comes back down: most of what the load added goes (at
// most 60 % of it stays), and what stays is within 24 MiB of idle (the goal is 16;
// bench/memory.ts measures 10 to 17 on a shared machine). At 4f23847 all of it stayed: RSS held
// its peak, 25 MiB above idle in this test.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { httpsRequest } from '../support/https-client.ts';
import { ROLE_ARN } from '../support/identities.ts';
import { startWebhook, until, type WebhookProcess } from '../support/webhook.ts';

/** RSS once idle again: within this much of idle before the load (the goal is 16 MiB)... */
const BOUND_MIB = 24;
/** ...and at most this share of what the load added. */
const STAYS = 0.6;
const LOAD_SECONDS = 8;

let cp: ControlPlane;
let cgroup: MemoryCgroup;
let wh: WebhookProcess;

before(async () => {
  const memory = chartMemory();
  cgroup = memoryCgroup('memory-after-load', memory.limit);
  cp = await startControlPlane({ name: 'memory-after-load' });
  await createNamespace(cp, 'team-a');
  await createServiceAccount(cp, 'team-a', 'app', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
  wh = await startWebhook(cp, [], { wrap: cgroup.wrap, env: { NODE_OPTIONS: memory.nodeOptions } });
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

/** A Pod review of `containers` containers, each with 40 environment variables (~5 KB a container). */
function review(i: number): string {
  const containers = 1 + (i % 8);
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace: 'team-a',
      operation: 'CREATE',
      object: {
        metadata: { generateName: `app-${i}-`, namespace: 'team-a', labels: { app: `app-${i}` } },
        spec: {
          serviceAccountName: 'app',
          containers: Array.from({ length: containers }, (_, c) => ({
            name: `c${c}`,
            image: `registry.example.com/team/app-${c}:1.2.3`,
            env: Array.from({ length: 40 }, (_, e) => ({
              name: `SETTING_${e}`,
              value: `value-${e}-${'x'.repeat(90)}`,
            })),
          })),
        },
      },
    },
  });
}
const REVIEWS = Array.from({ length: 64 }, (_, i) => review(i));

/** `connections` clients sending reviews back to back for `seconds`; every answer must be a patch. */
async function load(connections: number, seconds: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections, ca: wh.caPem });
  const deadline = Date.now() + seconds * 1000;
  let answered = 0;
  try {
    await Promise.all(
      Array.from({ length: connections }, async (_, k) => {
        for (let i = k; Date.now() < deadline; i += connections) {
          const body = REVIEWS[i % REVIEWS.length];
          const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
          const res = await httpsRequest(`${wh.url}/mutate`, { method: 'POST', ca: wh.caPem, body, headers, agent });
          assert.equal(res.status, 200);
          assert.ok(res.json().response.patch, 'the Pod was mutated');
          answered++;
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return answered;
}

describe('memory after a load of reviews', () => {
  test(`RSS comes back down once the server idles: within ${BOUND_MIB} MiB of idle, at most ${STAYS * 100} % of what the load added`, async (t) => {
    await load(2, 1);
    const idle = rssMiB(wh.process.pid).rss;
    const answered = (await load(16, LOAD_SECONDS)) + (await load(32, LOAD_SECONDS));
    const { rss: loaded, hwm } = rssMiB(wh.process.pid);
    t.diagnostic(
      `RSS idle ${idle.toFixed(1)} MiB; after ${answered} reviews ${loaded.toFixed(1)} (peak ${hwm.toFixed(1)})`,
    );
    const bound = Math.min(idle + BOUND_MIB, idle + STAYS * (loaded - idle));
    let last = loaded;
    await until(
      `RSS at most ${bound.toFixed(1)} MiB (idle ${idle.toFixed(1)}, after the load ${loaded.toFixed(1)})`,
      () => {
        last = rssMiB(wh.process.pid).rss;
        return last <= bound || undefined;
      },
      60_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}: still ${last.toFixed(1)} MiB`);
    });
    t.diagnostic(`RSS once idle: ${last.toFixed(1)} MiB; OOM kills ${cgroup.oomKills()}`);
    assert.equal(cgroup.oomKills(), 0);
  });
});
