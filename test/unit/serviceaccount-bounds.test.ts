// Issue 28, finding 1: the ServiceAccount cache kept every annotation under a provider prefix,
// whole, so a tenant's ServiceAccounts of 255 KB each ran every replica out of heap. Here: it keeps
// only the exact keys each cloud reads (every key a provider reads is listed, found by watching
// the reads), each within its bound; a ServiceAccount over one is a marker whose Pods and Secrets
// are refused with a message naming the key and the bound; the whole cache stays within a byte
// budget, lists included, with a metric.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pino from 'pino';
import { overBound } from '../../src/annotation-bounds.ts';
import { MAX_LIST_ENTRIES } from '../../src/bounds.ts';
import { admitPod, decidePod } from '../../src/admission/pods.ts';
import { judgeSecret } from '../../src/admission/judge-secret.ts';
import {
  cloudModule,
  createSecretProviders,
  providerOptionsFromConfig,
  serviceAccountAnnotations,
} from '../../src/clouds/index.ts';
import { PROVIDER_NAMES } from '../../src/clouds/registry.ts';
import { type KubeApi, KubeResponseTooLarge, type OpenWatch } from '../../src/kube/api.ts';
import {
  budgetedBytes,
  ServiceAccountCache,
  slimServiceAccount,
  viewBytes,
} from '../../src/kube/serviceaccount-cache.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { createMetrics } from '../../src/metrics.ts';
import { SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../../src/model.ts';
import { grantsReferrer } from '../../src/mutate/secret-reference.ts';
import { planSecret } from '../../src/mutate/secret.ts';
import { config, pod, providers } from '../support/builders.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN, roleArn, TENANT, WIF_PROVIDER } from '../support/identities.ts';
import { labelledSecret } from '../support/secrets.ts';
import { until } from '../harness/until.ts';

const READ = [...serviceAccountAnnotations(providers()), ...SECRET_SERVICE_ACCOUNT_ANNOTATIONS];
const raw = (annotations: Record<string, string>, name = 'app', namespace = 'team-a') => ({
  metadata: { name, namespace, uid: 'u', annotations },
});

/** A value of exactly `bytes` UTF-8 bytes, some of them multi-byte ("é" is two). */
const valueOfBytes = (bytes: number) =>
  'é'.repeat(Math.floor(bytes / 4)) + 'x'.repeat(bytes - 2 * Math.floor(bytes / 4));

describe('what the cache keeps of a ServiceAccount', () => {
  test('only the keys the providers read: other keys under their prefixes are dropped', () => {
    const view = slimServiceAccount(
      raw({
        'eks.amazonaws.com/role-arn': ROLE_ARN,
        'eks.amazonaws.com/x-0': 'x'.repeat(51_000),
        'azure.workload.identity/client-id': CLIENT,
        'azure.workload.identity/anything': 'x',
        'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
        'cloud.google.com/x': 'x',
        'iam.gke.io/other': 'x',
        'workload-identity-webhook.io/other': 'x',
      }),
      READ,
    )!;
    assert.deepEqual(view.annotations, {
      'eks.amazonaws.com/role-arn': ROLE_ARN,
      'azure.workload.identity/client-id': CLIENT,
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
    });
    assert.equal(view.oversize, undefined);
  });

  test('the AWS keys follow --aws-annotation-prefix', () => {
    const read = serviceAccountAnnotations(providers({ 'aws-annotation-prefix': 'iam.example.com' }));
    const view = slimServiceAccount(
      raw({ 'iam.example.com/role-arn': ROLE_ARN, 'eks.amazonaws.com/role-arn': ROLE_ARN }),
      read,
    )!;
    assert.deepEqual(view.annotations, { 'iam.example.com/role-arn': ROLE_ARN });
  });

  test('every key at its bound is kept; one byte over makes a marker that keeps no value', () => {
    assert.ok(READ.length >= 20, `${READ.length} keys`);
    for (const bound of READ) {
      const atBound = valueOfBytes(bound.maxBytes);
      assert.equal(Buffer.byteLength(atBound), bound.maxBytes);
      const kept = slimServiceAccount(raw({ [bound.key]: atBound }), READ)!;
      assert.equal(kept.oversize, undefined, bound.key);
      assert.equal(kept.annotations[bound.key], atBound);

      const over = slimServiceAccount(
        raw({ 'eks.amazonaws.com/region': 'eu-west-1', [bound.key]: `${atBound}x` }),
        READ,
      )!;
      assert.deepEqual(over.oversize, { key: bound.key, bytes: bound.maxBytes + 1, maxBytes: bound.maxBytes });
      assert.deepEqual(over.annotations, {}, `${bound.key}: no value is kept`);
      assert.ok(viewBytes(over) < 400, `${bound.key}: a marker is small (${viewBytes(over)} bytes)`);
    }
  });

  test(`a list annotation of more than ${MAX_LIST_ENTRIES} entries is a marker, whatever its bytes`, () => {
    const lists = READ.filter((b) => b.maxEntries !== undefined);
    assert.deepEqual(lists.map((b) => b.key).sort(), [
      'azure.workload.identity/container-client-ids',
      'cloud.google.com/workload-identity-providers',
      'eks.amazonaws.com/container-profiles',
      'eks.amazonaws.com/role-arns',
      'eks.amazonaws.com/source-profiles',
      'workload-identity-webhook.io/allowed-referrer-namespaces',
    ]);
    for (const bound of lists) {
      const entries = (n: number) => Array.from({ length: n }, (_, i) => `e${i}`).join(',\n ');
      assert.equal(slimServiceAccount(raw({ [bound.key]: entries(64) }), READ)!.oversize, undefined);
      assert.deepEqual(slimServiceAccount(raw({ [bound.key]: entries(65) }), READ)!.oversize, {
        key: bound.key,
        bytes: Buffer.byteLength(entries(65)),
        maxBytes: bound.maxBytes,
        entries: 65,
        maxEntries: 64,
      });
    }
  });

  test('the bounds hold what a legitimate value needs: 64 role-arns profiles of the longest role ARN', () => {
    const arn = `arn:aws-us-gov:iam::111122223333:role/${'p/'.repeat(900)}${'n'.repeat(64)}`.slice(0, 2048);
    const profiles = Array.from({ length: 64 }, (_, i) => `${'p'.repeat(62)}${String(i).padStart(2, '0')}=${arn}`);
    const bound = READ.find((b) => b.key === 'eks.amazonaws.com/role-arns')!;
    assert.equal(overBound(profiles.join(',\n'), bound), undefined);
  });
});

/** A ServiceAccount whose annotations record every key read. */
function watched(annotations: Record<string, string>, reads: Set<string>): ServiceAccountView {
  const proxy = new Proxy(annotations, {
    get(target, key, receiver) {
      if (typeof key === 'string') reads.add(key);
      return Reflect.get(target, key, receiver);
    },
  });
  return { namespace: 'team-a', name: 'app', annotations: proxy };
}

describe('the lists are complete', () => {
  test('every ServiceAccount annotation a provider, tenant policy or the Secret path reads is listed', () => {
    const reads = new Set<string>();
    const full: Record<string, string> = {
      'eks.amazonaws.com/role-arn': ROLE_ARN,
      'eks.amazonaws.com/role-arns': `reader=${ROLE_ARN}`,
      'eks.amazonaws.com/audience': 'sts.amazonaws.com',
      'eks.amazonaws.com/region': 'eu-west-1',
      'eks.amazonaws.com/token-expiration': '3600',
      'eks.amazonaws.com/sts-regional-endpoints': 'true',
      'azure.workload.identity/client-id': CLIENT,
      'azure.workload.identity/tenant-id': TENANT,
      'azure.workload.identity/service-account-token-expiration': '3600',
      'azure.workload.identity/container-client-ids': `app=${CLIENT}`,
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': GCP_EMAIL,
      'cloud.google.com/injection-mode': 'gcloud',
      'cloud.google.com/gcloud-run-as-user': '1000',
      'cloud.google.com/project-id': 'my-project',
      'cloud.google.com/workload-identity-providers': `billing=${WIF_PROVIDER}`,
      'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-b',
    };
    const flux = {
      'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER,
      'iam.gke.io/gcp-service-account': GCP_EMAIL,
    };
    const labelled = pod({ labels: { 'azure.workload.identity/use': 'true' } });
    for (const annotations of [full, flux, {}]) {
      for (const provider of providers())
        provider.resolvePod({
          pod: labelled,
          namespace: 'team-a',
          serviceAccount: watched(annotations, reads),
          windows: false,
        });
      for (const name of PROVIDER_NAMES)
        cloudModule(name).policy.settle?.({
          identity: { tenant: '', clientId: '' } as Record<string, string>,
          serviceAccount: watched(annotations, reads),
          options: providerOptionsFromConfig(config())[name],
          declared: [],
          defaults: () => ({}),
        });
      grantsReferrer(watched(annotations, reads), 'team-b');
    }
    const listed = new Set(READ.map((b) => b.key));
    const unlisted = [...reads].filter((k) => k.includes('/') && !listed.has(k));
    assert.deepEqual(unlisted, []);
    assert.ok(reads.size >= 20, `${reads.size} keys read`);
  });
});

test("docs/hardening.md states every key's bound", () => {
  const doc = readFileSync(resolve(import.meta.dirname, '../../docs/hardening.md'), 'utf8');
  const section = doc.split('## What the caches keep')[1].split('\n## ')[0];
  const rows = new Map(
    section
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) => l.split('|').map((c) => c.trim()))
      .map(([, key, bytes, entries]) => [key.replaceAll('`', ''), { bytes, entries }]),
  );
  for (const b of READ)
    assert.deepEqual(
      rows.get(b.key),
      { bytes: b.maxBytes.toLocaleString('en-US'), entries: b.maxEntries === undefined ? '' : String(b.maxEntries) },
      b.key,
    );
});

describe('a marker refuses what needs the ServiceAccount', () => {
  const marker = slimServiceAccount(raw({ 'eks.amazonaws.com/role-arn': 'x'.repeat(51_000) }), READ)!;
  const expected =
    'ServiceAccount team-a/app annotation eks.amazonaws.com/role-arn holds 51000 bytes, more than the 2048 the webhook reads (docs/hardening.md lists the bounds); shorten it';

  test('its Pods: 400 TooLarge naming the annotation and the bound, neither admitted nor an internal error', async () => {
    const decision = await admitPod(providers(), () => marker, {
      uid: 'u',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace: 'team-a',
      operation: 'CREATE',
      object: pod(),
    } as Parameters<typeof admitPod>[2]);
    assert.equal(decision.allowed, false);
    assert.deepEqual((decision as { denial: unknown }).denial, { reason: 'TooLarge', status: 400, message: expected });
    const direct = decidePod(providers(), { pod: pod(), namespace: 'team-a', serviceAccount: marker }, undefined);
    assert.equal(direct.allowed, false);
  });

  test('a Secret that references it from another namespace: TooLarge, not "not granted"', async () => {
    const c = config();
    const core = { providers: createSecretProviders(c), defaultTokenPath: c.secretTokenPath };
    const secret = labelledSecret('aws', { serviceAccount: 'team-a/app' });
    const verdict = await judgeSecret(core, planSecret(secret, 'team-b'), { serviceAccount: async () => marker });
    assert.equal(verdict.allowed, false);
    assert.deepEqual((verdict as { denial: unknown }).denial, { reason: 'TooLarge', status: 400, message: expected });
  });
});

/** A KubeApi that lists `items` in one page and then holds a watch open, handing its event callback out. */
function fakeApi(items: unknown[]) {
  const state: { onEvent?: (type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: unknown) => void } = {};
  const api = {
    streamsLists: async () => false,
    request: async (_method: string, path: string) => {
      if (path.includes('/namespaces/')) {
        const name = path.split('/').pop()!;
        return items.find((i) => (i as { metadata: { name: string } }).metadata.name === name);
      }
      return { items, metadata: { resourceVersion: '1' } };
    },
    watch: async (_path: string, _query: unknown, onEvent: NonNullable<typeof state.onEvent>): Promise<OpenWatch> => {
      state.onEvent = onEvent;
      return { abort: () => {}, ended: new Promise(() => {}) };
    },
  } as unknown as KubeApi;
  return { api, state };
}

describe('the byte budget', () => {
  // Each within the bounds: 64 profiles of a 2 KB role ARN, about 130 KB.
  const big = (name: string) =>
    raw(
      { 'eks.amazonaws.com/role-arns': Array.from({ length: 64 }, (_, i) => `p${i}=${'r'.repeat(2000)}`).join(',') },
      name,
    );
  const small = (name: string) => raw({ 'eks.amazonaws.com/role-arn': ROLE_ARN }, name);

  test('a list keeps what fits, counts the bytes, and leaves the rest to direct reads; the metric says so', async () => {
    const items = [small('a'), ...Array.from({ length: 10 }, (_, i) => big(`big-${i}`)), small('z')];
    const { api, state } = fakeApi(items);
    const metrics = createMetrics();
    const maxBytes = 3 * budgetedBytes(slimServiceAccount(big('big-0'), READ)!) + 1000;
    const lines: { msg: string; key?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    // One namespace: its share is the whole budget.
    const cache = new ServiceAccountCache({
      api,
      annotations: READ,
      log,
      metrics,
      maxBytes,
      maxNamespaceBytes: maxBytes,
    });
    await cache.start();
    try {
      assert.ok(cache.budgeted() <= maxBytes, `${cache.budgeted()} <= ${maxBytes}`);
      assert.equal(cache.size, 5, 'both small ones and three big ones');
      assert.ok(cache.get('team-a', 'z'), 'a small one after the budget was reached is still kept');
      const text = await metrics.registry.metrics();
      assert.match(text, new RegExp(`wiw_serviceaccount_cache_bytes\\{what="ServiceAccount"\\} ${cache.bytes}\\n`));
      assert.match(text, /wiw_serviceaccount_cache_over_budget_total\{what="ServiceAccount"\} 7\n/);
      // One warning for the episode, naming the first left out: where an administrator looks.
      const warnings = lines.filter((l) => l.msg.includes('byte budget'));
      assert.deepEqual(
        warnings.map((l) => l.key),
        ['team-a/big-3'],
      );
      // One left out is read directly, and answered right.
      assert.equal(cache.get('team-a', 'big-9'), undefined);
      const read = await cache.lookup('team-a', 'big-9');
      assert.equal(
        read?.annotations['eks.amazonaws.com/role-arns'],
        big('big-9').metadata.annotations['eks.amazonaws.com/role-arns'],
      );

      // A kept one that grows past the budget goes: no stale copy answers for it.
      assert.ok(cache.get('team-a', 'a'));
      state.onEvent!('MODIFIED', big('a'));
      assert.equal(cache.get('team-a', 'a'), undefined);
      assert.ok(cache.budgeted() <= maxBytes);
      state.onEvent!('DELETED', big('big-0'));
      state.onEvent!('ADDED', small('new'));
      assert.ok(cache.get('team-a', 'new'));
    } finally {
      cache.stop();
    }
  });
});

/** The chart's budget: an eighth of the 140 MiB heap its memory limit and NODE_OPTIONS give. */
const CHART_BUDGET = (140 * 2 ** 20) / 8;

describe("one namespace's annotations never leave another namespace's ServiceAccounts out", () => {
  // Issue 28: a tenant's ServiceAccounts with list annotations at their bounds spent the whole
  // budget, and then every other namespace's ServiceAccounts were left to rate-limited direct reads.
  const flooding = (i: number) =>
    raw(
      {
        'eks.amazonaws.com/role-arns': `p=${'r'.repeat(135_000)}`,
        'cloud.google.com/workload-identity-providers': `g=${'g'.repeat(84_000)}`,
      },
      `flood-${i}`,
      'tenant-a',
    );
  const FLOOD = 200; // 44 MB of annotations within their bounds: two and a half budgets.

  test('a flood spends its own namespace’s share only: other namespaces, listed or added after it, are kept', async () => {
    const items = [
      ...Array.from({ length: FLOOD }, (_, i) => flooding(i)),
      // And the rest of the budget down to its last bytes, with ServiceAccounts of a role ARN each.
      ...Array.from({ length: 2000 }, (_, i) =>
        raw({ 'eks.amazonaws.com/role-arn': ROLE_ARN }, `filler-${i}`, 'tenant-a'),
      ),
      raw({}, 'default', 'tenant-a'),
      raw({ 'eks.amazonaws.com/role-arn': ROLE_ARN }, 'app', 'team-b'),
    ];
    const { api, state } = fakeApi(items);
    const metrics = createMetrics();
    const lines: { msg: string; key?: string; namespace?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const cache = new ServiceAccountCache({ api, annotations: READ, log, metrics, maxBytes: CHART_BUDGET });
    await cache.start();
    try {
      await until('the watch to open', () => state.onEvent !== undefined);
      assert.ok(cache.get('team-b', 'app'), 'listed after the flood: kept');
      const share = CHART_BUDGET / 32;
      assert.ok(cache.budgeted('tenant-a') <= share, `tenant-a holds ${cache.budgeted('tenant-a')}`);
      assert.ok(cache.budgeted('tenant-a') > share / 2, 'its share is used');
      assert.ok(cache.get('tenant-a', 'default'), 'a plain ServiceAccount of the flooding namespace: kept');
      const kept = Array.from({ length: FLOOD }, (_, i) => cache.get('tenant-a', `flood-${i}`)).filter(Boolean).length;
      assert.ok(kept < 5, `${kept} of the flood kept`);

      // Added after the flood: the new ServiceAccount of another namespace, with a list annotation.
      const profiles = Array.from({ length: 8 }, (_, i) => `p${i}=${ROLE_ARN}`).join(',');
      state.onEvent!('ADDED', raw({ 'eks.amazonaws.com/role-arns': profiles }, 'after', 'team-b'));
      state.onEvent!('ADDED', raw({ 'azure.workload.identity/client-id': CLIENT }, 'after', 'team-c'));
      assert.equal(cache.get('team-b', 'after')?.annotations['eks.amazonaws.com/role-arns'], profiles);
      assert.ok(cache.get('team-c', 'after'));
      // The flood goes on: still its own namespace only.
      for (let i = FLOOD; i < FLOOD + 20; i++) state.onEvent!('ADDED', flooding(i));
      assert.ok(cache.budgeted('tenant-a') <= share);
      assert.ok(cache.get('team-b', 'after') && cache.get('team-c', 'after') && cache.get('team-b', 'app'));
      assert.ok(cache.budgeted() <= CHART_BUDGET);

      // Looked up, nothing of team-b is a miss; the flood's left out are read directly, answered right.
      const misses = /wiw_serviceaccount_cache_misses_total\{what="ServiceAccount"\} (\d+)/;
      const before = misses.exec(await metrics.registry.metrics())?.[1] ?? '0';
      assert.ok(!(cache.lookup('team-b', 'after') instanceof Promise));
      assert.equal(misses.exec(await metrics.registry.metrics())?.[1] ?? '0', before);
      const read = await cache.lookup('tenant-a', `flood-${FLOOD - 1}`);
      assert.equal(read?.annotations['eks.amazonaws.com/role-arns'].length, 135_002);
      // One warning, naming the namespace whose share is spent.
      assert.deepEqual(
        lines.filter((l) => l.msg.includes('byte budget')).map((l) => l.namespace),
        ['tenant-a'],
      );
    } finally {
      cache.stop();
    }
  });
});

describe('200,000 ordinary ServiceAccounts', () => {
  // Issue 30: a plain entry counted 228 bytes against the budget, so the chart's 17.5 MiB left
  // every ServiceAccount past the 80,000th to direct reads.
  test("are all kept under the chart's budget: most plain, some with a role ARN or a client id", async () => {
    const items = Array.from({ length: 200_000 }, (_, i) => {
      // 2,000 namespaces of 95, and one of 10,000 with a role ARN each (a platform team's).
      const namespace = i < 10_000 ? 'platform' : `team-${i % 2000}`;
      const annotations: Record<string, string> =
        i < 10_000 || i % 10 === 0
          ? { 'eks.amazonaws.com/role-arn': roleArn(`app-${i}`) }
          : i % 10 === 1
            ? { 'azure.workload.identity/client-id': CLIENT, 'example.com/owner': 'x' }
            : {};
      return raw(annotations, `sa-${i}`, namespace);
    });
    const { api } = fakeApi(items);
    const metrics = createMetrics();
    const cache = new ServiceAccountCache({
      api,
      annotations: READ,
      log: pino({ level: 'silent' }),
      metrics,
      maxBytes: CHART_BUDGET,
    });
    await cache.start();
    try {
      assert.equal(cache.size, 200_000);
      assert.doesNotMatch(
        await metrics.registry.metrics(),
        /wiw_serviceaccount_cache_over_budget_total\{[^}]*\} [1-9]/,
      );
      assert.ok(cache.get('platform', 'sa-9999') && cache.get('team-1999', 'sa-199999'));
      assert.ok(cache.budgeted('platform') <= CHART_BUDGET / 32);
    } finally {
      cache.stop();
    }
  });
});

describe('lists in pages (API servers without streamed lists)', () => {
  test('a page answer over maxPageBytes is asked for again with half as many objects, the same continue token', async () => {
    const items = Array.from({ length: 10 }, (_, i) => raw({ 'eks.amazonaws.com/x': 'x'.repeat(1000) }, `sa-${i}`));
    const asked: string[] = [];
    const api = {
      streamsLists: async () => false,
      request: async (
        _m: string,
        _p: string,
        o: { query: { limit: number; continue?: string }; maxBytes?: number },
      ) => {
        const from = Number(o.query.continue ?? 0);
        asked.push(`${from}+${o.query.limit}`);
        const page = items.slice(from, from + o.query.limit);
        // About 1 KB an object: a page of more than 3 is over 3,500 bytes.
        if (o.maxBytes !== undefined && JSON.stringify(page).length > o.maxBytes)
          throw new KubeResponseTooLarge('list', o.maxBytes);
        const next = from + page.length;
        return {
          items: page,
          metadata: { resourceVersion: '1', continue: next < items.length ? String(next) : undefined },
        };
      },
      watch: async (): Promise<OpenWatch> => ({ abort: () => {}, ended: new Promise(() => {}) }),
    } as unknown as KubeApi;
    const cache = new ServiceAccountCache({
      api,
      annotations: READ,
      log: pino({ level: 'silent' }),
      maxPageBytes: 3500,
    });
    await cache.start();
    try {
      assert.equal(cache.size, 10);
      assert.deepEqual(asked, ['0+500', '0+250', '0+125', '0+62', '0+31', '0+15', '0+7', '0+3', '3+3', '6+3', '9+3']);
    } finally {
      cache.stop();
    }
  });
});
