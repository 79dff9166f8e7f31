// The generic object cache against a real kube-apiserver: the Namespace cache (direct reads on a
// miss, its rate limit and its metrics, like the ServiceAccount cache's), a namespaced watch with
// a field selector (as the certificate manager watches its one Secret), and the token bucket.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { WebhookError } from '../../src/errors.ts';
import type { ListPage } from '../../src/kube/list-watch.ts';
import { NamespaceCache } from '../../src/kube/namespace-cache.ts';
import { ObjectCache } from '../../src/kube/object-cache.ts';
import { TokenBucket } from '../../src/kube/rate-limit.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createNamespace, startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { proxyTo } from '../support/tcp-proxy.ts';
import { until } from '../harness/until.ts';

const log = pino({ level: 'silent' });
let cp: ControlPlane;
let core: CoreV1Api;

before(async () => {
  cp = await startControlPlane({ name: 'object-cache' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  await createNamespace(cp, 'team-a', { tier: 'gold' });
});
after(() => cp?.stop());

async function metricValue(metrics: ReturnType<typeof createMetrics>, name: string, labels: string): Promise<number> {
  const line = (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

const reads = (metrics: ReturnType<typeof createMetrics>, result: string) =>
  metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', `{what="Namespace",result="${result}"}`);

describe('the Namespace cache', () => {
  test('lists names and labels, follows relabelling and new namespaces, and reports its size by kind', async () => {
    const metrics = createMetrics();
    const warnings: string[] = [];
    const recording = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const cache = new NamespaceCache({ kubeConfig: cp.kubeConfig(), log: recording, metrics });
    await cache.start();
    try {
      assert.deepEqual(await cache.lookup('team-a'), {
        name: 'team-a',
        labels: { tier: 'gold', 'kubernetes.io/metadata.name': 'team-a' },
      });
      const size = await metricValue(metrics, 'wiw_serviceaccount_cache_size', '{what="Namespace"}');
      assert.equal(size, cache.size);
      assert.ok(size >= 5, `default, kube-system, kube-public, kube-node-lease and team-a (saw ${size})`);
      const ns = await core.readNamespace({ name: 'team-a' });
      ns.metadata!.labels!.tier = 'silver';
      await core.replaceNamespace({ name: 'team-a', body: ns });
      await until('the watch to deliver the new label', async () => {
        const view = await cache.lookup('team-a');
        return view.labels.tier === 'silver' || undefined;
      });
      await createNamespace(cp, 'later');
      await until('the watch to deliver the new namespace', () => cache.size === size + 1 || undefined);
      assert.equal(await reads(metrics, 'found'), 0, 'every answer came from the list and the watch');
      // Options left unset keep ListWatch's defaults (a 90 s idle watchdog): one quiet watch throughout.
      assert.deepEqual(warnings, []);
      assert.equal(
        await metricValue(metrics, 'wiw_serviceaccount_watch_restarts_total', '{what="Namespace",cause="idle"}'),
        0,
      );
    } finally {
      cache.stop();
    }
  });

  test('a namespace not cached yet is read once, even when asked for concurrently, and then cached', async () => {
    const metrics = createMetrics();
    const cache = new NamespaceCache({ kubeConfig: cp.kubeConfig(), log, metrics });
    await cache.start();
    cache.stop(); // no watch: the direct read is the only way to learn of a new namespace
    await createNamespace(cp, 'brand-new', { team: 'b' });
    const [a, b] = await Promise.all([cache.lookup('brand-new'), cache.lookup('brand-new')]);
    assert.equal(a.labels.team, 'b');
    assert.equal(a, b);
    assert.equal(await reads(metrics, 'found'), 1);
    assert.equal(cache.lookup('brand-new'), a, 'a hit is answered synchronously');
    assert.equal(await reads(metrics, 'found'), 1);
    assert.equal(await metricValue(metrics, 'wiw_serviceaccount_cache_misses_total', '{what="Namespace"}'), 2);
  });

  test('a missing namespace is read once and has no labels; reads beyond the rate limit fail the lookup', async () => {
    const metrics = createMetrics();
    const cache = new NamespaceCache({ kubeConfig: cp.kubeConfig(), log, metrics, missReadsPerSecond: 1 });
    await cache.start();
    cache.stop();
    // Two lookups at once join one read: one token spent.
    const [a, b] = await Promise.all([cache.lookup('ghost'), cache.lookup('ghost')]);
    assert.deepEqual(a, { name: 'ghost', labels: {} });
    assert.deepEqual(b, a);
    assert.equal(await reads(metrics, 'not_found'), 1);
    await assert.rejects(
      async () => cache.lookup('ghost-2'),
      (err: unknown) =>
        err instanceof WebhookError &&
        err.code === 'WIW_NAMESPACE_UNAVAILABLE' &&
        err.message ===
          'the labels of namespace ghost-2 are needed for tenant policy but cannot be read: more than 1 direct reads per second',
    );
    assert.equal(await reads(metrics, 'rate_limited'), 1);
    assert.equal(await reads(metrics, 'not_found'), 1, 'the refused read was not made');
  });

  test('a direct read that gets no answer fails the lookup, naming the timeout', async () => {
    const silent = await proxyTo(cp.server);
    silent.freeze();
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) =>
      c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${silent.port}` } : c,
    );
    const metrics = createMetrics();
    const cache = new NamespaceCache({ kubeConfig: kc, log, metrics, missTimeoutMs: 200 });
    try {
      await assert.rejects(
        async () => cache.lookup('team-a'),
        (err: unknown) =>
          err instanceof WebhookError &&
          err.code === 'WIW_NAMESPACE_UNAVAILABLE' &&
          /namespace team-a .*cannot be read: no answer from the API server in 200 ms$/.test(err.message),
      );
      assert.equal(await reads(metrics, 'timeout'), 1);
    } finally {
      cache.stop();
      silent.close();
    }
  });

  test('a direct read the API server refuses fails the lookup with its answer', async () => {
    const metrics = createMetrics();
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    // A user without credentials: the API server answers 401 (anonymous auth is off) or 403.
    kc.users = kc.users.map((u) => ({ name: u.name }));
    const cache = new NamespaceCache({ kubeConfig: kc, log, metrics });
    try {
      await assert.rejects(
        async () => cache.lookup('team-a'),
        (err: unknown) =>
          err instanceof WebhookError &&
          err.code === 'WIW_NAMESPACE_UNAVAILABLE' &&
          /namespace team-a .*cannot be read: the API server answered: .*(401|403)/.test(err.message),
      );
      assert.equal(await reads(metrics, 'error'), 1);
    } finally {
      cache.stop();
    }
  });
});

describe('a namespaced watch with a field selector', () => {
  test('caches only the named object in the one namespace, and follows its changes and deletion', async () => {
    await createNamespace(cp, 'certs');
    await createNamespace(cp, 'elsewhere');
    const body = (name: string, value: string) => ({ metadata: { name }, data: { value } });
    await core.createNamespacedConfigMap({ namespace: 'certs', body: body('wanted', '1') });
    await core.createNamespacedConfigMap({ namespace: 'certs', body: body('other', '1') });
    await core.createNamespacedConfigMap({ namespace: 'elsewhere', body: body('wanted', '1') });
    const selector = { fieldSelector: 'metadata.name=wanted' };
    type View = { name: string; namespace: string; value: string };
    const events: string[] = [];
    const cache = new ObjectCache<View>({
      kubeConfig: cp.kubeConfig(),
      log,
      what: 'Namespace', // any kind of the closed set; no metrics here
      path: '/api/v1/namespaces/certs/configmaps',
      watchQuery: selector,
      list: (page) => core.listNamespacedConfigMap({ namespace: 'certs', ...selector, ...page }) as Promise<ListPage>,
      read: (name) => core.readNamespacedConfigMap({ namespace: 'certs', name }),
      slim: (raw) => {
        const cm = raw as { metadata: { name: string; namespace: string }; data?: { value?: string } };
        events.push(`${cm.metadata.namespace}/${cm.metadata.name}`);
        return { name: cm.metadata.name, namespace: cm.metadata.namespace, value: cm.data?.value ?? '' };
      },
      key: (view) => view.name,
      unavailable: (key, why) => new Error(`${key}: ${why}`),
    });
    await cache.start();
    try {
      assert.equal(cache.size, 1);
      assert.deepEqual(cache.get('wanted'), { name: 'wanted', namespace: 'certs', value: '1' });
      await core.replaceNamespacedConfigMap({ namespace: 'elsewhere', name: 'wanted', body: body('wanted', 'x') });
      await core.replaceNamespacedConfigMap({ namespace: 'certs', name: 'other', body: body('other', 'x') });
      await core.replaceNamespacedConfigMap({ namespace: 'certs', name: 'wanted', body: body('wanted', '2') });
      await until('the change of the watched object', () => cache.get('wanted')?.value === '2' || undefined);
      await core.deleteNamespacedConfigMap({ namespace: 'certs', name: 'wanted' });
      await until('its deletion', () => cache.size === 0 || undefined);
      assert.deepEqual(
        [...new Set(events)],
        ['certs/wanted'],
        'neither the other object of the namespace nor the namesake elsewhere arrived',
      );
    } finally {
      cache.stop();
    }
  });
});

describe('the token bucket', () => {
  test('allows a burst of its rate, then one take per 1/rate seconds', () => {
    const bucket = new TokenBucket(2, 0);
    assert.deepEqual([bucket.take(0), bucket.take(0), bucket.take(0)], [true, true, false]);
    assert.equal(bucket.take(499), false, 'not quite a token after 499 ms');
    assert.equal(bucket.take(500), true);
    assert.equal(bucket.take(500), false);
    // Idle time refills up to the burst, no further.
    assert.deepEqual([bucket.take(60_000), bucket.take(60_000), bucket.take(60_000)], [true, true, false]);
  });
});
