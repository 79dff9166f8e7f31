// Issue #28, the class test: every string and list the webhook reads, scaled to what kube-apiserver
// allows (256 KiB of annotations, a request near 3 MiB, the longest names, thousands of list
// entries), sent by a tenant through kube-apiserver with its own RBAC (a client certificate, a
// Role in its namespace only), while `serve` runs in the chart's memory limit with the image's
// NODE_OPTIONS. The webhook must answer every one (a patch or a denial that says why, never an
// internal error or a failed call), keep its heap flat across 1,000 of them and across a restart
// that lists the tenant's ServiceAccounts again, spend a bounded CPU time per review, and go on
// admitting another namespace's Pods meanwhile.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { httpsRequest, type TlsClient } from '../harness/https.ts';
import { serviceAccountAnnotations } from '../../src/clouds/index.ts';
import { providers } from '../support/builders.ts';
import { chartMemory, memoryCgroup, type MemoryCgroup } from '../support/cgroup.ts';
import { registerWebhook, startWebhook, type Registration, type WebhookProcess } from '../support/webhook.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN, TENANT, WIF_PROVIDER, roleArn } from '../support/identities.ts';

const TENANT_NS = 'tenant-a';
const OTHER_NS = 'team-b';
const REVIEWS = 1_000;
const CONCURRENCY = 8;
/** kube-apiserver's limit on the total size of an object's annotations (keys and values). */
const MAX_ANNOTATIONS = 256 * 1024;
/** Leaves room for the keys and the rest of the object under MAX_ANNOTATIONS. */
const ANNOTATION_ROOM = MAX_ANNOTATIONS - 4 * 1024;

let cp: ControlPlane;
let wh: WebhookProcess;
let cgroup: MemoryCgroup;
let tenant: TlsClient;
let registration: Registration;
const memory = chartMemory();

/** `count` values whose joined length (with `sep`) fills `bytes`, each made by `entry(i)`. */
function list(bytes: number, sep: string, entry: (i: number) => string): string {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const e = entry(i);
    if (size + e.length + sep.length > bytes) break;
    parts.push(e);
    size += e.length + sep.length;
  }
  return parts.join(sep);
}

/** Splits ANNOTATION_ROOM evenly between the keys, each value filled by its maker. */
function fill(makers: Record<string, Maker>): Record<string, string> {
  const keys = Object.keys(makers);
  const share = Math.floor(ANNOTATION_ROOM / keys.length) - 64;
  return Object.fromEntries(keys.map((k) => [k, makers[k](share)]));
}

const names = (prefix: string) => (i: number) => `${prefix}${i}`.padEnd(63, 'x');
const profiles = (i: number) => `p${i}=${roleArn(`r${i}`)}`;

type Maker = (bytes: number) => string;
/** The annotations the code says it reads, so an annotation added later is sent here too. */
const SA_READS = serviceAccountAnnotations(providers()).map((b) => ({ key: b.key, list: b.maxEntries !== undefined }));
const POD_READS = providers()
  .flatMap((p) => p.podReads.annotations)
  .map((a) => ({ key: a.key, list: a.separator !== undefined, separator: a.separator }));

/** `makers` for the keys given the forms they expect, and every other key read at its largest too. */
function everyKeyRead(
  reads: { key: string; list: boolean; separator?: string }[],
  makers: Record<string, Maker>,
): Record<string, Maker> {
  const all = { ...makers };
  for (const { key, list: isList, separator } of reads)
    all[key] ??= isList ? (n) => list(n, separator ?? ',', names('c')) : (n) => 'x'.repeat(n);
  return all;
}

/** A ServiceAccount whose every annotation the webhook reads is at its largest. */
const SA_ANNOTATIONS = fill(
  everyKeyRead(SA_READS, {
    'eks.amazonaws.com/role-arn': (n) => `${ROLE_ARN}${'x'.repeat(Math.max(0, n - ROLE_ARN.length))}`,
    'eks.amazonaws.com/role-arns': (n) => list(n, ',', profiles),
    'eks.amazonaws.com/audience': (n) => 'a'.repeat(n),
    'eks.amazonaws.com/token-expiration': (n) => '9'.repeat(n),
    'azure.workload.identity/client-id': (n) => `${CLIENT}${'0'.repeat(n - CLIENT.length)}`,
    'azure.workload.identity/tenant-id': (n) => TENANT.padEnd(n, 'f'),
    'cloud.google.com/workload-identity-provider': (n) => WIF_PROVIDER.padEnd(n, 'z'),
    'cloud.google.com/workload-identity-providers': (n) => list(n, ',', (i) => `n${i}=${WIF_PROVIDER}${i}`),
    'cloud.google.com/service-account-email': (n) => `${'r'.repeat(n - GCP_EMAIL.length)}${GCP_EMAIL}`,
  }),
);

/** A ServiceAccount of every cloud, valid, with its lists as long as the webhook takes them. */
const VALID_SA_ANNOTATIONS = {
  'eks.amazonaws.com/role-arn': ROLE_ARN,
  'eks.amazonaws.com/role-arns': Array.from({ length: 64 }, (_, i) => profiles(i)).join(','),
  'azure.workload.identity/client-id': CLIENT,
  'azure.workload.identity/tenant-id': TENANT,
  'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
  'cloud.google.com/service-account-email': GCP_EMAIL,
};

/** Pod annotations at their largest: the lists the webhook splits and a forged injection record. */
const POD_ANNOTATIONS = fill(
  everyKeyRead(POD_READS, {
    'eks.amazonaws.com/skip-containers': (n) => list(n, ',', names('c')),
    'azure.workload.identity/skip-containers': (n) => list(n, ';', names('c')),
    'cloud.google.com/skip-containers': (n) => list(n, ',', names('c')),
    'eks.amazonaws.com/role-arns': (n) => list(n, ',', profiles),
    'azure.workload.identity/container-client-ids': (n) => list(n, ',', (i) => `c${i}=${CLIENT}`),
    'eks.amazonaws.com/token-expiration': (n) => '1'.repeat(n),
    'workload-identity-webhook.io/injected': (n) => JSON.stringify({ v: 1, mac: 'm'.repeat(n - 64), p: ['aws'] }),
  }),
);

const LONG_NAME = 'n'.repeat(253);
const IDENTITY_LABELS = { 'azure.workload.identity/use': 'true' };

/** The largest shapes, in turn: Pod annotations, a request near 3 MiB, the longest names, the largest ServiceAccount. */
const SHAPES = 4;
function hostilePod(i: number): Record<string, unknown> {
  switch (i % SHAPES) {
    case 0:
      return {
        metadata: { generateName: 'big-annotations-', labels: IDENTITY_LABELS, annotations: POD_ANNOTATIONS },
        spec: { serviceAccountName: 'valid', containers: [{ name: 'app', image: 'busybox' }] },
      };
    case 3:
      return {
        metadata: { generateName: 'big-serviceaccount-', labels: IDENTITY_LABELS },
        spec: { serviceAccountName: 'maxed', containers: [{ name: 'app', image: 'busybox' }] },
      };
    case 1: {
      // 400 containers of 63-character names, each with a long value of each variable it compares.
      const value = 'v'.repeat(2_300);
      const env = ['AWS_ROLE_ARN', 'AZURE_FEDERATED_TOKEN_FILE', 'GOOGLE_APPLICATION_CREDENTIALS'].map((name) => ({
        name,
        value,
      }));
      const containers = Array.from({ length: 400 }, (_, c) => ({ name: names('c')(c), image: 'busybox', env }));
      return {
        metadata: { generateName: 'big-request-', labels: IDENTITY_LABELS },
        spec: { serviceAccountName: 'valid', containers },
      };
    }
    default:
      return {
        metadata: { name: `${LONG_NAME.slice(0, 250)}${i % 100}`.slice(0, 253), labels: IDENTITY_LABELS },
        spec: { serviceAccountName: LONG_NAME, containers: [{ name: names('c')(0), image: 'busybox' }] },
      };
  }
}

interface Outcome {
  shape?: number;
  status: number;
  message: string;
  ms: number;
}

async function createAs(client: TlsClient, namespace: string, pod: Record<string, unknown>): Promise<Outcome> {
  const start = performance.now();
  const res = await httpsRequest(
    client,
    'POST',
    `/api/v1/namespaces/${namespace}/pods?dryRun=All`,
    { apiVersion: 'v1', kind: 'Pod', ...pod },
    30_000,
  ).catch((err: Error) => ({ status: 0, body: JSON.stringify({ message: err.message }) }));
  const message = res.status === 201 ? '' : String((JSON.parse(res.body) as { message?: string }).message);
  return { status: res.status, message, ms: performance.now() - start };
}

/** kube-apiserver's own words when a webhook was not answered (a cut connection, a timeout, a 500). */
const FAILED_CALL = /failed calling webhook|Internal error|internal error|WIW_INTERNAL/;

interface Scrape {
  heap: number;
  cpu: number;
  reviews: number;
  cacheBytes: number;
}

async function scrape(when: string): Promise<Scrape> {
  const exited = wh.process.exitStatus();
  if (exited !== null) throw new Error(`the webhook exited (${exited}) ${when}; OOM kills ${cgroup.oomKills()}`);
  const text = await wh.metrics();
  const num = (re: RegExp) => Number(re.exec(text)?.[1]);
  const reviews = [...text.matchAll(/^wiw_admission_requests_total\{[^}]*\} (\d+)/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
  return {
    heap: num(/^nodejs_heap_size_used_bytes (\d+)/m) / 2 ** 20,
    cpu: num(/^process_cpu_seconds_total ([\d.e+-]+)/m),
    reviews,
    cacheBytes: num(/^wiw_serviceaccount_cache_bytes\{what="ServiceAccount"\} (\d+)/m),
  };
}

/**
 * The heap the webhook keeps: the least of several scrapes, each after a few more of the largest
 * reviews (their garbage makes V8 collect). A snapshot alone may hold tens of MiB of garbage not
 * yet collected; what a cache or a memo keeps is in every one of them.
 */
async function keptHeap(when: string): Promise<Scrape> {
  let least = await scrape(when);
  for (let round = 0; round < 5; round++) {
    await hostile(round * SHAPES, (round + 1) * SHAPES);
    const s = await scrape(when);
    if (s.heap < least.heap) least = { ...s, cpu: least.cpu, reviews: least.reviews };
  }
  return least;
}

/** The webhook's own time for the ordinary Pods (its decision log), p50 and p99 in ms. */
function webhookTimes(prefix: string): string {
  const ms = wh
    .logs()
    .filter((l) => l.msg === 'admission' && typeof l.name === 'string' && l.name.startsWith(prefix))
    .map((l) => Number(l.durationMs));
  return `${percentile(ms, 50).toFixed(1)}/${percentile(ms, 99).toFixed(1)} ms in the webhook`;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

/** Ordinary Pods in another namespace, created by the admin while `busy` runs; their outcomes. */
async function ordinaryWhile(busy: Promise<unknown>, prefix: string): Promise<Outcome[]> {
  const admin: TlsClient = cp;
  const outcomes: Outcome[] = [];
  let done = false;
  void busy.finally(() => {
    done = true;
  });
  for (let i = 0; !done || outcomes.length < 20; i++) {
    outcomes.push(
      await createAs(admin, OTHER_NS, {
        metadata: { name: `${prefix}${i}`, labels: IDENTITY_LABELS },
        spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
      }),
    );
  }
  return outcomes;
}

async function hostile(from: number, to: number): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let next = from;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < to; i = next++)
        outcomes.push({ shape: i % SHAPES, ...(await createAs(tenant, TENANT_NS, hostilePod(i))) });
    }),
  );
  return outcomes;
}

function assertAnswered(outcomes: Outcome[], who: string): void {
  const failed = outcomes.filter((o) => o.status === 0 || o.status >= 500 || FAILED_CALL.test(o.message));
  assert.deepEqual(
    failed.slice(0, 3).map((o) => `${o.status} ${o.message.slice(0, 300)}`),
    [],
    `${failed.length} of ${outcomes.length} ${who} creates were not answered by the webhook`,
  );
}

async function startServe(): Promise<WebhookProcess> {
  return startWebhook(cp, [], { wrap: cgroup.wrap, env: { NODE_OPTIONS: memory.nodeOptions }, readyTimeoutMs: 60_000 });
}

before(async () => {
  cgroup = memoryCgroup('tenant-scale', memory.limit);
  cp = await startControlPlane({ name: 'tenant-scale' });
  for (const ns of [TENANT_NS, OTHER_NS]) await createNamespace(cp, ns);
  await createServiceAccount(cp, OTHER_NS, 'app', {
    'azure.workload.identity/client-id': CLIENT,
    'azure.workload.identity/tenant-id': TENANT,
  });
  // The tenant: a user of its own (a client certificate) who may create Pods and ServiceAccounts
  // in its namespace only, as `edit` allows.
  const user = await cp.issueClientCert('tenant-a-user');
  tenant = { server: cp.server, caPem: cp.caPem, clientCertPem: user.cert, clientKeyPem: user.key };
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${TENANT_NS}`;
  const rules = [{ apiGroups: [''], resources: ['pods', 'serviceaccounts'], verbs: ['create', 'get', 'list'] }];
  for (const [path, body] of [
    [`${rbac}/roles`, { metadata: { name: 'tenant' }, rules }],
    [
      `${rbac}/rolebindings`,
      {
        metadata: { name: 'tenant' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-a-user' }],
      },
    ],
  ] as const) {
    const res = await cp.request('POST', path, body);
    assert.equal(res.status, 201, res.body);
  }
  // The tenant's own ServiceAccounts, every annotation at its largest, before the webhook starts
  // (its first list brings them all in) and one more after (the watch brings it in).
  const saPath = `/api/v1/namespaces/${TENANT_NS}/serviceaccounts`;
  const valid = await httpsRequest(tenant, 'POST', saPath, {
    metadata: { name: 'valid', annotations: VALID_SA_ANNOTATIONS },
  });
  assert.equal(valid.status, 201, valid.body.slice(0, 500));
  for (let i = 0; i < 200; i++) {
    const res = await httpsRequest(tenant, 'POST', saPath, {
      metadata: { name: i === 0 ? 'maxed' : `maxed-${i}`, annotations: SA_ANNOTATIONS },
    });
    assert.equal(res.status, 201, res.body.slice(0, 500));
  }
  wh = await startServe();
  registration = await registerWebhook(cp, wh, 'tenant-scale', [{}], OTHER_NS);
  const res = await httpsRequest(tenant, 'POST', saPath, {
    metadata: { name: LONG_NAME, annotations: SA_ANNOTATIONS },
  });
  assert.equal(res.status, 201, res.body.slice(0, 500));
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

describe('a tenant at the API server maximum sizes', () => {
  test(`${REVIEWS} of the largest Pods a tenant can send: each answered, heap flat, CPU bounded, other namespaces admitted`, async (t) => {
    const baseline = await ordinaryWhile(Promise.resolve(), 'alone-');
    assertAnswered(baseline, 'ordinary (before)');
    const warm = await hostile(0, 60);
    assertAnswered(warm, 'hostile (warm-up)');
    const first = await keptHeap('after the warm-up');
    const flood = hostile(60, REVIEWS);
    const during = await ordinaryWhile(flood, 'during-');
    const outcomes = await flood;
    const end = await keptHeap(`after ${REVIEWS} reviews`);

    const statuses: Record<string, number> = {};
    for (const o of outcomes) statuses[o.status] = (statuses[o.status] ?? 0) + 1;
    const cpuPerReview = ((end.cpu - first.cpu) / Math.max(1, end.reviews - first.reviews)) * 1000;
    t.diagnostic(`tenant statuses ${JSON.stringify(statuses)}`);
    for (let shape = 0; shape < SHAPES; shape++) {
      const o = outcomes.find((x) => x.shape === shape);
      t.diagnostic(`shape ${shape}: ${o?.status} ${o?.message.replace(/n{20,}/g, 'n…').slice(0, 300)}`);
    }
    t.diagnostic(
      `heap ${first.heap.toFixed(1)} -> ${end.heap.toFixed(1)} MiB; CPU ${cpuPerReview.toFixed(2)} ms per review`,
    );
    t.diagnostic(`other namespace, alone: ${webhookTimes('alone-')}; during: ${webhookTimes('during-')}`);
    t.diagnostic(
      `other namespace p50/p99: ${percentile(
        baseline.map((o) => o.ms),
        50,
      ).toFixed(0)}/${percentile(
        baseline.map((o) => o.ms),
        99,
      ).toFixed(0)} ms alone, ` +
        `${percentile(
          during.map((o) => o.ms),
          50,
        ).toFixed(0)}/${percentile(
          during.map((o) => o.ms),
          99,
        ).toFixed(0)} ms during (${during.length} Pods)`,
    );
    t.diagnostic(`cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB, OOM kills ${cgroup.oomKills()}`);

    assert.equal(cgroup.oomKills(), 0, 'OOM kills');
    assertAnswered(outcomes, 'hostile');
    assertAnswered(during, 'ordinary (during)');
    assert.ok(
      during.every((o) => o.status === 201),
      'every ordinary Pod of the other namespace is admitted',
    );
    // Flat: a review keeps nothing. The heap in use swings by several MiB of garbage not yet collected.
    assert.ok(end.heap < first.heap + 16, `heap ${first.heap.toFixed(1)} -> ${end.heap.toFixed(1)} MiB`);
    assert.ok(end.cacheBytes < 256 * 1024, `the cache holds ${end.cacheBytes} bytes`);
    // Bounded: linear work on the largest inputs is milliseconds; the quadratic role-arns of #28 cost 700 ms and more.
    assert.ok(cpuPerReview < 100, `CPU per review ${cpuPerReview.toFixed(1)} ms`);
  });

  test("a restart lists the tenant's ServiceAccounts again within the limit and answers at once", async (t) => {
    await wh.stop();
    await registration.remove();
    wh = await startServe();
    registration = await registerWebhook(cp, wh, 'tenant-scale-again', [{}], OTHER_NS);
    const outcomes = await hostile(0, 30);
    const ready = await keptHeap('after the restart');
    t.diagnostic(
      `after the restart: heap kept ${ready.heap.toFixed(1)} MiB, cache ${(ready.cacheBytes / 1024).toFixed(0)} KiB`,
    );
    assert.equal(cgroup.oomKills(), 0, 'OOM kills');
    assertAnswered(outcomes, 'hostile (after the restart)');
    // 201 ServiceAccounts of 256 KiB listed again: each is kept as a small marker, not its values.
    assert.ok(ready.cacheBytes < 256 * 1024, `the cache holds ${ready.cacheBytes} bytes`);
    assert.ok(ready.heap < 48, `heap kept after listing the tenant's ServiceAccounts: ${ready.heap.toFixed(1)} MiB`);
  });
});
