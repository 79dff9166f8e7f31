// The policy mode's point (issue 32 item 4): with every webhook replica stopped (the parameter
// controller lives in them, so it is stopped too), 500 Pods created for real in identity
// namespaces of the three clouds are all admitted and stored with their identity, from the policy
// and the parameters already written; each stored Pod's env, volumes and mounts are checked
// against `preview`'s for the same input. Then the webhook registered with `failurePolicy: Ignore`
// and nothing answering (mode both, its replicas down) admits the same way, and with `Fail` refuses.
// No kubelet here: 500 Pods is more than one test node starts in reasonable time.
// test/e2e/node-policy.test.ts runs the chart in mode policy on a real node (kube-apiserver
// v1.36.3, kubelet v1.34.4), every replica scaled away: 45 Pods of the three clouds start there
// with their identity, read inside each container, and the SDKs use it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import pino from 'pino';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { createProviders, serviceAccountAnnotations } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { kubeApiOf } from '../../src/kube/connect.ts';
import type { Pod } from '../../src/kube/types.ts';
import { ParametersController } from '../../src/policy-mode/controller.ts';
import { generatedServiceAccount, installPolicyMode, previewOf, type PolicyNamespace } from '../support/policy-mode.ts';

const PODS = 500;
const PER_CLOUD = 8;
const TENANT = '11111111-2222-4333-8444-555555555555';
const providers = createProviders(loadConfig(new Map([['azure-tenant-id', TENANT]]), {}));
const CLOUDS = ['aws', 'azure', 'gcp'] as const;
/** A namespace per cloud, PER_CLOUD ServiceAccounts in each (varied annotations). */
const namespaces: PolicyNamespace[] = CLOUDS.map((cloud) => ({
  name: `fault-${cloud}`,
  cloud,
  // n = 5 names a per-container identity, which the policy does not apply (docs/compatibility.md).
  serviceAccounts: [0, 1, 2, 3, 4, 6, 7, 8].map((n) => generatedServiceAccount(cloud, n)),
  pods: [],
}));

/** The i-th Pod: round robin over the clouds and their ServiceAccounts; every third has an init container. */
function faultPod(i: number): { ns: PolicyNamespace; pod: Pod } {
  const ns = namespaces[i % CLOUDS.length];
  const sa = ns.serviceAccounts[Math.floor(i / CLOUDS.length) % PER_CLOUD].metadata.name;
  const pod: Pod = {
    metadata: { name: `p-${i}`, namespace: ns.name, labels: { fault: 'yes' } },
    spec: { serviceAccountName: sa, containers: [{ name: 'app', image: 'i' }] },
  };
  if (ns.cloud === 'azure') pod.metadata!.labels!['azure.workload.identity/use'] = 'true';
  if (i % 3 === 0) pod.spec!.initContainers = [{ name: 'init', image: 'i' }];
  return { ns, pod };
}

/** What identity a Pod carries: each container's env (name=value) and mounts, and the volumes' names. */
function identityOf(pod: Pod): string[] {
  const all = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  return [
    ...all.flatMap((c) =>
      (c.env ?? []).map((e) => `${c.name} env ${e.name}=${e.valueFrom ? '(from)' : (e.value ?? '')}`),
    ),
    ...all.flatMap((c) => (c.volumeMounts ?? []).map((m) => `${c.name} mount ${m.name}@${m.mountPath}`)),
    ...(pod.spec?.volumes ?? []).filter((v) => !v.name.startsWith('kube-api-access-')).map((v) => `volume ${v.name}`),
  ].sort();
}

/** A loopback port nothing listens on: the webhook's replicas are all gone. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function webhookConfiguration(port: number, failurePolicy: 'Ignore' | 'Fail') {
  return {
    metadata: { name: 'workload-identity-webhook' },
    webhooks: [
      {
        name: 'pods.workload-identity-webhook.io',
        clientConfig: { url: `https://127.0.0.1:${port}/mutate` },
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        failurePolicy,
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        timeoutSeconds: 2,
      },
    ],
  };
}

const same = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);

interface Outcome {
  refused: string[];
  without: string[];
}

/** Creates Pods `from` to `to` for real, ten at a time; each stored Pod beside preview's identity. */
async function createPods(cp: ControlPlane, from: number, to: number): Promise<Outcome> {
  const out: Outcome = { refused: [], without: [] };
  for (let i = from; i < to; i += 10) {
    const batch = Array.from({ length: Math.min(10, to - i) }, (_, k) => faultPod(i + k));
    const created = await Promise.all(
      batch.map(({ ns, pod }) => cp.request('POST', `/api/v1/namespaces/${ns.name}/pods`, pod)),
    );
    created.forEach((r, k) => {
      const { ns, pod } = batch[k];
      const name = `${ns.name}/${pod.metadata!.name}`;
      if (r.status !== 201) {
        out.refused.push(`${name}: ${r.status} ${r.body.slice(0, 200)}`);
        return;
      }
      const expected = previewOf(providers, ns, pod);
      assert.ok(expected.allowed, `preview admits ${name}`);
      const stored = identityOf(JSON.parse(r.body) as Pod);
      const wanted = identityOf(JSON.parse(expected.output) as Pod);
      if (wanted.length < 3 || !same(stored, wanted))
        out.without.push(`${name}: stored ${stored.join('; ')}\n  preview ${wanted.join('; ')}`);
    });
  }
  return out;
}

describe('every webhook replica down', () => {
  let port: number;
  let cp: ControlPlane;

  before(async () => {
    cp = await startControlPlane({ name: 'policy-fault', version: 'newest' });
    await installPolicyMode(cp);
    for (const ns of namespaces) {
      await cp.request('POST', '/api/v1/namespaces', { metadata: { name: ns.name } });
      for (const sa of ns.serviceAccounts)
        await cp.request('POST', `/api/v1/namespaces/${ns.name}/serviceaccounts`, sa);
    }
    // The controller writes the parameters, then goes with the replicas it runs in.
    const controller = new ParametersController({
      api: kubeApiOf(cp.kubeConfig()),
      providers,
      annotations: serviceAccountAnnotations(providers),
      log: pino({ level: 'warn' }),
    });
    await controller.start();
    // The policy sees the parameters through its informer: a first Pod per cloud waits for it (dryRun).
    for (const cloud of CLOUDS.keys())
      await until(`the policy serves ${namespaces[cloud].name}`, async () => {
        const { ns, pod } = faultPod(cloud);
        const r = await cp.request('POST', `/api/v1/namespaces/${ns.name}/pods?dryRun=All`, pod);
        const wanted = identityOf(JSON.parse((previewOf(providers, ns, pod) as { output: string }).output) as Pod);
        return r.status === 201 && same(identityOf(JSON.parse(r.body) as Pod), wanted) ? true : undefined;
      });
    await controller.stop();
    port = await deadPort();
  });
  after(() => cp?.stop());

  test(`mode policy: ${PODS} Pods over the three clouds, none refused, every one stored with its identity`, async () => {
    const { refused, without } = await createPods(cp, 0, PODS);
    const listed = await cp.request('GET', '/api/v1/pods?labelSelector=fault%3Dyes');
    const stored = (JSON.parse(listed.body) as { items: Pod[] }).items.length;
    console.log(
      `mode policy, webhook and controller down: ${PODS - refused.length} of ${PODS} Pods admitted, ` +
        `${PODS - refused.length - without.length} with their identity, ${stored} stored`,
    );
    assert.deepEqual(refused, []);
    assert.deepEqual(without, [], without.slice(0, 3).join('\n'));
    assert.equal(stored, PODS);
  });

  test('mode both, the webhook registered with failurePolicy Ignore and nothing answering: the same', async () => {
    const webhooks = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
    const created = await cp.request('POST', webhooks, webhookConfiguration(port, 'Fail'));
    assert.equal(created.status, 201, created.body);
    const probe = (status: (s: number) => boolean) => async () => {
      const { ns, pod } = faultPod(PODS + 99);
      const r = await cp.request('POST', `/api/v1/namespaces/${ns.name}/pods?dryRun=All`, pod);
      return status(r.status) || undefined;
    };
    // Fail refusing, then Ignore admitting: the registration is in force for what follows.
    await until(
      'the webhook consulted (Fail refuses)',
      probe((s) => s >= 500),
    );
    await kubeApiOf(cp.kubeConfig()).request('PATCH', `${webhooks}/workload-identity-webhook`, {
      contentType: 'application/merge-patch+json',
      body: webhookConfiguration(port, 'Ignore'),
    });
    await until(
      'Ignore in force',
      probe((s) => s === 201),
    );
    const { refused, without } = await createPods(cp, PODS, PODS + 30);
    assert.deepEqual(refused, []);
    assert.deepEqual(without, [], without.slice(0, 3).join('\n'));
  });

  test('the webhook was consulted and is down: with failurePolicy Fail the same Pod is refused', async () => {
    await kubeApiOf(cp.kubeConfig()).request(
      'PATCH',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/workload-identity-webhook',
      { contentType: 'application/merge-patch+json', body: webhookConfiguration(port, 'Fail') },
    );
    const refused = await until('the Fail policy in force', async () => {
      const { ns, pod } = faultPod(PODS + 99);
      const r = await cp.request('POST', `/api/v1/namespaces/${ns.name}/pods?dryRun=All`, pod);
      return r.status >= 500 ? (JSON.parse(r.body) as { message: string }).message : undefined;
    });
    assert.match(refused, /failed calling webhook "pods\.workload-identity-webhook\.io".*connection refused/);
  });
});
