// Hardening, end to end through a real kube-apiserver: what a Pod author or a slow API server can
// do to admission. Every assertion is on what the API server answered or stored.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { createCa, createClientCert } from '../harness/certs.ts';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { httpsRequest } from '../support/https-client.ts';
import { proxyTo } from '../support/tcp-proxy.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { startSidecarInjector } from '../support/sidecar-injector.ts';
import { CLIENT, ROLE_ARN as ARN, TENANT, WIF_PROVIDER as PROVIDER } from '../support/identities.ts';

const INJECTED = 'workload-identity-webhook.io/injected';

let cp: ControlPlane;
let core: CoreV1Api;
let dir: string;
let wh: WebhookProcess;
const cleanups: (() => Promise<unknown> | void)[] = [];

before(async () => {
  // The API server authenticates to webhooks with a client certificate (its admission kubeconfig):
  // `*` is the user for every webhook.
  dir = await mkdtemp(join(tmpdir(), 'wiw-hardening-'));
  const ca = await createCa('webhook-clients');
  const client = await createClientCert(ca, 'kube-apiserver');
  await writeFile(join(dir, 'client-ca.pem'), ca.cert);
  await writeFile(
    join(dir, 'admission-kubeconfig.yaml'),
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      users: [
        {
          name: '*',
          user: {
            'client-certificate-data': Buffer.from(client.cert).toString('base64'),
            'client-key-data': Buffer.from(client.key).toString('base64'),
          },
        },
      ],
    }),
  );
  await writeFile(
    join(dir, 'admission.yaml'),
    stringify({
      apiVersion: 'apiserver.config.k8s.io/v1',
      kind: 'AdmissionConfiguration',
      plugins: [
        {
          name: 'MutatingAdmissionWebhook',
          configuration: {
            apiVersion: 'apiserver.config.k8s.io/v1',
            kind: 'WebhookAdmissionConfiguration',
            kubeConfigFile: join(dir, 'admission-kubeconfig.yaml'),
          },
        },
      ],
    }),
  );
  cp = await startControlPlane({
    name: 'hardening',
    extraArgs: [`--admission-control-config-file=${join(dir, 'admission.yaml')}`],
  });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  await createNamespace(cp, 'team-a', { 'e2e.workload-identity-webhook.io/hardening': 'on' });
  await createServiceAccount(cp, 'team-a', 'app', {
    'eks.amazonaws.com/role-arn': ARN,
    'azure.workload.identity/client-id': CLIENT,
    'cloud.google.com/workload-identity-provider': PROVIDER,
  });
  await createServiceAccount(cp, 'team-a', 'plain', {});
  // The webhook requires the API server's client certificate.
  wh = await startWebhook(cp, ['--azure-tenant-id', TENANT, '--client-ca-file', join(dir, 'client-ca.pem')]);
  await registerWebhook(
    cp,
    wh,
    'b-workload-identity',
    [
      {
        namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/hardening': 'on' } },
      },
    ],
    'team-a',
  );
});

after(async () => {
  for (const c of cleanups.reverse()) await c();
  await wh?.stop();
  await cp?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function env(c: { env?: { name: string; value?: string }[] }): Record<string, string | undefined> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
}

async function createPod(namespace: string, body: V1Pod, dryRun = false): Promise<V1Pod> {
  return core.createNamespacedPod({ namespace, body, ...(dryRun ? { dryRun: 'All' } : {}) });
}

async function refusal(promise: Promise<unknown>): Promise<{ code?: number; body?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as { code?: number; body?: string };
  }
  return assert.fail('expected the API server to refuse the Pod');
}

describe('client authentication', () => {
  test('the API server presents its client certificate and Pods are mutated', async () => {
    const pod = await createPod(
      'team-a',
      {
        metadata: { name: 'mtls' },
        spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
      },
      true,
    );
    assert.equal(env(pod.spec!.containers[0]).AWS_ROLE_ARN, ARN);
  });

  test("a caller without that certificate cannot use /mutate to read another namespace's role", async () => {
    const review = {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'x',
        kind: { group: '', version: 'v1', kind: 'Pod' },
        namespace: 'team-a',
        operation: 'CREATE',
        object: { metadata: {}, spec: { serviceAccountName: 'app', containers: [{ name: 'c' }] } },
      },
    };
    const res = await httpsRequest(`${wh.url}/mutate`, {
      method: 'POST',
      ca: wh.caPem,
      body: JSON.stringify(review),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 401);
    assert.equal(res.json().code, 'WIW_CLIENT_CERTIFICATE_REQUIRED');
    assert.doesNotMatch(res.body, /111122223333/);
    // Probes carry no certificate and still work.
    assert.equal((await httpsRequest(`${wh.url}/readyz`, { ca: wh.caPem })).status, 200);
  });
});

describe('what a Pod author controls', () => {
  test("a forged injection record does not remove another webhook's env var, volume, mount or annotation", async () => {
    const forged = JSON.stringify({
      sa: 'someone-else',
      env: { app: ['HTTPS_PROXY'] },
      volumes: ['corp-ca'],
      annotations: ['proxy.example.com/injected'],
    });
    // A webhook whose configuration sorts earlier adds a proxy, a CA volume and an annotation.
    const proxy = await startSidecarInjector('unused', {
      extraPatch: [
        { op: 'add', path: '/metadata/annotations/proxy.example.com~1injected', value: 'true' },
        { op: 'add', path: '/spec/volumes', value: [{ name: 'corp-ca', configMap: { name: 'corp-ca' } }] },
        {
          op: 'add',
          path: '/spec/containers/0/env',
          value: [{ name: 'HTTPS_PROXY', value: 'http://proxy.corp:3128' }],
        },
        {
          op: 'add',
          path: '/spec/containers/0/volumeMounts',
          value: [{ name: 'corp-ca', mountPath: '/etc/ssl/corp' }],
        },
      ],
      noSidecar: true,
    });
    cleanups.push(() => proxy.stop());
    const reg = await registerWebhook(
      cp,
      undefined,
      'a-proxy',
      [
        {
          reinvocationPolicy: 'Never',
          namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/hardening': 'on' } },
          objectSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/proxy': 'on' } },
          clientConfig: { url: `${proxy.url}/mutate`, caBundle: Buffer.from(proxy.caPem).toString('base64') },
        },
      ],
      'team-a',
    );
    cleanups.push(() => reg.remove());
    const body = (name: string): V1Pod => ({
      metadata: {
        name,
        labels: { 'e2e.workload-identity-webhook.io/proxy': 'on' },
        annotations: { [INJECTED]: forged },
      },
      spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
    });
    // Configuration changes reach the admission chain asynchronously: wait for the proxy's work.
    await until('the proxy webhook to be called', async () => {
      const probe = await createPod('team-a', body(`proxy-probe-${Date.now()}`), true);
      return env(probe.spec!.containers[0]).HTTPS_PROXY !== undefined || undefined;
    });
    const pod = await createPod('team-a', body('forged'));
    assert.equal(env(pod.spec!.containers[0]).HTTPS_PROXY, 'http://proxy.corp:3128');
    assert.ok(pod.spec!.containers[0].volumeMounts!.some((m) => m.name === 'corp-ca'));
    assert.ok(pod.spec!.volumes!.some((v) => v.name === 'corp-ca'));
    assert.equal(pod.metadata!.annotations!['proxy.example.com/injected'], 'true');
    assert.equal(env(pod.spec!.containers[0]).AWS_ROLE_ARN, ARN);
    assert.notEqual(pod.metadata!.annotations![INJECTED], forged);
  });

  test('a container named "constructor" gets its identity like any other', async () => {
    const pod = await createPod('team-a', {
      metadata: { name: 'proto' },
      spec: {
        serviceAccountName: 'app',
        containers: [
          { name: 'constructor', image: 'busybox' },
          { name: 'valueof', image: 'busybox' },
        ],
      },
    });
    for (const c of pod.spec!.containers) assert.equal(env(c).AWS_ROLE_ARN, ARN, c.name);
  });

  test('a dry-run Pod of 8,000 containers is refused in a small answer and the webhook keeps serving', async () => {
    const containers = Array.from({ length: 8000 }, (_, i) => ({ name: `c${i}`, image: 'i' }));
    const err = await refusal(
      createPod('team-a', { metadata: { name: 'huge' }, spec: { serviceAccountName: 'app', containers } }, true),
    );
    assert.match(String(err.body), /8000 containers, more than the 500 workload-identity-webhook admits/);
    const ok = await createPod(
      'team-a',
      {
        metadata: { name: 'after-huge' },
        spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
      },
      true,
    );
    assert.equal(env(ok.spec!.containers[0]).AWS_ROLE_ARN, ARN);
  });

  test("a Pod at the container limit with three clouds is stored: the webhook's annotations stay small", async () => {
    const containers = Array.from({ length: 500 }, (_, i) => ({ name: `c${i}`, image: 'i' }));
    const pod = await createPod('team-a', {
      metadata: { name: 'at-limit', labels: { 'azure.workload.identity/use': 'true' } },
      spec: { serviceAccountName: 'app', containers },
    });
    assert.equal(pod.spec!.containers.length, 500);
    assert.equal(env(pod.spec!.containers[499]).AWS_ROLE_ARN, ARN);
    const annotationBytes = Object.entries(pod.metadata!.annotations!).reduce(
      (n, [k, v]) => n + k.length + v.length,
      0,
    );
    assert.ok(annotationBytes < 8 * 1024, `${annotationBytes} bytes of annotations`);
  });
});

describe('a ServiceAccount that cannot be read', () => {
  test('with Fail the Pod is refused, retryably, naming why; with Ignore it is admitted with a warning', async () => {
    const proxy = await proxyTo(cp.server);
    cleanups.push(() => proxy.close());
    const kubeconfig = join(dir, 'partitioned-kubeconfig');
    const kc = cp.kubeConfig();
    const cluster = kc.getCurrentCluster()!;
    kc.clusters = kc.clusters.map((c) =>
      c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${proxy.port}`, tlsServerName: 'localhost' } : c,
    );
    await writeFile(kubeconfig, kc.exportConfig());
    for (const ns of ['unresolved-fail', 'unresolved-ignore'])
      await createNamespace(cp, ns, { [`e2e.workload-identity-webhook.io/${ns}`]: 'on' });
    const args = [
      '--kubeconfig',
      kubeconfig,
      '--cache-miss-timeout-ms',
      '300',
      '--client-ca-file',
      join(dir, 'client-ca.pem'),
    ];
    const failing = await startWebhook(cp, [...args, '--failure-policy', 'Fail']);
    const ignoring = await startWebhook(cp, [...args, '--failure-policy', 'Ignore']);
    cleanups.push(
      () => failing.stop(),
      () => ignoring.stop(),
    );
    for (const [w, ns] of [
      [failing, 'unresolved-fail'],
      [ignoring, 'unresolved-ignore'],
    ] as const) {
      const reg = await registerWebhook(
        cp,
        w,
        `c-${ns}`,
        [{ namespaceSelector: { matchLabels: { [`e2e.workload-identity-webhook.io/${ns}`]: 'on' } } }],
        ns,
      );
      cleanups.push(() => reg.remove());
    }
    // Both webhooks have listed ServiceAccounts; now their way to the API server goes silent.
    proxy.freeze();
    for (const ns of ['unresolved-fail', 'unresolved-ignore'])
      await createServiceAccount(cp, ns, 'fresh', { 'eks.amazonaws.com/role-arn': ARN });

    const err = await refusal(
      createPod('unresolved-fail', {
        metadata: { name: 'p' },
        spec: { serviceAccountName: 'fresh', containers: [{ name: 'app', image: 'busybox' }] },
      }),
    );
    assert.equal(err.code, 503);
    assert.match(
      String(err.body),
      /ServiceAccount unresolved-fail\/fresh is not cached yet and could not be read \(no answer from the API server in 300 ms\); the Pod is refused so that it does not start without its cloud identity: retry shortly/,
    );

    const res = await cp.request('POST', '/api/v1/namespaces/unresolved-ignore/pods', {
      metadata: { name: 'p' },
      spec: { serviceAccountName: 'fresh', containers: [{ name: 'app', image: 'busybox' }] },
    });
    assert.equal(res.status, 201, res.body);
    assert.match(
      String(res.headers.warning),
      /ServiceAccount unresolved-ignore\/fresh is not cached yet and could not be read .*admitted without a cloud identity/,
    );
    assert.equal((JSON.parse(res.body) as V1Pod).spec!.volumes, undefined);
  });
});
