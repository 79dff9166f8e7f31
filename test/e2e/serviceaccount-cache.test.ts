// The ServiceAccount cache against a real kube-apiserver: slimming, direct reads on a miss,
// and a watch that recovers after its connection is cut or it goes silent.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { ServiceAccountCache, ServiceAccountUnavailable } from '../../src/kube/serviceaccount-cache.ts';
import { kubeApiOf } from '../../src/kube/connect.ts';
import { ListWatch, statusOf } from '../../src/kube/list-watch.ts';
import { createMetrics } from '../../src/metrics.ts';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { proxyTo } from '../support/tcp-proxy.ts';
import { until } from '../harness/until.ts';
import { serviceAccountAnnotations } from '../../src/clouds/index.ts';
import { SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../../src/model.ts';
import { providers } from '../support/builders.ts';
import { roleArn } from '../support/identities.ts';

// What serve keeps: the keys every provider and the Secret path read.
const ANNOTATIONS = [...serviceAccountAnnotations(providers()), ...SECRET_SERVICE_ACCOUNT_ANNOTATIONS];
const log = pino({ level: 'silent' });
let cp: ControlPlane;

before(async () => {
  cp = await startControlPlane({ name: 'sa-cache' });
  await createNamespace(cp, 'ns1');
  await createServiceAccount(cp, 'ns1', 'existing', {
    'eks.amazonaws.com/role-arn': roleArn('a'),
    'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(10_000),
  });
});
after(() => cp?.stop());

async function metricValue(metrics: ReturnType<typeof createMetrics>, name: string, labels = ''): Promise<number> {
  const text = await metrics.registry.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** A cache of `cp`'s ServiceAccounts (or through `kc`) with the test prefixes and log, and `options`. */
type CacheOptions = ConstructorParameters<typeof ServiceAccountCache>[0];
function newCache(options: Partial<CacheOptions> = {}, kc = cp.kubeConfig()): ServiceAccountCache {
  return new ServiceAccountCache({ api: kubeApiOf(kc), annotations: ANNOTATIONS, log, ...options });
}

describe('list and watch', () => {
  test('keeps name, namespace and only the annotation keys the providers read', async () => {
    const cache = newCache();
    await cache.start();
    try {
      const view = cache.get('ns1', 'existing');
      assert.ok(view);
      assert.deepEqual(view.annotations, { 'eks.amazonaws.com/role-arn': roleArn('a') });
      assert.deepEqual(
        Object.keys(view).sort(),
        ['annotations', 'name', 'namespace'],
        'no uid: admission never reads it',
      );
      assert.ok(Object.isFrozen(view));
      await createServiceAccount(cp, 'ns1', 'later', { 'azure.workload.identity/client-id': 'c' });
      const later = await until('the watch to deliver the new ServiceAccount', () => cache.get('ns1', 'later'));
      assert.deepEqual(later.annotations, { 'azure.workload.identity/client-id': 'c' });
    } finally {
      cache.stop();
    }
  });
});

describe('how the list comes', () => {
  test('streamed from the API server cache (sendInitialEvents) where it offers that, else in pages', async () => {
    const streamed = newCache();
    await streamed.start();
    try {
      assert.equal(listWatchOf(streamed).streaming, true);
      assert.ok(streamed.get('ns1', 'existing'));
    } finally {
      streamed.stop();
    }
    // An API server with WatchList off refuses the streamed list: the cache lists in pages instead.
    const old = await startControlPlane({ name: 'sa-cache-pages', extraArgs: ['--feature-gates=WatchList=false'] });
    try {
      await createNamespace(old, 'ns1');
      await Promise.all(
        Array.from({ length: 120 }, (_, i) =>
          createServiceAccount(old, 'ns1', `sa-${i}`, {
            'eks.amazonaws.com/role-arn': roleArn(`r${i}`),
          }),
        ),
      );
      const paged = newCache({ pageSize: 50 }, old.kubeConfig());
      await paged.start();
      try {
        assert.equal(listWatchOf(paged).streaming, false);
        assert.equal(paged.size, 120, 'every ServiceAccount, over three pages');
        assert.equal(paged.get('ns1', 'sa-119')?.annotations['eks.amazonaws.com/role-arn'], roleArn('r119'));
        await createServiceAccount(old, 'ns1', 'later');
        await until('the watch after the pages to deliver', () => paged.get('ns1', 'later'));
      } finally {
        paged.stop();
      }
      // A page answer over maxPageBytes is cut off as it arrives and asked for again with half
      // as many objects: a tenant's large ServiceAccounts never make a page of tens of MiB.
      const api = kubeApiOf(old.kubeConfig());
      const limits: unknown[] = [];
      const spied = new Proxy(api, {
        get: (target, prop) => {
          if (prop === 'request')
            return (method: string, path: string, o?: { query?: { limit?: number } }) => {
              if (o?.query?.limit !== undefined) limits.push(o.query.limit);
              return target.request(method, path, o);
            };
          const value = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const small = new ServiceAccountCache({ api: spied, annotations: ANNOTATIONS, log, maxPageBytes: 16 * 1024 });
      await small.start();
      try {
        assert.equal(small.size, 121, 'every ServiceAccount');
        assert.deepEqual(limits.slice(0, 3), [500, 250, 125], 'pages of fewer objects after an answer over the bytes');
      } finally {
        small.stop();
      }
      // A kind whose CRD is not installed is an empty list either way, and the list-watch is synced.
      for (const plane of [cp, old]) {
        const lists: unknown[][] = [];
        const lw = new ListWatch({
          api: kubeApiOf(plane.kubeConfig()),
          what: 'Widget',
          path: '/apis/example.com/v1/widgets',
          absentStatus: 404,
          onList: (items) => void lists.push(items),
          onEvent: () => assert.fail('no events of an absent kind'),
          log,
        });
        try {
          await lw.start();
          assert.deepEqual(lists, [[]]);
          assert.equal(lw.synced, true);
        } finally {
          lw.stop();
        }
      }
    } finally {
      await old.stop();
    }
  });
});

describe('cache misses', () => {
  test('a miss is read from the API server once, even when asked for concurrently', async () => {
    const metrics = createMetrics();
    const cache = newCache({ metrics });
    await cache.start();
    cache.stop(); // no watch: the only way to learn of a new ServiceAccount is the direct read
    await createServiceAccount(cp, 'ns1', 'brand-new', {
      'eks.amazonaws.com/role-arn': roleArn('b'),
    });
    assert.equal(cache.get('ns1', 'brand-new'), undefined);
    const [a, b] = await Promise.all([cache.lookup('ns1', 'brand-new'), cache.lookup('ns1', 'brand-new')]);
    assert.equal(a?.annotations['eks.amazonaws.com/role-arn'], roleArn('b'));
    assert.equal(a, b);
    assert.equal(
      await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{what="ServiceAccount",result="found"}'),
      1,
    );
    // Now cached: no further read.
    assert.equal(cache.lookup('ns1', 'brand-new'), a);
    assert.equal(
      await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{what="ServiceAccount",result="found"}'),
      1,
    );
  });

  test('a ServiceAccount that does not exist is undefined; reads beyond the rate limit are not made', async () => {
    const metrics = createMetrics();
    const cache = newCache({ metrics, missReadsPerSecond: 1 });
    await cache.start();
    cache.stop();
    assert.equal(await cache.lookup('ns1', 'ghost'), undefined);
    assert.equal(
      await metricValue(
        metrics,
        'wiw_serviceaccount_fallback_reads_total',
        '{what="ServiceAccount",result="not_found"}',
      ),
      1,
    );
    // Beyond the rate limit the answer is unknown, not "absent": the caller must not take it for one.
    await assert.rejects(
      async () => cache.lookup('ns1', 'ghost-2'),
      (err: Error) =>
        err instanceof ServiceAccountUnavailable && /ns1\/ghost-2 .*direct reads per second/.test(err.message),
    );
    assert.equal(
      await metricValue(
        metrics,
        'wiw_serviceaccount_fallback_reads_total',
        '{what="ServiceAccount",result="rate_limited"}',
      ),
      1,
    );
  });

  test('a name no object can have is not found, unasked: it reaches no other resource and spends no read', async () => {
    const metrics = createMetrics();
    const cache = newCache({ metrics, missReadsPerSecond: 1 });
    // Names that would resolve to the namespace, its Secrets or another object if pasted into a path.
    const hostile: [string, string][] = [
      ['ns1', '..'],
      ['ns1', '.'],
      ['ns1', ''],
      ['..', 'existing'],
      ['ns1', '../../namespaces/ns1'],
      ['ns1', 'existing/../existing'],
      ['ns1', 'existing?watch=true'],
      ['ns1', 'existing#x'],
      ['ns1', 'existing%2F..'],
      ['ns1/serviceaccounts/existing', 'x'],
    ];
    for (const [namespace, name] of hostile)
      assert.equal(await cache.lookup(namespace, name), undefined, `${namespace} / ${name}`);
    for (const result of ['found', 'not_found', 'error', 'rate_limited'])
      assert.equal(
        await metricValue(
          metrics,
          'wiw_serviceaccount_fallback_reads_total',
          `{what="ServiceAccount",result="${result}"}`,
        ),
        0,
        `no direct read (${result})`,
      );
    assert.ok(await cache.lookup('ns1', 'existing'), 'the one token left reads the real one');
  });

  test('a direct read that times out or fails is unknown, not absent', async () => {
    // An API server address that accepts connections and never answers.
    const silent = await proxyTo(cp.server);
    silent.freeze();
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) =>
      c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${silent.port}` } : c,
    );
    const metrics = createMetrics();
    const cache = newCache({ metrics, missTimeoutMs: 200 }, kc);
    try {
      await assert.rejects(
        async () => cache.lookup('ns1', 'existing'),
        (err: Error) =>
          err instanceof ServiceAccountUnavailable && /no answer from the API server in 200 ms/.test(err.message),
      );
      assert.equal(
        await metricValue(
          metrics,
          'wiw_serviceaccount_fallback_reads_total',
          '{what="ServiceAccount",result="timeout"}',
        ),
        1,
      );
    } finally {
      cache.stop();
      silent.close();
    }
  });
});

// The ListWatch under the cache, for its diagnostics.
function listWatchOf(cache: ServiceAccountCache): ListWatch {
  return (cache as unknown as { listWatchForTests: ListWatch }).listWatchForTests;
}

/** A pino logger whose lines the test can read. */
function recordingLog() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

describe('a quiet cluster', () => {
  test('a watch the API server ends (its timeoutSeconds) resumes at once: no backoff, no failure metric, no warning', async () => {
    const { log: recLog, lines } = recordingLog();
    const restarts: string[] = [];
    const seen = new Set<string>();
    const lw = new ListWatch({
      api: kubeApiOf(cp.kubeConfig()),
      what: 'Namespace',
      path: '/api/v1/namespaces',
      onList: (items) => {
        for (const i of items) seen.add((i as { metadata: { name: string } }).metadata.name);
      },
      onEvent: (_type, obj) => void seen.add((obj as { metadata: { name: string } }).metadata.name),
      onRestart: (cause) => void restarts.push(cause),
      log: recLog,
      // The API server closes each watch after a second; our own watchdog would wait a minute.
      watchTimeoutSeconds: () => 1,
      watchIdleTimeoutMs: 60_000,
    });
    try {
      await lw.start();
      // Each end is a normal one: the watch reopens from the last resourceVersion.
      await until('three watches ended by the API server and reopened', () => lw.connects >= 4 || undefined, 30_000);
      assert.deepEqual(restarts, []);
      assert.deepEqual(
        lines.filter((l) => (l.level as number) >= 40),
        [],
        'no warning or error for a normal end',
      );
      await createNamespace(cp, 'quiet-new');
      await until('the reopened watch to deliver', () => seen.has('quiet-new') || undefined);
    } finally {
      lw.stop();
    }
  });

  test('the DOMException code of a timeout (23) is not taken for an HTTP status', () => {
    assert.equal(statusOf(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), undefined);
    assert.equal(statusOf({ code: 403 }), 403);
  });
});

describe('watch recovery', () => {
  test('a watch whose connection is cut is restarted and keeps delivering', async () => {
    const proxy = await proxyTo(cp.server);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) =>
      c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${proxy.port}`, tlsServerName: 'localhost' } : c,
    );
    const metrics = createMetrics();
    const cache = newCache({ metrics }, kc);
    try {
      await cache.start();
      await until('the watch to be open', () => cache.watching || undefined);
      const connects = listWatchOf(cache).connects;
      proxy.cut();
      await until('the watch to be reopened', () => listWatchOf(cache).connects > connects || undefined);
      await createServiceAccount(cp, 'ns1', 'after-cut', {
        'eks.amazonaws.com/role-arn': roleArn('c'),
      });
      await until('the restarted watch to deliver', () => cache.get('ns1', 'after-cut'));
    } finally {
      cache.stop();
      proxy.close();
    }
  });

  test('a silent watch is restarted', async () => {
    const metrics = createMetrics();
    const cache = newCache({ metrics, watchIdleTimeoutMs: 300 });
    try {
      await cache.start();
      await until(
        'an idle restart',
        async () =>
          (await metricValue(
            metrics,
            'wiw_serviceaccount_watch_restarts_total',
            '{what="ServiceAccount",cause="idle"}',
          )) >= 1 || undefined,
      );
      await createServiceAccount(cp, 'ns1', 'after-idle', {
        'eks.amazonaws.com/role-arn': roleArn('d'),
      });
      await until('the restarted watch to deliver', () => cache.get('ns1', 'after-idle'));
    } finally {
      cache.stop();
    }
  });
});
