// The ServiceAccount cache against a real kube-apiserver: slimming, direct reads on a miss,
// and a watch that recovers after its connection is cut or it goes silent.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { ServiceAccountCache } from '../src/kube/serviceaccount-cache.ts';
import { createMetrics } from '../src/metrics.ts';
import { createNamespace, createServiceAccount, startControlPlane, type ControlPlane } from './harness/control-plane.ts';
import { until } from './support/webhook.ts';

const PREFIXES = ['eks.amazonaws.com/', 'azure.workload.identity/'];
const log = pino({ level: 'silent' });
let cp: ControlPlane;

before(async () => {
  cp = await startControlPlane({ name: 'sa-cache' });
  await createNamespace(cp, 'ns1');
  await createServiceAccount(cp, 'ns1', 'existing', {
    'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/a',
    'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(10_000),
  });
});
after(() => cp?.stop());

async function metricValue(metrics: ReturnType<typeof createMetrics>, name: string, labels = ''): Promise<number> {
  const text = await metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('list and watch', () => {
  test('keeps name, namespace, uid and only the annotations of the providers\' prefixes', async () => {
    const cache = new ServiceAccountCache({ kubeConfig: cp.kubeConfig(), annotationPrefixes: PREFIXES, log });
    await cache.start();
    try {
      const view = cache.get('ns1', 'existing');
      assert.ok(view);
      assert.deepEqual(view.annotations, { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/a' });
      assert.match(view.uid, /^[0-9a-f-]{36}$/);
      assert.ok(Object.isFrozen(view));
      await createServiceAccount(cp, 'ns1', 'later', { 'azure.workload.identity/client-id': 'c' });
      const later = await until('the watch to deliver the new ServiceAccount', () => cache.get('ns1', 'later'));
      assert.deepEqual(later.annotations, { 'azure.workload.identity/client-id': 'c' });
    } finally {
      cache.stop();
    }
  });
});

describe('cache misses', () => {
  test('a miss is read from the API server once, even when asked for concurrently', async () => {
    const metrics = createMetrics();
    const cache = new ServiceAccountCache({ kubeConfig: cp.kubeConfig(), annotationPrefixes: PREFIXES, log, metrics });
    await cache.start();
    cache.stop(); // no watch: the only way to learn of a new ServiceAccount is the direct read
    await createServiceAccount(cp, 'ns1', 'brand-new', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/b' });
    assert.equal(cache.get('ns1', 'brand-new'), undefined);
    const [a, b] = await Promise.all([cache.lookup('ns1', 'brand-new'), cache.lookup('ns1', 'brand-new')]);
    assert.equal(a?.annotations['eks.amazonaws.com/role-arn'], 'arn:aws:iam::111122223333:role/b');
    assert.equal(a, b);
    assert.equal(await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{result="found"}'), 1);
    // Now cached: no further read.
    assert.equal(cache.lookup('ns1', 'brand-new'), a);
    assert.equal(await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{result="found"}'), 1);
  });

  test('a ServiceAccount that does not exist is undefined; reads beyond the rate limit are not made', async () => {
    const metrics = createMetrics();
    const cache = new ServiceAccountCache({ kubeConfig: cp.kubeConfig(), annotationPrefixes: PREFIXES, log, metrics, missReadsPerSecond: 1 });
    await cache.start();
    cache.stop();
    assert.equal(await cache.lookup('ns1', 'ghost'), undefined);
    assert.equal(await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{result="not_found"}'), 1);
    assert.equal(await cache.lookup('ns1', 'ghost-2'), undefined);
    assert.equal(await metricValue(metrics, 'wiw_serviceaccount_fallback_reads_total', '{result="rate_limited"}'), 1);
  });
});

/** A TCP proxy in front of the API server whose connections the test can cut. */
async function startProxy(target: URL): Promise<{ server: Server; port: number; cut(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    cut: () => { for (const s of sockets) s.destroy(); },
  };
}

describe('watch recovery', () => {
  test('a watch whose connection is cut is restarted and keeps delivering', async () => {
    const proxy = await startProxy(new URL(cp.server));
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${proxy.port}`, tlsServerName: 'localhost' } : c));
    const metrics = createMetrics();
    const cache = new ServiceAccountCache({ kubeConfig: kc, annotationPrefixes: PREFIXES, log, metrics });
    try {
      await cache.start();
      await until('the watch to be open', () => cache.watching || undefined);
      proxy.cut();
      await until('the watch restart to be counted', async () => {
        const text = await metrics.registry.metrics();
        return /wiw_serviceaccount_watch_restarts_total\{cause="(watch_error|closed)"\} [1-9]/.test(text) || undefined;
      });
      await createServiceAccount(cp, 'ns1', 'after-cut', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/c' });
      await until('the restarted watch to deliver', () => cache.get('ns1', 'after-cut'));
    } finally {
      cache.stop();
      proxy.cut();
      proxy.server.close();
    }
  });

  test('a silent watch is restarted', async () => {
    const metrics = createMetrics();
    const cache = new ServiceAccountCache({ kubeConfig: cp.kubeConfig(), annotationPrefixes: PREFIXES, log, metrics, watchIdleTimeoutMs: 300 });
    try {
      await cache.start();
      await until('an idle restart', async () => (await metricValue(metrics, 'wiw_serviceaccount_watch_restarts_total', '{cause="idle"}')) >= 1 || undefined);
      await createServiceAccount(cp, 'ns1', 'after-idle', { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/d' });
      await until('the restarted watch to deliver', () => cache.get('ns1', 'after-idle'));
    } finally {
      cache.stop();
    }
  });
});
