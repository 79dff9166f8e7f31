// The chart's injection.mode (issue 32): the policy mode's objects, RBAC and flags where asked
// for, no webhook in mode `policy`, and a refusal below Kubernetes 1.36.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { all, containerEnv, find, HelmError, renderChart } from '../support/chart.ts';

const NEWEST = { kubeVersion: '1.36.3' };

describe('injection.mode', () => {
  test('webhook (the default): no policy, no parameters flag', async () => {
    const { manifests } = await renderChart({}, NEWEST);
    assert.equal(find(manifests, 'MutatingAdmissionPolicy'), undefined);
    assert.ok(find(manifests, 'MutatingWebhookConfiguration'));
    const env = containerEnv(find(manifests, 'Deployment')!);
    assert.equal(env.WIW_POLICY_PARAMETERS, undefined);
  });

  for (const mode of ['policy', 'both']) {
    test(`${mode}: the CRD, the policy, its binding (not the release namespace), the flags and RBAC`, async () => {
      const { manifests } = await renderChart(
        { injection: { mode }, webhook: { excludeNamespaces: ['legacy'] } },
        NEWEST,
      );
      assert.ok(find(manifests, 'CustomResourceDefinition', 'workloadidentityparameters.workload-identity-webhook.io'));
      assert.ok(find(manifests, 'MutatingAdmissionPolicy', 'workload-identity-webhook'));
      const binding = find(manifests, 'MutatingAdmissionPolicyBinding', 'workload-identity-webhook')!;
      assert.deepEqual(binding.spec.paramRef, { name: 'workload-identity', parameterNotFoundAction: 'Allow' });
      assert.deepEqual(binding.spec.matchResources.namespaceSelector.matchExpressions[0].values, [
        'wiw-system',
        'legacy',
      ]);
      assert.equal(
        Boolean(find(manifests, 'MutatingWebhookConfiguration')),
        mode === 'both',
        'a webhook only in mode both',
      );
      const env = containerEnv(find(manifests, 'Deployment')!);
      assert.equal(env.WIW_POLICY_PARAMETERS, 'true');
      assert.equal(env.WIW_POLICY_PARAMETERS_LEASE_NAMESPACE, 'wiw-system');
      const rules = all(manifests, 'ClusterRole').flatMap((r) => r.rules ?? []);
      assert.ok(rules.some((r: { resources: string[] }) => r.resources.includes('workloadidentityparameters')));
      assert.ok(
        rules.some(
          (r: { resources: string[]; verbs: string[] }) => r.resources.includes('events') && r.verbs.includes('create'),
        ),
      );
      const lease = all(manifests, 'Role').find((r) => r.metadata.name.endsWith('-policy-parameters'))!;
      assert.ok(
        lease.rules.some((r: { resourceNames?: string[] }) =>
          r.resourceNames?.includes('workload-identity-webhook-policy-parameters'),
        ),
      );
    });
  }

  test('refused below Kubernetes 1.36, with a message', async () => {
    await assert.rejects(
      renderChart({ injection: { mode: 'policy' } }, { kubeVersion: '1.35.2' }),
      (err: Error) =>
        err instanceof HelmError && /injection\.mode=policy needs Kubernetes 1\.36 or later/.test(err.message),
    );
  });
});
