// Issue 28, finding 1: a tenant allowed to create ServiceAccounts in its own namespace (part of
// `edit`) made ServiceAccounts with five 51 KB annotations under a provider prefix each, and the
// cache kept them whole: 440 ran the webhook's heap out in the chart's memory limit, and each
// restart died again listing them, so with failurePolicy Fail every namespace's Pods were refused.
// Here the tenant is a real RBAC user with `edit` in its namespace only, `serve` runs in the
// chart's memory cgroup with its NODE_OPTIONS, and the tenant creates FLOOD such ServiceAccounts:
// a third with keys no provider reads, a third with a read key over its bound (markers), a third
// within the bounds (up to the byte budget), then tops the budget off to its last bytes. The heap
// stays within the budget, the tenant's Pod of a marker is refused with a message naming the key
// and the bound, another namespace's Pods are still admitted with their identity, a ServiceAccount
// another namespace creates after the flood is cached (not left to rate-limited direct reads: the
// namespace's share), and a restart lists them all without dying.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { registerWebhook, startWebhook, until, type Registration, type WebhookProcess } from '../support/webhook.ts';
import { ROLE_ARN, roleArn } from '../support/identities.ts';
import { tenantClient } from '../support/tenant.ts';
import { throwawayReview } from '../support/heap.ts';

/** Past the 440 that ran main (34d7c0c) out of heap in the chart's limit. */
const FLOOD = 480;
const CONCURRENCY = 8;
/** Under kube-apiserver's 256 KiB of annotations: five of 51,000 bytes. */
const VALUE = 51_000;
const TENANT_USER = 'tenant-a-admin';
/**
 * After the flood, what budget is left filled to its last bytes: ServiceAccounts with a role ARN
 * of 2,000 bytes, then of 100, then as short as team-b's (each phase fills what the last left).
 */
const TOP_OFF: [count: number, arnBytes: number][] = [
  [100, 2000],
  [20, 100],
  [20, ROLE_ARN.length],
];
const arnOf = (bytes: number) => {
  const prefix = roleArn('');
  return prefix + 'r'.repeat(bytes - prefix.length);
};

let cp: ControlPlane;
let cgroup: MemoryCgroup;
let wh: WebhookProcess;
let registration: Registration | undefined;
let admin: CoreV1Api;
let tenant: CoreV1Api;
const nodeOptions = chartMemory().nodeOptions;

async function serve(): Promise<void> {
  wh = await startWebhook(cp, [], { wrap: cgroup.wrap, env: { NODE_OPTIONS: nodeOptions }, readyTimeoutMs: 60_000 });
  await registration?.remove();
  registration = await registerWebhook(cp, wh, `sa-flood-${wh.port}`, [{}], 'team-b');
}

before(async () => {
  cgroup = memoryCgroup('sa-flood', chartMemory().limit);
  cp = await startControlPlane({ name: 'sa-flood' });
  admin = cp.kubeConfig().makeApiClient(CoreV1Api);
  await createNamespace(cp, 'tenant-a');
  await createNamespace(cp, 'team-b');
  await createServiceAccount(cp, 'team-b', 'app', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
  tenant = await tenantClient(cp, TENANT_USER, 'tenant-a', ['serviceaccounts', 'pods']);
  await serve();
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

/** The i-th ServiceAccount's annotations: 255 KB, in one of three kinds. */
function annotationsOf(i: number): Record<string, string> {
  const filler = (n: number) =>
    Object.fromEntries(Array.from({ length: n }, (_, k) => [`eks.amazonaws.com/x-${k}`, 'x'.repeat(VALUE)]));
  switch (i % 3) {
    case 0: // keys no provider reads
      return filler(5);
    case 1: // a read key over its bound (2048): a marker
      return { ...filler(4), 'eks.amazonaws.com/role-arn': 'a'.repeat(VALUE) };
    default: // read keys within their bounds (135,360 and 84,480 bytes): kept up to the budget
      return {
        ...filler(0),
        'eks.amazonaws.com/role-arns': `p=${'r'.repeat(135_000)}`,
        'cloud.google.com/workload-identity-providers': `g=${'g'.repeat(84_000)}`,
        'eks.amazonaws.com/x-0': 'x'.repeat(35_000),
      };
  }
}

async function metric(name: string): Promise<number> {
  const exited = wh.process.exitStatus();
  if (exited !== null)
    throw new Error(`the webhook exited (${exited}); OOM kills ${cgroup.oomKills()}\n${wh.process.logTail(5)}`);
  const text = await wh.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{what="ServiceAccount"} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function heapMiB(): Promise<number> {
  return (await metric('nodejs_heap_size_used_bytes')) / 2 ** 20;
}

/** Every ServiceAccount seen: kept, or left out for the budget (counted once each). */
async function seen(): Promise<number> {
  return (await metric('wiw_serviceaccount_cache_size')) + (await metric('wiw_serviceaccount_cache_over_budget_total'));
}

let seq = 0;
function podIn(namespace: string, serviceAccountName: string, client = admin): Promise<V1Pod> {
  return client.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: `p${++seq}` },
      spec: { serviceAccountName, containers: [{ name: 'app', image: 'busybox' }] },
    },
  });
}

/**
 * The heap in use once the flood's garbage is collected: reviews of 1 MiB (garbage as soon as they
 * are answered) make V8 run full collections until the heap in use falls under `limit`; what the
 * webhook keeps never does. Returns the heap in use then and the reviews it took.
 */
async function settledHeap(limit: number): Promise<{ heap: number; reviews: number }> {
  const settle = throwawayReview(wh, 'team-b', 'app');
  let heap = await heapMiB();
  let reviews = 0;
  await until(
    `the heap in use to fall under ${limit.toFixed(0)} MiB (it is ${heap.toFixed(1)})`,
    async () => {
      heap = await heapMiB();
      if (heap < limit) return true;
      await settle();
      reviews++;
      return undefined;
    },
    60_000,
  );
  return { heap, reviews };
}

const roleOf = (p: V1Pod) => p.spec?.containers[0].env?.find((e) => e.name === 'AWS_ROLE_ARN')?.value;

describe('a tenant floods the ServiceAccount cache', () => {
  test(`${FLOOD} ServiceAccounts of 255 KB from a tenant leave the heap within the budget; other namespaces are served; a restart lists them`, async (t) => {
    // The tenant's RBAC is its namespace only.
    await assert.rejects(createServiceAccountAs(tenant, 'team-b', 'x', {}), /forbidden/i);
    const heapBefore = await heapMiB();
    const samples: string[] = [];
    let next = 0;
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = next++; i < FLOOD; i = next++) {
            await createServiceAccountAs(tenant, 'tenant-a', `sa-${i}`, annotationsOf(i));
            if (i % 80 === 79) samples.push(`${i + 1}: ${(await heapMiB()).toFixed(0)}`);
          }
        }),
      );
    } finally {
      // Before the fix, the heap's rise until the webhook died is the figure.
      t.diagnostic(`heap used (MiB) while the tenant created them: 0: ${heapBefore.toFixed(0)}, ${samples.join(', ')}`);
    }
    // The tenant tops the budget off: what one namespace holds left no room for another's at 34d7c0c.
    let all = FLOOD + 1;
    for (const [n, bytes] of TOP_OFF) {
      for (let i = 0; i < n; i++)
        await createServiceAccountAs(tenant, 'tenant-a', `t${bytes}-${i}`, {
          'eks.amazonaws.com/role-arn': arnOf(bytes),
        });
      all += n;
      await until('the webhook to see every ServiceAccount', async () => (await seen()) >= all || undefined, 60_000);
    }
    // Another namespace's ServiceAccount created after the flood: cached, its Pod no miss.
    const leftOut = await metric('wiw_serviceaccount_cache_over_budget_total');
    await createServiceAccount(cp, 'team-b', 'after-flood', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
    all += 1;
    await until('the webhook to see team-b/after-flood', async () => (await seen()) >= all || undefined, 60_000);
    assert.equal(await metric('wiw_serviceaccount_cache_over_budget_total'), leftOut, 'team-b/after-flood left out');
    const misses = await metric('wiw_serviceaccount_cache_misses_total');
    assert.equal(roleOf(await podIn('team-b', 'after-flood')), ROLE_ARN);
    assert.equal(await metric('wiw_serviceaccount_cache_misses_total'), misses, 'its Pod was a cache miss');
    const heapAfter = await heapMiB();
    const bytes = await metric('wiw_serviceaccount_cache_bytes');
    const rss = rssMiB(wh.process.pid);
    t.diagnostic(
      `heap used ${heapBefore.toFixed(1)} -> ${heapAfter.toFixed(1)} MiB; cache ${(bytes / 2 ** 20).toFixed(1)} MiB, ` +
        `${await metric('wiw_serviceaccount_cache_size')} kept, ${await metric('wiw_serviceaccount_cache_over_budget_total')} over the budget; ` +
        `RSS ${rss.rss.toFixed(0)} MiB (peak ${rss.hwm.toFixed(0)}); cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB`,
    );

    // The tenant's Pod of a marker: refused, saying which annotation is over which bound.
    await assert.rejects(podIn('tenant-a', 'sa-1', tenant), (err: Error & { body?: string }) => {
      assert.match(
        String(err.body ?? err.message),
        /ServiceAccount tenant-a\/sa-1 annotation eks\.amazonaws\.com\/role-arn holds 51000 bytes, more than the 2048 the webhook reads/,
      );
      return true;
    });
    // Another namespace's Pod: admitted with its identity.
    assert.equal(roleOf(await podIn('team-b', 'app')), ROLE_ARN);

    // The cache holds at most its budget (an eighth of the heap limit: 17.5 MiB in the chart's
    // limit). Kept whole, the flood's 122 MB ran V8 out of heap before the 480th.
    assert.ok(bytes > 0 && bytes <= 18 * 2 ** 20, `cache bytes ${bytes}`);
    // Kept: at most the budget above where it started (the rest is garbage, collected on demand).
    const settled = await settledHeap(heapBefore + 18 + 8);
    t.diagnostic(
      `heap used once collected: ${settled.heap.toFixed(1)} MiB (after ${settled.reviews} reviews of 1 MiB)`,
    );

    // A restart lists them all without dying, and serves again.
    await wh.stop();
    await serve();
    await until(
      'the restarted webhook to list every ServiceAccount',
      async () => (await seen()) >= all || undefined,
      60_000,
    );
    const heapRestarted = await heapMiB();
    t.diagnostic(
      `after a restart: heap used ${heapRestarted.toFixed(1)} MiB, cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB`,
    );
    assert.equal(roleOf(await podIn('team-b', 'app')), ROLE_ARN);
    const settledAgain = await settledHeap(heapBefore + 18 + 8);
    t.diagnostic(
      `after a restart, once collected: ${settledAgain.heap.toFixed(1)} MiB (${settledAgain.reviews} reviews)`,
    );
    assert.equal(cgroup.oomKills(), 0, 'OOM kills in the cgroup');
  });
});

function createServiceAccountAs(
  client: CoreV1Api,
  namespace: string,
  name: string,
  annotations: Record<string, string>,
) {
  return client.createNamespacedServiceAccount({ namespace, body: { metadata: { name, annotations } } });
}
