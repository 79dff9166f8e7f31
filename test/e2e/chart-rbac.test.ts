// The Helm chart without a cluster, least privilege: what the webhook and the token requestor
// may read and write in each mode (ServiceAccounts, Secrets, Leases, Namespaces, policies, Pods for
// the slipped-Pod count), the token requestor's namespaces and its ValidatingAdmissionPolicy, and
// the kubeVersion floor below which helm refuses the chart.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadRequestorConfig } from '../../src/token-requestor/config.ts';
import {
  CHART,
  FULLNAME,
  VALUES_MATRIX,
  all,
  containerEnv,
  find,
  renderChart,
  type Manifest,
  webhookDeployment,
} from '../support/chart.ts';

describe('availability, security and least privilege', () => {
  test('the webhook may read ServiceAccounts (and, with tenant policy, Namespaces and policies) and nothing else cluster-wide, in every mode', async () => {
    const POLICY_RESOURCES = new Set(['namespaces', 'workloadidentitypolicies', 'workloadidentitypolicies/status']);
    for (const { values } of VALUES_MATRIX) {
      const { manifests } = await renderChart(values);
      const role = find(manifests, 'ClusterRole', FULLNAME)!;
      assert.deepEqual(role.rules[0], {
        apiGroups: [''],
        resources: ['serviceaccounts'],
        verbs: ['get', 'list', 'watch'],
      });
      const policyOn = Boolean(values.config?.watchPolicies || values.policy?.configMap);
      const rest = role.rules
        .slice(1)
        .filter((r: { resources: string[] }) => !(policyOn && POLICY_RESOURCES.has(r.resources[0])));
      for (const rule of [
        ...rest,
        ...all(manifests, 'Role')
          .filter((r) => r.metadata.name === `${FULLNAME}-certs`)
          .flatMap((r) => r.rules),
      ]) {
        assert.ok(rule.resourceNames?.length === 1, `rule ${JSON.stringify(rule)} is narrowed to one object`);
        // `list` (and `watch`) narrowed by resourceNames is allowed only with the field selector
        // metadata.name=<that name>: it reveals no more than `get`.
        assert.ok(!rule.verbs.includes('create') && !rule.verbs.includes('delete'), `rule ${JSON.stringify(rule)}`);
      }
    }
  });

  test('tokenRequestor.watchScope: cluster adds only a cluster-wide list and watch of Secrets, and the requestor reads it', async () => {
    const name = `${FULLNAME}-token-requestor`;
    const namespaced = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    assert.equal(containerEnv(find(namespaced.manifests, 'Deployment', name)!).WIW_WATCH_SCOPE, 'namespaces');
    assert.equal(find(namespaced.manifests, 'ClusterRoleBinding', `${name}-watch`), undefined);
    const { manifests } = await renderChart({
      tokenRequestor: { enabled: true, namespaces: ['apps', 'platform'], watchScope: 'cluster' },
    });
    const env = containerEnv(find(manifests, 'Deployment', name)!);
    assert.equal(loadRequestorConfig(new Map(), { ...env, WIW_IDENTITY: 'pod-1' }).watchScope, 'cluster');
    assert.deepEqual(find(manifests, 'ClusterRole', `${name}-watch`)!.rules, [
      { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] },
    ]);
    const binding = find(manifests, 'ClusterRoleBinding', `${name}-watch`)!;
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: `${name}-watch`,
    });
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name, namespace: 'wiw-system' }]);
    // Writes stay per namespace: the ClusterRole that may patch is bound only by RoleBindings.
    assert.ok(all(manifests, 'ClusterRoleBinding').every((b) => b.roleRef.name !== name));
    await assert.rejects(
      renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'], watchScope: 'all' } }),
      /tokenRequestor\.watchScope/,
    );
  });

  test('the token requestor has its own ServiceAccount, its rights only in the namespaces it serves, and a Lease by name', async () => {
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps', 'platform'] } });
    const name = `${FULLNAME}-token-requestor`;
    const d = find(manifests, 'Deployment', name)!;
    assert.equal(d.spec.template.spec.serviceAccountName, name);
    assert.equal(containerEnv(d).WIW_NAMESPACES, 'apps,platform');
    assert.ok(find(manifests, 'ServiceAccount', name));
    assert.deepEqual(find(manifests, 'ClusterRole', name)!.rules, [
      { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get'] },
      { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    ]);
    // Never bound cluster-wide: one RoleBinding per served namespace.
    assert.ok(all(manifests, 'ClusterRoleBinding').every((b) => b.roleRef.name !== name));
    const bindings = all(manifests, 'RoleBinding').filter(
      (b) => b.roleRef.kind === 'ClusterRole' && b.roleRef.name === name,
    );
    assert.deepEqual(
      bindings.map((b) => b.metadata.namespace),
      ['apps', 'platform'],
    );
    for (const b of bindings) assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name, namespace: 'wiw-system' }]);
    const lease = find(manifests, 'Role', name)!;
    assert.equal(lease.metadata.namespace, 'wiw-system');
    assert.deepEqual(lease.rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [name], verbs: ['get', 'update'] },
    ]);
    assert.equal(
      find(manifests, 'Lease', name)!.metadata.namespace,
      'wiw-system',
      'the chart creates the Lease: no create permission, and uninstall removes it',
    );
    // The admission policy that limits its identity (proved in token-requestor-privileges.test.ts).
    const policy = find(manifests, 'ValidatingAdmissionPolicy', name)!;
    assert.equal(policy.spec.failurePolicy, 'Fail');
    assert.equal(
      policy.spec.matchConditions[0].expression,
      `request.userInfo.username == "system:serviceaccount:wiw-system:${name}"`,
    );
    const variables = Object.fromEntries(
      policy.spec.variables.map((v: { name: string; expression: string }) => [v.name, v.expression]),
    );
    assert.equal(variables.served, '["apps","platform"]');
    assert.equal(variables.audiences, '["sts.amazonaws.com","api://AzureADTokenExchange"]');
    assert.deepEqual(find(manifests, 'ValidatingAdmissionPolicyBinding', name)!.spec, {
      policyName: name,
      validationActions: ['Deny'],
    });
    // The webhook's own ServiceAccount gets none of that.
    const webhookBindings = [...all(manifests, 'ClusterRoleBinding'), ...all(manifests, 'RoleBinding')].filter(
      (b) => b.subjects[0].name === FULLNAME,
    );
    assert.ok(webhookBindings.every((b) => !b.roleRef.name.includes('token-requestor')));
  });

  test('the token requestor needs its namespaces, each covered by the webhook, and Kubernetes 1.30', async () => {
    await assert.rejects(
      renderChart({ tokenRequestor: { enabled: true } }),
      /tokenRequestor\.namespaces is required: the namespaces whose labelled Secrets the token requestor serves/,
    );
    await assert.rejects(
      renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps', 'kube-system'] } }),
      /tokenRequestor\.namespaces: "kube-system" is excluded from the webhook/,
    );
    await assert.rejects(
      renderChart({ tokenRequestor: { enabled: true, namespaces: ['wiw-system'] } }),
      /"wiw-system" is excluded from the webhook/,
    );
    await assert.rejects(
      renderChart({
        tokenRequestor: { enabled: true, namespaces: ['monitoring'] },
        webhook: { excludeNamespaces: ['monitoring'] },
      }),
      /"monitoring" is excluded from the webhook/,
    );
    await assert.rejects(
      renderChart({
        tokenRequestor: { enabled: true, namespaces: ['addons'] },
        webhook: { systemNamespaces: ['kube-system', 'addons'] },
      }),
      /"addons" is excluded from the webhook/,
    );
    // kube-system never, even when no longer a system namespace.
    await assert.rejects(
      renderChart({
        tokenRequestor: { enabled: true, namespaces: ['kube-system'] },
        webhook: { systemNamespaces: [] },
      }),
      /"kube-system" is excluded from the webhook/,
    );
    await assert.rejects(
      renderChart({ tokenRequestor: { enabled: true, namespaces: ['Apps'] } }),
      /tokenRequestor\.namespaces\.0: Does not match pattern/,
    );
  });

  test('below its kubeVersion floor helm refuses the chart with its own message, whatever the values; at the floor every feature renders', async () => {
    const floor = /^kubeVersion: ">=(\d+\.\d+)\.0-0"$/m.exec(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'))!;
    assert.ok(floor, 'Chart.yaml states a floor');
    const [major, minor] = floor[1].split('.').map(Number);
    const below = `${major}.${minor - 1}.9`;
    for (const values of [{}, { podAnnotationPolicy: { enabled: false } }]) {
      await assert.rejects(
        renderChart(values, { kubeVersion: below }),
        new RegExp(`chart requires kubeVersion: >=${floor[1]}\\.0-0 which is incompatible with Kubernetes v${below}`),
      );
    }
    const { manifests } = await renderChart(
      { tokenRequestor: { enabled: true, namespaces: ['apps'] } },
      { kubeVersion: `${floor[1]}.0` },
    );
    const policies = manifests.filter((m) => m.kind === 'ValidatingAdmissionPolicy').map((m) => m.metadata.name);
    assert.deepEqual(policies.sort(), [`${FULLNAME}-pod-annotations`, `${FULLNAME}-token-requestor`]);
  });

  test("the token requestor's policy mirrors the webhook's namespace selector and the GCP audience setting", async () => {
    const policyOf = async (values: object) =>
      find((await renderChart(values)).manifests, 'ValidatingAdmissionPolicy', `${FULLNAME}-token-requestor`)!;
    const selected = await policyOf({
      tokenRequestor: { enabled: true, namespaces: ['apps'] },
      webhook: {
        excludeNamespaces: ['monitoring'],
        namespaceSelector: {
          matchLabels: { team: 'a' },
          matchExpressions: [
            { key: 'tier', operator: 'In', values: ['prod', 'stage'] },
            { key: 'legacy', operator: 'DoesNotExist' },
          ],
        },
      },
    });
    assert.equal(
      selected.spec.validations[0].expression,
      'namespaceObject.metadata.name in variables.served && !(namespaceObject.metadata.name in ["wiw-system","kube-system","monitoring"]) && ("team" in variables.nsLabels && variables.nsLabels["team"] == "a") && ("tier" in variables.nsLabels && variables.nsLabels["tier"] in ["prod","stage"]) && !("legacy" in variables.nsLabels)',
    );
    assert.match(
      selected.spec.validations[1].expression,
      /workloadIdentityPools/,
      'without config.gcpAudience any workload identity provider is a GCP audience',
    );
    const fixed = await policyOf({
      tokenRequestor: { enabled: true, namespaces: ['apps'] },
      config: { gcpAudience: 'https://gcp.example.com' },
    });
    const variables = Object.fromEntries(
      fixed.spec.variables.map((v: { name: string; expression: string }) => [v.name, v.expression]),
    );
    assert.equal(variables.audiences, '["sts.amazonaws.com","api://AzureADTokenExchange","https://gcp.example.com"]');
    assert.doesNotMatch(fixed.spec.validations[1].expression, /workloadIdentityPools/);
    // Derived keys may change in the requestor's writes only because the Secret webhook rewrites them in the same request.
    const derivedKeys = async (values: object) =>
      (await policyOf(values)).spec.variables.find((v: { name: string }) => v.name === 'derivedKeys').expression;
    assert.match(await derivedKeys({ tokenRequestor: { enabled: true, namespaces: ['apps'] } }), /"credentialsFile"/);
    assert.equal(
      await derivedKeys({
        tokenRequestor: { enabled: true, namespaces: ['apps'] },
        webhook: { secrets: { enabled: false } },
      }),
      '[]',
    );
  });

  test('the count of slipped Pods: list on pods and the Lease Role only when config.slippedPodsIntervalSeconds is on', async () => {
    const rulesOf = (m: Manifest[]) =>
      find(m, 'ClusterRole', FULLNAME)!.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    const off = (await renderChart({})).manifests;
    assert.ok(rulesOf(off).every((r) => !r.resources.includes('pods')));
    assert.equal(find(off, 'Role', `${FULLNAME}-slipped-pods`), undefined);
    const on = (await renderChart({ config: { slippedPodsIntervalSeconds: 600 } })).manifests;
    assert.deepEqual(
      rulesOf(on).filter((r) => r.resources.includes('pods')),
      [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    );
    const role = find(on, 'Role', `${FULLNAME}-slipped-pods`)!;
    assert.equal(role.metadata.namespace, 'wiw-system');
    assert.deepEqual(role.rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['workload-identity-webhook-slipped-pods'],
        verbs: ['get', 'update'],
      },
    ]);
    assert.equal(find(on, 'RoleBinding', `${FULLNAME}-slipped-pods`)!.roleRef.name, `${FULLNAME}-slipped-pods`);
    const env = webhookDeployment(on).spec.template.spec.containers[0].env as { name: string; value: string }[];
    assert.ok(env.some((e) => e.name === 'WIW_SLIPPED_PODS_INTERVAL_SECONDS' && e.value === '600'));
    assert.ok(env.some((e) => e.name === 'WIW_SLIPPED_PODS_LEASE_NAMESPACE' && e.value === 'wiw-system'));
  });

  test('tenant policy: read access to policies and namespaces only when enabled; starter policy and ConfigMap wired', async () => {
    const rulesOf = (m: Manifest[]) =>
      find(m, 'ClusterRole', FULLNAME)!.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    const off = (await renderChart({})).manifests;
    assert.ok(
      rulesOf(off).every(
        (r) =>
          !r.resources.includes('namespaces') && !r.resources.some((x) => x.startsWith('workloadidentitypolicies')),
      ),
    );
    assert.equal(find(off, 'WorkloadIdentityPolicy'), undefined);

    const cluster = (await renderChart({ config: { watchPolicies: true }, policy: { starter: true } })).manifests;
    assert.deepEqual(
      rulesOf(cluster).filter(
        (r) => r.resources[0] !== 'serviceaccounts' && r.resources[0] !== 'mutatingwebhookconfigurations',
      ),
      [
        { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
        {
          apiGroups: ['workload-identity-webhook.io'],
          resources: ['workloadidentitypolicies'],
          verbs: ['get', 'list', 'watch'],
        },
        {
          apiGroups: ['workload-identity-webhook.io'],
          resources: ['workloadidentitypolicies/status'],
          verbs: ['update'],
        },
      ],
    );
    assert.equal(
      find(cluster, 'WorkloadIdentityPolicy', 'namespace-labels')!.apiVersion,
      'workload-identity-webhook.io/v1alpha1',
    );
    const env = webhookDeployment(cluster).spec.template.spec.containers[0].env as { name: string; value: string }[];
    assert.ok(env.some((e) => e.name === 'WIW_WATCH_POLICIES' && e.value === 'true'));

    const fromFile = (await renderChart({ policy: { configMap: 'wiw-policy' } })).manifests;
    assert.ok(rulesOf(fromFile).some((r) => r.resources.includes('namespaces')));
    assert.ok(rulesOf(fromFile).every((r) => !r.resources.includes('workloadidentitypolicies')));
    const pod = webhookDeployment(fromFile).spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'policy').configMap, {
      name: 'wiw-policy',
      items: [{ key: 'policy.yaml', path: 'policy.yaml' }],
    });

    await assert.rejects(renderChart({ policy: { starter: true } }), /policy.starter needs config.watchPolicies=true/);
  });
});
