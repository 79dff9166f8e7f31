// The policy mode's point (issue 32 item 4, in its smallest form): the webhook registered with
// `failurePolicy: Ignore` and no replica answering, Pods in an identity namespace are all admitted
// and all carry their identity, from the policy alone.
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
import { installPolicyMode } from '../support/policy-mode.ts';

const PODS = 100;
const ROLE = 'arn:aws:iam::123456789012:role/app';
const providers = createProviders(loadConfig(new Map(), {}));

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

describe('mode both with every webhook replica down', () => {
  let port: number;
  let cp: ControlPlane;
  let controller: ParametersController;

  before(async () => {
    cp = await startControlPlane({ name: 'policy-fault', version: 'newest' });
    await installPolicyMode(cp);
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'team' } });
    await cp.request('POST', '/api/v1/namespaces/team/serviceaccounts', {
      metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE } },
    });
    port = await deadPort();
    const webhook = await cp.request(
      'POST',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      webhookConfiguration(port, 'Ignore'),
    );
    assert.equal(webhook.status, 201, webhook.body);
    controller = new ParametersController({
      api: kubeApiOf(cp.kubeConfig()),
      providers,
      annotations: serviceAccountAnnotations(providers),
      log: pino({ level: 'warn' }),
    });
    await controller.start();
  });
  after(async () => {
    await controller?.stop();
    await cp?.stop();
  });

  test(`${PODS} Pods created while no webhook answers: none refused, every one with its identity`, async () => {
    const pod = (i: number): Pod => ({
      metadata: { name: `p-${i}` },
      spec: { serviceAccountName: 'app', containers: [{ name: 'c', image: 'i' }] },
    });
    // The policy sees the parameters through its informer: the first Pod waits for it (dryRun).
    await until('the policy serves team', async () => {
      const r = await cp.request('POST', '/api/v1/namespaces/team/pods?dryRun=All', pod(0));
      return r.status === 201 && JSON.parse(r.body).spec.volumes?.length ? true : undefined;
    });
    const refused: string[] = [];
    const without: string[] = [];
    for (let i = 0; i < PODS; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, k) => cp.request('POST', '/api/v1/namespaces/team/pods', pod(i + k))),
      );
      for (const r of batch) {
        if (r.status !== 201) refused.push(`${r.status} ${r.body.slice(0, 200)}`);
        else {
          const stored = JSON.parse(r.body) as Pod;
          const env = stored.spec?.containers?.[0].env ?? [];
          if (!env.some((e) => e.name === 'AWS_ROLE_ARN' && e.value === ROLE)) without.push(stored.metadata!.name!);
        }
      }
    }
    console.log(
      `webhook down: ${PODS - refused.length} of ${PODS} Pods admitted, ${PODS - refused.length - without.length} with their identity`,
    );
    assert.deepEqual(refused, []);
    assert.deepEqual(without, []);
  });

  test('the webhook was consulted and is down: with failurePolicy Fail the same Pod is refused', async () => {
    await kubeApiOf(cp.kubeConfig()).request(
      'PATCH',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/workload-identity-webhook',
      { contentType: 'application/merge-patch+json', body: webhookConfiguration(port, 'Fail') },
    );
    const refused = await until('the Fail policy in force', async () => {
      const r = await cp.request('POST', '/api/v1/namespaces/team/pods?dryRun=All', {
        metadata: { name: 'refused' },
        spec: { serviceAccountName: 'app', containers: [{ name: 'c', image: 'i' }] },
      });
      return r.status >= 500 ? (JSON.parse(r.body) as { message: string }).message : undefined;
    });
    assert.match(refused, /failed calling webhook "pods\.workload-identity-webhook\.io".*connection refused/);
  });
});
