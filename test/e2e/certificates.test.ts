import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AdmissionregistrationV1Api, CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { loadConfig } from '../../src/config.ts';
import { ConfigError } from '../../src/errors.ts';
import { NEXT_SINCE_ANNOTATION, parseState, planFor } from '../../src/tls/certificate-state.ts';
import { generateCertificatesValidFor } from '../../src/tls/self-signed.ts';
import {
  createNamespace,
  createServiceAccount,
  freePorts,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { servedCertificate, startLocalWebhook, type LocalWebhook } from '../support/chart-webhook.ts';
import { until } from '../harness/until.ts';
import { roleArn } from '../support/identities.ts';

const ROLE = roleArn('rotation');
const b64 = (s: string) => Buffer.from(s).toString('base64');

async function secretData(
  cert: { caPem: string[]; certPem: string; keyPem: string },
  next?: { certPem: string; keyPem: string },
): Promise<V1Secret> {
  const data: Record<string, string> = {
    'ca.crt': b64(cert.caPem.join('')),
    'tls.crt': b64(cert.certPem),
    'tls.key': b64(cert.keyPem),
  };
  if (next) Object.assign(data, { 'next.crt': b64(next.certPem), 'next.key': b64(next.keyPem) });
  return { metadata: { resourceVersion: '1', annotations: {} }, data };
}

describe('rotation plan (pure)', () => {
  const hosts = ['127.0.0.1', 'svc.ns.svc'];
  const timing = { renewBeforeMs: 30_000, propagationMs: 5_000 };

  test('an empty Secret is filled', () => {
    assert.deepEqual(planFor(parseState({ metadata: {} }), hosts, timing), {
      action: 'replace',
      why: 'no serving certificate yet',
    });
  });

  test('a fresh certificate is kept; one inside the renewal window starts a rotation', async () => {
    const set = await generateCertificatesValidFor(hosts, 3600);
    const state = parseState(await secretData({ caPem: [set.caPem], certPem: set.certPem, keyPem: set.keyPem }));
    assert.equal(planFor(state, hosts, timing).action, 'none');
    const notAfter = new Date(new X509Certificate(set.certPem).validTo).getTime();
    assert.equal(planFor(state, hosts, timing, notAfter - 29_000).action, 'start-rotation');
    assert.equal(planFor(state, hosts, timing, notAfter + 1000).action, 'replace');
  });

  test('a pending certificate is promoted only after the propagation time', async () => {
    const old = await generateCertificatesValidFor(hosts, 3600);
    const next = await generateCertificatesValidFor(hosts, 3600);
    const secret = await secretData({ caPem: [old.caPem, next.caPem], certPem: old.certPem, keyPem: old.keyPem }, next);
    const since = Date.now();
    secret.metadata!.annotations![NEXT_SINCE_ANNOTATION] = new Date(since).toISOString();
    const state = parseState(secret);
    assert.equal(planFor(state, hosts, timing, since + 4000).action, 'none');
    assert.equal(planFor(state, hosts, timing, since + 5000).action, 'promote');
  });

  test('a pending certificate whose CA is not in ca.crt is dropped, never served', async () => {
    const old = await generateCertificatesValidFor(hosts, 3600);
    const next = await generateCertificatesValidFor(hosts, 3600);
    const secret = await secretData({ caPem: [old.caPem], certPem: old.certPem, keyPem: old.keyPem }, next);
    secret.metadata!.annotations![NEXT_SINCE_ANNOTATION] = new Date(0).toISOString();
    assert.equal(planFor(parseState(secret), hosts, timing).action, 'drop-next');
  });

  test('a certificate for other hosts, or not signed by ca.crt, is replaced', async () => {
    const other = await generateCertificatesValidFor(['elsewhere.example'], 3600);
    const mine = await generateCertificatesValidFor(hosts, 3600);
    const wrongHosts = parseState(
      await secretData({ caPem: [other.caPem], certPem: other.certPem, keyPem: other.keyPem }),
    );
    assert.match((planFor(wrongHosts, hosts, timing) as { why: string }).why, /configured hosts/);
    const wrongCa = parseState(await secretData({ caPem: [other.caPem], certPem: mine.certPem, keyPem: mine.keyPem }));
    assert.match((planFor(wrongCa, hosts, timing) as { why: string }).why, /not signed by a CA/);
  });
});

describe('certificate flags', () => {
  const load = (flags: Record<string, string>) => loadConfig(new Map(Object.entries(flags)), {});

  test('--cert-secret excludes the other certificate sources', () => {
    assert.throws(
      () => load({ 'cert-secret': 's', 'self-signed': 'true' }),
      (e: unknown) => e instanceof ConfigError && /--cert-secret/.test(e.message),
    );
  });

  test('the renewal window must leave room for propagation and resync, naming the flags', () => {
    assert.throws(
      () =>
        load({
          'cert-secret': 's',
          'cert-renew-before-seconds': '10',
          'cert-propagation-seconds': '5',
          'cert-resync-seconds': '1',
        }),
      /--cert-renew-before-seconds=10 must exceed twice --cert-propagation-seconds plus --cert-resync-seconds/,
    );
    assert.throws(
      () => load({ 'cert-validity-seconds': '100', 'cert-renew-before-seconds': '100' }),
      /must be below --cert-validity-seconds/,
    );
    assert.equal(load({ 'cert-secret': 's' }).certRenewBeforeSeconds, 60 * 86400);
  });
});

describe('self-managed certificates against a real API server', () => {
  let cp: ControlPlane;
  let core: CoreV1Api;
  let admission: AdmissionregistrationV1Api;
  const started: LocalWebhook[] = [];
  const NS = 'wiw-system';

  before(async () => {
    cp = await startControlPlane({ name: 'certificates' });
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    admission = cp.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    await createNamespace(cp, NS);
    await createNamespace(cp, 'apps');
    await createServiceAccount(cp, 'apps', 'worker', { 'eks.amazonaws.com/role-arn': ROLE });
  });

  after(async () => {
    await Promise.all(started.map((w) => w.stop()));
    await cp?.stop();
  });

  async function emptySecret(name: string): Promise<void> {
    await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name }, type: 'Opaque' } });
  }

  /** One webhook entry per URL, so every Pod creation passes through each replica. */
  async function webhookConfiguration(name: string, ports: number[]): Promise<void> {
    await admission.createMutatingWebhookConfiguration({
      body: {
        metadata: { name },
        webhooks: ports.map((port, i) => ({
          name: `r${i}.${name}.workload-identity-webhook.io`,
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          timeoutSeconds: 10,
          failurePolicy: 'Fail',
          reinvocationPolicy: 'IfNeeded',
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'apps' } },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
          clientConfig: { url: `https://127.0.0.1:${port}/mutate` },
        })),
      },
    });
  }

  function replica(
    secret: string,
    port: number,
    configuration: string | undefined,
    timing: string[] = [],
  ): Promise<LocalWebhook> {
    return startLocalWebhook(cp, {
      kubeconfigPath: cp.kubeconfigPath,
      args: [
        '--port',
        String(port),
        '--cert-secret',
        secret,
        '--cert-secret-namespace',
        NS,
        ...(configuration ? ['--cert-webhook-configuration', configuration] : []),
        '--self-signed-hosts',
        '127.0.0.1',
        ...timing,
      ],
    }).then((w) => (started.push(w), w));
  }

  async function caBundles(name: string): Promise<string[]> {
    const config = await admission.readMutatingWebhookConfiguration({ name });
    return (config.webhooks ?? []).map((w) => Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString());
  }

  function dryRunPod(name: string) {
    return core.createNamespacedPod({
      namespace: 'apps',
      dryRun: 'All',
      body: {
        metadata: { name },
        spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
      },
    });
  }

  test('an empty Secret is filled, the caBundle patched, and Pods are then admitted through it', async () => {
    await emptySecret('certs-a');
    const [port] = await freePorts(1);
    await webhookConfiguration('certs-a', [port]);
    const wh = await replica('certs-a', port, 'certs-a');

    const secret = await core.readNamespacedSecret({ namespace: NS, name: 'certs-a' });
    const caPem = Buffer.from(secret.data!['ca.crt'], 'base64').toString();
    assert.deepEqual(await caBundles('certs-a'), [caPem]);
    const served = await servedCertificate(wh.port);
    assert.equal(served, new X509Certificate(Buffer.from(secret.data!['tls.crt'], 'base64')).fingerprint256);

    const pod = await until('a Pod admitted through the patched caBundle', async () =>
      dryRunPod(`first-${Date.now()}`).catch(() => undefined),
    );
    const env = Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.AWS_ROLE_ARN, ROLE);
    await wh.stop();
    await admission.deleteMutatingWebhookConfiguration({ name: 'certs-a' });
  });

  test('two replicas starting together agree on one CA and serve the same certificate', async () => {
    await emptySecret('certs-b');
    const ports = await freePorts(2);
    await webhookConfiguration('certs-b', ports);
    const [a, b] = await Promise.all(ports.map((p) => replica('certs-b', p, 'certs-b')));

    const secret = await core.readNamespacedSecret({ namespace: NS, name: 'certs-b' });
    const bundle = Buffer.from(secret.data!['ca.crt'], 'base64').toString();
    assert.equal(bundle.match(/BEGIN CERTIFICATE/g)?.length, 1, 'exactly one CA');
    const [fa, fb] = await Promise.all([servedCertificate(a.port), servedCertificate(b.port)]);
    assert.equal(fa, fb);
    assert.equal(fa, new X509Certificate(Buffer.from(secret.data!['tls.crt'], 'base64')).fingerprint256);
    const created = [...a.logs(), ...b.logs()].filter((l) => l.msg === 'created a CA and serving certificate');
    assert.equal(created.length, 1, 'one replica wrote the Secret; the other adopted it');
    assert.deepEqual(await caBundles('certs-b'), [bundle, bundle]);
    await Promise.all([a.stop(), b.stop()]);
    await admission.deleteMutatingWebhookConfiguration({ name: 'certs-b' });
  });

  test('rotations under steady admission traffic fail no request', async () => {
    await emptySecret('certs-c');
    const ports = await freePorts(2);
    await webhookConfiguration('certs-c', ports);
    // Each certificate lives 14 s and is renewed 8 s before expiry: a rotation every ~6 s.
    const timing = [
      '--cert-validity-seconds',
      '14',
      '--cert-renew-before-seconds',
      '8',
      '--cert-propagation-seconds',
      '2',
      '--cert-resync-seconds',
      '1',
    ];
    const replicas = await Promise.all(ports.map((p) => replica('certs-c', p, 'certs-c', timing)));
    await until('Pods admitted through the first caBundle', async () =>
      dryRunPod(`warm-${Date.now()}`).catch(() => undefined),
    );

    const promoted = () =>
      replicas.flatMap((r) => r.logs()).filter((l) => l.msg === 'certificate rotation: new certificate promoted')
        .length;
    const seen = new Set<string>();
    let ok = 0;
    const failures: string[] = [];
    const deadline = Date.now() + 60_000;
    // Bounded: stops after two promotions plus a few seconds of traffic, or at the deadline.
    let settleUntil = Infinity;
    for (let i = 0; Date.now() < Math.min(deadline, settleUntil); i++) {
      await Promise.all(
        [0, 1].map(async (lane) => {
          try {
            const pod = await dryRunPod(`traffic-${i}-${lane}`);
            const env = (pod.spec!.containers[0].env ?? []).filter((e) => e.name === 'AWS_ROLE_ARN');
            if (env.length === 1 && env[0].value === ROLE) ok++;
            else failures.push(`traffic-${i}-${lane}: not mutated`);
          } catch (err) {
            failures.push(`traffic-${i}-${lane}: ${(err as { body?: string }).body ?? (err as Error).message}`);
          }
        }),
      );
      if (i % 5 === 0) for (const p of ports) seen.add(await servedCertificate(p));
      if (settleUntil === Infinity && promoted() >= 3) settleUntil = Date.now() + 3000;
    }
    for (const p of ports) seen.add(await servedCertificate(p));
    const rotations = promoted();
    console.log(
      `rotation under traffic: ${ok} Pods admitted, ${failures.length} failed, ${rotations} promotions logged, ${seen.size} distinct serving certificates observed`,
    );
    assert.deepEqual(failures, []);
    assert.ok(rotations >= 2, `at least two rotations happened (saw ${rotations} promotion log lines)`);
    assert.ok(seen.size >= 3, `the served certificate changed at least twice (saw ${seen.size})`);
    assert.ok(ok >= 50, `steady traffic: ${ok} Pods`);
    const bundle = (await caBundles('certs-c'))[0];
    assert.ok((bundle.match(/BEGIN CERTIFICATE/g)?.length ?? 0) <= 3, 'expired CAs are pruned from the caBundle');
    await Promise.all(replicas.map((r) => r.stop()));
    await admission.deleteMutatingWebhookConfiguration({ name: 'certs-c' });
  });

  test('a certificate another replica writes is served at once, through the watch, not at the next resync', async () => {
    await emptySecret('certs-d');
    const [port] = await freePorts(1);
    const wh = await replica('certs-d', port, undefined, ['--cert-resync-seconds', '3600']);
    const first = await servedCertificate(wh.port);
    // What another replica's replacement writes: a fresh CA and the serving pair it signed.
    const set = await generateCertificatesValidFor(['127.0.0.1'], 3600);
    const secret = await core.readNamespacedSecret({ namespace: NS, name: 'certs-d' });
    secret.data = { 'ca.crt': b64(set.caPem), 'tls.crt': b64(set.certPem), 'tls.key': b64(set.keyPem) };
    await core.replaceNamespacedSecret({ namespace: NS, name: 'certs-d', body: secret });
    const expected = new X509Certificate(set.certPem).fingerprint256;
    assert.notEqual(first, expected);
    await until(
      'the written certificate to be served (the resync is an hour away)',
      async () => (await servedCertificate(wh.port)) === expected || undefined,
      10_000,
    );
    assert.ok(wh.logs().some((l) => l.msg === 'serving the new certificate'));
    assert.deepEqual(
      wh.logs().filter((l) => (l.level as number) >= 40),
      [],
      'no warning: the Secret is listed and watched',
    );
    await wh.stop();
  });

  test('an entry added to the webhook configuration later gets the caBundle at once, through its watch', async () => {
    await emptySecret('certs-e');
    const [port] = await freePorts(1);
    await webhookConfiguration('certs-e', [port]);
    const wh = await replica('certs-e', port, 'certs-e', ['--cert-resync-seconds', '3600']);
    const [bundle] = await caBundles('certs-e');
    assert.match(bundle, /BEGIN CERTIFICATE/);
    // What a helm upgrade adding an entry does: the new entry comes without a caBundle. Twice: the
    // first may race the reconcile that follows the replica's start; the second cannot.
    for (const added of ['added-1', 'added-2']) {
      const config = await admission.readMutatingWebhookConfiguration({ name: 'certs-e' });
      const entry = { ...structuredClone(config.webhooks![0]), name: `${added}.certs-e.workload-identity-webhook.io` };
      delete entry.clientConfig.caBundle;
      config.webhooks!.push(entry);
      await admission.replaceMutatingWebhookConfiguration({ name: 'certs-e', body: config });
      await until(
        `entry ${added} to get the caBundle (the resync is an hour away)`,
        async () => ((await caBundles('certs-e')).every((b) => b === bundle) ? true : undefined),
        10_000,
      );
    }
    assert.equal((await caBundles('certs-e')).length, 3);
    assert.deepEqual(
      wh.logs().filter((l) => (l.level as number) >= 40),
      [],
      'no warning: the configuration is listed and watched',
    );
    await wh.stop();
    await admission.deleteMutatingWebhookConfiguration({ name: 'certs-e' });
  });

  test('a missing Secret stops start-up with an error naming the flag', async () => {
    const [port] = await freePorts(1);
    const wh = await startLocalWebhook(cp, {
      kubeconfigPath: cp.kubeconfigPath,
      args: [
        '--port',
        String(port),
        '--cert-secret',
        'absent',
        '--cert-secret-namespace',
        NS,
        '--self-signed-hosts',
        '127.0.0.1',
      ],
      waitListening: false,
    });
    const status = await wh.process.exited;
    assert.equal(status, 2);
    assert.match(wh.process.logTail(5), /--cert-secret: Secret wiw-system\/absent does not exist/);
  });
});
