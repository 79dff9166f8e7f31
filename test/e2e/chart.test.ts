// The Helm chart without a cluster: lint and render over a matrix of values, and check what
// was rendered; the chart's values against src/config.ts, its schema and its README; the
// plain manifests against the chart. test/e2e/chart-cluster.test.ts takes the renders to an API server.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { imageEnv, imageNodeOptions } from '../support/cgroup.ts';
import { chartDocs, flagsWithoutValue, readValueKeys, type ValueKey, valuesSchema } from '../../scripts/chart-docs.ts';
import { loadConfig, settings, type Setting } from '../../src/config.ts';
import { IMAGE_REFERENCE } from '../../src/settings.ts';
import { defaultRuleSchemas, identityProviderSchema, identitySchema } from '../../src/policy/schema.ts';
import { loadRequestorConfig, requestorSettings } from '../../src/token-requestor/config.ts';
import {
  CHART,
  HelmError,
  TEST_CA_PEM,
  REPO,
  VALUES_MATRIX,
  all,
  containerEnv,
  find,
  lintChart,
  plainManifests,
  readPlainManifests,
  renderChart,
  renderNotes,
  type Manifest,
} from '../support/chart.ts';

const valuesYaml = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, any>;
const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
const FULLNAME = 'wiw-workload-identity-webhook';
const WEBHOOK_ALERTS = [
  'WorkloadIdentityWebhookErrors',
  'WorkloadIdentityWebhookDenialsRising',
  'WorkloadIdentityWebhookRequestsRejected',
  'WorkloadIdentityWebhookCacheMissReadsFailing',
  'WorkloadIdentityWebhookWatchRestarting',
  'WorkloadIdentityWebhookCertificateExpiring',
  'WorkloadIdentityWebhookSlowAdmissions',
];
const REQUESTOR_ALERTS = ['WorkloadIdentityTokenRequestorFailing', 'WorkloadIdentityTokenRequestorNoLeader'];
const LABELLED_POD_ENTRIES = [
  'pods.workload-identity-webhook.io',
  'azure-pods.workload-identity-webhook.io',
  'namespace-pods.workload-identity-webhook.io',
];

type SettingKey = keyof typeof settings;

/**
 * Settings the chart sets itself, from another value, and the values that drive them.
 * Every other setting must be a key of `config` in values.yaml, or a development-only flag.
 */
const CHART_MANAGED: Partial<
  Record<SettingKey, { values: Record<string, any>; expect: string | RegExp; kubeVersion?: string }>
> = {
  tlsCertFile: {
    values: { certificates: { mode: 'certManager' } },
    expect: '/etc/workload-identity-webhook/tls/tls.crt',
  },
  tlsKeyFile: {
    values: { certificates: { mode: 'provided', provided: { secretName: 's', caBundle: TEST_CA_PEM } } },
    expect: '/etc/workload-identity-webhook/tls/tls.key',
  },
  certSecret: { values: { certificates: { selfManaged: { secretName: 'my-certs' } } }, expect: 'my-certs' },
  certSecretNamespace: { values: {}, expect: 'wiw-system' },
  slippedPodsLeaseNamespace: { values: {}, expect: 'wiw-system' },
  certWebhookConfiguration: { values: {}, expect: FULLNAME },
  selfSignedHosts: {
    values: { clusterDomain: 'corp.local' },
    expect: `${FULLNAME},${FULLNAME}.wiw-system,${FULLNAME}.wiw-system.svc,${FULLNAME}.wiw-system.svc.corp.local`,
  },
  certValiditySeconds: { values: { certificates: { selfManaged: { validitySeconds: 7776000 } } }, expect: '7776000' },
  certRenewBeforeSeconds: {
    values: { certificates: { selfManaged: { renewBeforeSeconds: 2592000 } } },
    expect: '2592000',
  },
  certPropagationSeconds: { values: { certificates: { selfManaged: { propagationSeconds: 30 } } }, expect: '30' },
  certResyncSeconds: { values: { certificates: { selfManaged: { resyncSeconds: 20 } } }, expect: '20' },
  azureEnvironmentFilepath: {
    values: { azureStackEnvironment: { configMap: 'azure-stack' } },
    expect: '/etc/workload-identity-webhook/azure/azurestackcloud.json',
  },
  awsContainerCredentialsConfig: {
    values: { awsPodIdentity: { configMap: 'eks-pod-identity' } },
    expect: '/etc/workload-identity-webhook/pod-identity/associations.json',
  },
  policyFile: {
    values: { policy: { configMap: 'wiw-policy' } },
    expect: '/etc/workload-identity-webhook/policy/policy.yaml',
  },
  failurePolicy: { values: { webhook: { failurePolicy: 'Ignore' } }, expect: 'Ignore' },
  policyParameters: { values: { injection: { mode: 'both' } }, expect: 'true', kubeVersion: '1.36.3' },
  policyParametersLeaseNamespace: {
    values: { injection: { mode: 'policy' } },
    expect: 'wiw-system',
    kubeVersion: '1.36.3',
  },
  clientCaFile: {
    values: { clientAuth: { caBundle: TEST_CA_PEM } },
    expect: '/etc/workload-identity-webhook/client-ca/ca.crt',
  },
};
/**
 * Flags no value sets: development flags with no meaning inside a cluster, and one whose default
 * a cluster wants; extraArgs passes any of them (the chart README's Values section says which).
 */
const WITHOUT_VALUE: Partial<Record<SettingKey, string>> = {
  selfSigned: 'a throwaway CA nobody could put in a caBundle',
  caBundleOut: 'goes with --self-signed',
  kubeconfig: 'the in-cluster ServiceAccount is used',
  kubeContext: 'goes with --kubeconfig',
  recordKeyFile: 'replicas share the key derived from the serving key they read from one Secret (extraArgs can set it)',
  awsEksClusterName: 'read by trust and doctor, run by a person against the cluster, not by serve',
  awsRoleTrustPolicyLength: 'read by trust and doctor, run by a person against the cluster, not by serve',
};

function envName(flag: string): string {
  return 'WIW_' + flag.toUpperCase().replaceAll('-', '_');
}

function configFlagTable(): Record<string, string> {
  const helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8');
  const body = /define "wiw\.configFlags" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)?.[1];
  assert.ok(body, 'wiw.configFlags is defined in _helpers.tpl');
  return parse(body) as Record<string, string>;
}

/** Whether a Kubernetes label selector (matchLabels and matchExpressions) selects these labels. */
function selects(
  selector: {
    matchLabels?: Record<string, string>;
    matchExpressions?: { key: string; operator: string; values?: string[] }[];
  },
  labels: Record<string, string>,
): boolean {
  const labelsMatch = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    labelsMatch &&
    (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      const has = Object.hasOwn(labels, key);
      if (operator === 'In') return has && values.includes(labels[key]);
      if (operator === 'NotIn') return !has || !values.includes(labels[key]);
      if (operator === 'Exists') return has;
      if (operator === 'DoesNotExist') return !has;
      throw new Error(`unknown operator ${operator}`);
    })
  );
}

function webhookDeployment(manifests: Manifest[]): Manifest {
  const d = find(manifests, 'Deployment', FULLNAME);
  assert.ok(d, 'the webhook Deployment is rendered');
  return d;
}

describe('helm lint and helm template over the values matrix', () => {
  for (const { name, values } of VALUES_MATRIX) {
    test(`${name}: lints clean and renders the webhook's invariants`, async () => {
      await lintChart(values);
      const { manifests } = await renderChart(values);
      const mwc = find(manifests, 'MutatingWebhookConfiguration', FULLNAME)!;
      const failurePolicy = values.webhook?.failurePolicy ?? 'Fail';
      const reinvocationPolicy = values.webhook?.reinvocationPolicy ?? 'IfNeeded';
      const secretsOn = values.webhook?.secrets?.enabled ?? true;
      const systemNamespaces: string[] = values.webhook?.systemNamespaces ?? ['kube-system'];
      const podEntries =
        values.webhook?.scope === 'labelled' ? LABELLED_POD_ENTRIES : ['pods.workload-identity-webhook.io'];
      assert.deepEqual(
        mwc.webhooks.map((w: any) => w.name),
        [
          ...podEntries,
          ...(systemNamespaces.length ? ['system-pods.workload-identity-webhook.io'] : []),
          ...(secretsOn
            ? ['secrets.workload-identity-webhook.io', 'gardener-secrets.workload-identity-webhook.io']
            : []),
        ],
      );
      const system = mwc.webhooks.find((w: any) => w.name === 'system-pods.workload-identity-webhook.io');
      if (system) {
        assert.equal(system.failurePolicy, values.webhook?.systemFailurePolicy ?? 'Ignore');
        assert.equal(system.reinvocationPolicy, reinvocationPolicy);
        assert.deepEqual(system.namespaceSelector, {
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: systemNamespaces }],
        });
        const path = `/mutate/${(values.webhook?.systemFailurePolicy ?? 'Ignore').toLowerCase()}`;
        if (values.webhook?.url) assert.deepEqual(system.clientConfig, { url: `${values.webhook.url}${path}` });
        else assert.equal(system.clientConfig.service.path, path);
      }
      for (const w of mwc.webhooks.filter((x: any) => x !== system)) {
        assert.deepEqual(w.admissionReviewVersions, ['v1']);
        assert.equal(w.sideEffects, 'None');
        assert.equal(w.reinvocationPolicy, reinvocationPolicy);
        assert.equal(w.failurePolicy, failurePolicy);
        assert.equal(w.timeoutSeconds, values.webhook?.timeoutSeconds ?? 10);
        const excluded = w.namespaceSelector.matchExpressions[0];
        assert.deepEqual(excluded, {
          key: 'kubernetes.io/metadata.name',
          operator: 'NotIn',
          values: ['wiw-system', ...systemNamespaces, ...(values.webhook?.excludeNamespaces ?? [])],
        });
        if (values.webhook?.url) assert.deepEqual(w.clientConfig, { url: `${values.webhook.url}/mutate` });
        else
          assert.deepEqual(w.clientConfig.service, {
            name: FULLNAME,
            namespace: 'wiw-system',
            path: '/mutate',
            port: 443,
          });
      }
      const byName = (name: string) => mwc.webhooks.find((w: any) => w.name === name);
      for (const pods of [...podEntries, ...(system ? [system.name] : [])].map(byName)) {
        assert.deepEqual(pods.rules, [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' },
        ]);
        assert.deepEqual(pods.objectSelector.matchExpressions.slice(0, 2), [
          { key: 'workload-identity-webhook.io/skip', operator: 'DoesNotExist' },
          { key: 'eks.amazonaws.com/skip-pod-identity-webhook', operator: 'DoesNotExist' },
        ]);
      }
      if (podEntries.length === 1)
        assert.equal(byName(podEntries[0]).objectSelector.matchExpressions.length, 2, 'scope all: every Pod');
      const secrets = byName('secrets.workload-identity-webhook.io');
      const gardener = byName('gardener-secrets.workload-identity-webhook.io');
      if (secretsOn) {
        for (const w of [secrets, gardener]) assert.deepEqual(w.rules[0].operations, ['CREATE', 'UPDATE']);
        assert.deepEqual(secrets.objectSelector, {
          matchExpressions: [{ key: 'workload-identity-webhook.io/provider', operator: 'Exists' }],
        });
        assert.deepEqual(gardener.objectSelector, {
          matchLabels: { 'security.gardener.cloud/purpose': 'workload-identity-token-requestor' },
          matchExpressions: [{ key: 'workloadidentity.security.gardener.cloud/provider', operator: 'Exists' }],
        });
      }
      const requestor = find(manifests, 'Deployment', `${FULLNAME}-token-requestor`);
      assert.equal(requestor !== undefined, values.tokenRequestor?.enabled === true);
      // The webhook's own environment is a configuration the webhook accepts.
      assert.doesNotThrow(() => loadConfig(new Map(), containerEnv(webhookDeployment(manifests))));
    });
  }

  test('kube-system is mutated through its own entry; the release namespace never, even when listed', async () => {
    const { manifests } = await renderChart({
      webhook: {
        systemNamespaces: ['kube-system', 'wiw-system', 'addons'],
        systemFailurePolicy: 'Fail',
        excludeNamespaces: ['addons'],
      },
    });
    const [pods, system] = find(manifests, 'MutatingWebhookConfiguration')!.webhooks;
    assert.equal(system.name, 'system-pods.workload-identity-webhook.io');
    assert.deepEqual(system.namespaceSelector.matchExpressions[0].values, ['kube-system']);
    assert.equal(system.failurePolicy, 'Fail');
    assert.equal(system.clientConfig.service.path, '/mutate/fail');
    assert.deepEqual(pods.namespaceSelector.matchExpressions[0].values, ['wiw-system', 'kube-system', 'addons']);
    const none = find(
      (await renderChart({ webhook: { systemNamespaces: [] } })).manifests,
      'MutatingWebhookConfiguration',
    )!.webhooks;
    assert.ok(!none.some((w: { name: string }) => w.name.startsWith('system-')));
  });

  test('custom namespace selectors are ANDed with the exclusions', async () => {
    const { manifests } = await renderChart(VALUES_MATRIX[3].values);
    const selector = find(manifests, 'MutatingWebhookConfiguration')!.webhooks[0].namespaceSelector;
    assert.deepEqual(selector.matchLabels, { 'identity.example.com/enabled': 'true' });
    assert.deepEqual(selector.matchExpressions.slice(1), [{ key: 'tier', operator: 'NotIn', values: ['sandbox'] }]);
  });
});

describe('certificate modes', () => {
  test('self-managed: an empty Secret, and access to it and to the webhook configuration by name only', async () => {
    const { manifests } = await renderChart({});
    const secret = find(manifests, 'Secret', `${FULLNAME}-certs`)!;
    assert.equal(secret.type, 'Opaque');
    assert.equal(secret.data, undefined, 'the chart creates it empty; the webhook fills it');
    const role = find(manifests, 'Role', `${FULLNAME}-certs`)!;
    assert.deepEqual(role.rules, [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [`${FULLNAME}-certs`],
        verbs: ['get', 'list', 'watch', 'update'],
      },
    ]);
    const clusterRole = find(manifests, 'ClusterRole', FULLNAME)!;
    assert.deepEqual(clusterRole.rules[1], {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['mutatingwebhookconfigurations'],
      resourceNames: [FULLNAME],
      verbs: ['get', 'list', 'watch', 'patch'],
    });
    const mwc = find(manifests, 'MutatingWebhookConfiguration')!;
    assert.ok(
      mwc.webhooks.every((w: any) => w.clientConfig.caBundle === undefined),
      'caBundle left to the webhook (helm upgrade keeps what it patched)',
    );
    assert.equal(webhookDeployment(manifests).spec.template.spec.volumes.length, 1, 'no certificate volume');
  });

  test('cert-manager: a CA, an Issuer for it, a serving Certificate and CA injection; no Secret access', async () => {
    const { manifests } = await renderChart({ certificates: { mode: 'certManager' } });
    const certs = all(manifests, 'Certificate');
    assert.deepEqual(
      certs.map((c) => c.metadata.name),
      [`${FULLNAME}-ca`, `${FULLNAME}-serving`],
    );
    const serving = certs[1];
    assert.equal(serving.spec.secretName, `${FULLNAME}-tls`);
    assert.ok(serving.spec.dnsNames.includes(`${FULLNAME}.wiw-system.svc`));
    assert.deepEqual(serving.spec.issuerRef, { name: `${FULLNAME}-ca`, kind: 'Issuer', group: 'cert-manager.io' });
    assert.equal(
      find(manifests, 'MutatingWebhookConfiguration')!.metadata.annotations!['cert-manager.io/inject-ca-from'],
      `wiw-system/${FULLNAME}-serving`,
    );
    assert.equal(find(manifests, 'Role'), undefined);
    assert.equal(find(manifests, 'ClusterRole')!.rules.length, 1);
    const pod = webhookDeployment(manifests).spec.template.spec;
    assert.deepEqual(pod.volumes[1], { name: 'tls', secret: { secretName: `${FULLNAME}-tls` } });

    const external = await renderChart({
      certificates: { mode: 'certManager', certManager: { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer' } } },
    });
    assert.deepEqual(all(external.manifests, 'Issuer'), []);
    assert.deepEqual(find(external.manifests, 'Certificate')!.spec.issuerRef, {
      name: 'corp-ca',
      kind: 'ClusterIssuer',
    });
  });

  test('provided: the given CA is the caBundle, the given Secret is mounted; missing either fails with the value to set', async () => {
    const { manifests } = await renderChart({
      certificates: { mode: 'provided', provided: { secretName: 'my-tls', caBundle: TEST_CA_PEM } },
    });
    for (const w of find(manifests, 'MutatingWebhookConfiguration')!.webhooks) {
      assert.equal(Buffer.from(w.clientConfig.caBundle, 'base64').toString(), TEST_CA_PEM);
    }
    assert.equal(webhookDeployment(manifests).spec.template.spec.volumes[1].secret.secretName, 'my-tls');
    await assert.rejects(
      renderChart({ certificates: { mode: 'provided', provided: { secretName: 'my-tls' } } }),
      /certificates\.provided\.caBundle/,
    );
    await assert.rejects(
      renderChart({ certificates: { mode: 'provided', provided: { caBundle: TEST_CA_PEM } } }),
      /certificates\.provided\.secretName is required/,
    );
  });
});

describe('availability, security and least privilege', () => {
  test('two replicas spread over zones and nodes, a PodDisruptionBudget, probes, requests and limits', async () => {
    const { manifests } = await renderChart({});
    const d = webhookDeployment(manifests);
    assert.equal(d.spec.replicas, 2);
    assert.equal(d.spec.strategy.rollingUpdate.maxUnavailable, 0);
    const pod = d.spec.template.spec;
    assert.deepEqual(
      pod.topologySpreadConstraints.map((t: any) => t.topologyKey),
      ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    );
    for (const t of pod.topologySpreadConstraints)
      assert.deepEqual(t.labelSelector.matchLabels, d.spec.selector.matchLabels);
    const pdb = find(manifests, 'PodDisruptionBudget')!;
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector, d.spec.selector);
    const c = pod.containers[0];
    assert.equal(c.livenessProbe.httpGet.path, '/healthz');
    assert.equal(c.readinessProbe.httpGet.path, '/readyz');
    assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
    assert.ok(pod.terminationGracePeriodSeconds > valuesYaml.config.drainSeconds);
    // One replica: no PDB that would block every node drain.
    assert.equal(find((await renderChart({ replicaCount: 1 })).manifests, 'PodDisruptionBudget'), undefined);
  });

  test('every container runs under the restricted profile', async () => {
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    const deployments = all(manifests, 'Deployment');
    assert.equal(deployments.length, 2);
    for (const d of deployments) {
      const pod = d.spec.template.spec;
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
      for (const c of pod.containers) {
        assert.equal(c.securityContext.allowPrivilegeEscalation, false);
        assert.equal(c.securityContext.readOnlyRootFilesystem, true);
        assert.deepEqual(c.securityContext.capabilities, { drop: ['ALL'] });
      }
    }
  });

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

  test('EKS Pod Identity: the association ConfigMap is mounted as a folder, so its updates reach the webhook', async () => {
    const pod = webhookDeployment((await renderChart({ awsPodIdentity: { configMap: 'eks-pod-identity' } })).manifests)
      .spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'pod-identity').configMap, {
      name: 'eks-pod-identity',
      items: [{ key: 'associations.json', path: 'associations.json' }],
    });
    const mount = pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'pod-identity');
    assert.deepEqual(mount, {
      name: 'pod-identity',
      mountPath: '/etc/workload-identity-webhook/pod-identity',
      readOnly: true,
    });
    const off = webhookDeployment((await renderChart({})).manifests).spec.template.spec;
    assert.ok(!off.volumes.some((v: { name: string }) => v.name === 'pod-identity'));
  });

  test('the NetworkPolicy is on by default and opens only the webhook port (from anywhere) and metrics (from Pods)', async () => {
    const np = find((await renderChart({})).manifests, 'NetworkPolicy')!;
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    assert.deepEqual(np.spec.ingress, [
      { ports: [{ port: 'https', protocol: 'TCP' }] },
      { ports: [{ port: 'metrics', protocol: 'TCP' }], from: [{ namespaceSelector: {} }] },
    ]);
    assert.equal(
      find((await renderChart({ networkPolicy: { enabled: false } })).manifests, 'NetworkPolicy'),
      undefined,
    );
  });

  test('client authentication: the CA becomes a ConfigMap mounted for --client-ca-file', async () => {
    const { manifests } = await renderChart({ clientAuth: { caBundle: TEST_CA_PEM } });
    const cm = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-client-ca'))!;
    assert.equal(cm.data!['ca.crt'], TEST_CA_PEM);
    const pod = webhookDeployment(manifests).spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'client-ca').configMap, {
      name: cm.metadata.name,
    });
  });

  test('NOTES warn that /mutate is open to any caller unless client auth or a NetworkPolicy source restriction is set', async () => {
    const warning = /WARNING: \/mutate answers any caller[\s\S]*docs\/hardening\.md/;
    const webhookFrom = [{ ipBlock: { cidr: '10.0.0.0/28' } }];
    assert.match(await renderNotes({}), warning, 'defaults');
    assert.match(await renderNotes({ networkPolicy: { enabled: false, webhookFrom } }), warning, 'NetworkPolicy off');
    assert.doesNotMatch(await renderNotes({ clientAuth: { caBundle: TEST_CA_PEM } }), warning, 'client auth');
    assert.doesNotMatch(await renderNotes({ networkPolicy: { webhookFrom } }), warning, 'a source restriction');
    // The rest of the notes are still there.
    assert.match(
      await renderNotes({ networkPolicy: { webhookFrom } }),
      /is installed as wiw-workload-identity-webhook/,
    );
  });

  test("the V8 flags are the image's (NODE_OPTIONS in the Dockerfile) unless nodeOptions replaces them, and its allocator settings stay", async () => {
    const env = async (values: object) =>
      webhookDeployment((await renderChart(values)).manifests).spec.template.spec.containers[0].env.find(
        (e: { name: string }) => e.name === 'NODE_OPTIONS',
      );
    // An empty NODE_OPTIONS in the Pod would erase the image's: none is rendered by default.
    assert.equal(await env({}), undefined);
    // Nor are the image's allocator settings (MALLOC_*: issue 30) replaced: the Pod keeps them.
    const rendered = webhookDeployment((await renderChart({})).manifests).spec.template.spec.containers[0].env ?? [];
    assert.deepEqual(
      rendered.filter((e: { name: string }) => e.name.startsWith('MALLOC_') || e.name === 'GLIBC_TUNABLES'),
      [],
    );
    assert.ok(Object.keys(imageEnv()).includes('MALLOC_ARENA_MAX'), 'the Dockerfile sets the allocator');
    // The one place of the flags is the Dockerfile; docs/hardening.md states its heap share.
    const percent = /--max-old-space-size-percentage=(\d+)/.exec(imageNodeOptions())?.[1];
    assert.ok(percent, 'the Dockerfile sizes the heap');
    assert.match(
      readFileSync(join(REPO, 'docs/hardening.md'), 'utf8'),
      new RegExp(`^\\| heap \\| .* \\| ${percent} % of the container's memory \\|`, 'm'),
    );
    assert.deepEqual(await env({ nodeOptions: '--max-old-space-size-percentage=60 --max-semi-space-size=16' }), {
      name: 'NODE_OPTIONS',
      value: '--max-old-space-size-percentage=60 --max-semi-space-size=16',
    });
  });

  test('optional ServiceMonitor renders only when enabled', async () => {
    const off = (await renderChart({})).manifests;
    assert.equal(find(off, 'ServiceMonitor'), undefined);
    const on = (await renderChart(VALUES_MATRIX.find((m) => m.name.startsWith('everything optional on'))!.values))
      .manifests;
    const sm = find(on, 'ServiceMonitor')!;
    assert.equal(sm.metadata.labels!.release, 'prometheus');
    assert.equal(sm.spec.endpoints[0].port, 'metrics');
    const np = find(on, 'NetworkPolicy')!;
    assert.deepEqual(np.spec.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec.ingress[0].ports, [{ port: 'https', protocol: 'TCP' }]);
  });
});

describe('safe defaults and the scope of the Pod webhook', () => {
  test('both Deployments get priority class system-cluster-critical and a Linux node selector by default', async () => {
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    const deployments = all(manifests, 'Deployment');
    assert.equal(deployments.length, 2);
    for (const d of deployments) {
      assert.equal(d.spec.template.spec.priorityClassName, 'system-cluster-critical', d.metadata.name);
      assert.deepEqual(d.spec.template.spec.nodeSelector, { 'kubernetes.io/os': 'linux' }, d.metadata.name);
    }
    // Helm merges maps: null removes a default key.
    const none = webhookDeployment(
      (await renderChart({ priorityClassName: '', nodeSelector: { 'kubernetes.io/os': null } })).manifests,
    );
    assert.equal(none.spec.template.spec.priorityClassName, undefined);
    assert.equal(none.spec.template.spec.nodeSelector, undefined);
  });

  test('reinvocationPolicy is a value, IfNeeded by default, on every entry', async () => {
    for (const [values, expected] of [
      [{}, 'IfNeeded'],
      [{ webhook: { reinvocationPolicy: 'Never' } }, 'Never'],
      [{ webhook: { reinvocationPolicy: 'Never', scope: 'labelled' } }, 'Never'],
    ] as const) {
      const mwc = find((await renderChart(values)).manifests, 'MutatingWebhookConfiguration')!;
      assert.deepEqual(
        new Set(mwc.webhooks.map((w: { reinvocationPolicy: string }) => w.reinvocationPolicy)),
        new Set([expected]),
      );
    }
  });

  test('scope labelled: a Pod reaches the webhook only through an opt-in label, on itself or its namespace, and once', async () => {
    const mwc = find(
      (await renderChart({ webhook: { scope: 'labelled', namespaceSelector: { matchLabels: { team: 'a' } } } }))
        .manifests,
      'MutatingWebhookConfiguration',
    )!;
    const podEntries = mwc.webhooks.filter((w: any) => LABELLED_POD_ENTRIES.includes(w.name));
    assert.equal(podEntries.length, 3);
    const INJECT = 'workload-identity-webhook.io/inject';
    const AZURE = 'azure.workload.identity/use';
    // Every combination of the opt-in labels on a Pod and on its namespace.
    const labelSets: Record<string, string>[] = [
      {},
      { [INJECT]: 'true' },
      { [INJECT]: 'false' },
      { [AZURE]: 'true' },
      { [INJECT]: 'true', [AZURE]: 'true' },
    ];
    for (const podLabels of labelSets) {
      for (const nsLabels of [{}, { [INJECT]: 'true' }, { [INJECT]: 'yes' }] as Record<string, string>[]) {
        const namespace: Record<string, string> = { 'kubernetes.io/metadata.name': 'apps', team: 'a', ...nsLabels };
        const reached = podEntries.filter(
          (w: any) => selects(w.namespaceSelector, namespace) && selects(w.objectSelector, podLabels),
        );
        const optedIn = podLabels[INJECT] === 'true' || podLabels[AZURE] === 'true' || nsLabels[INJECT] === 'true';
        assert.equal(
          reached.length,
          optedIn ? 1 : 0,
          `Pod ${JSON.stringify(podLabels)} in namespace ${JSON.stringify(nsLabels)}`,
        );
        // The extra namespaceSelector terms still apply to every entry.
        const otherTeam = { ...namespace, team: 'b' };
        assert.ok(podEntries.every((w: any) => !selects(w.namespaceSelector, otherTeam)));
      }
    }
    // Opted out, or in an excluded namespace: never, whatever the opt-in labels say.
    const skipped = { 'workload-identity-webhook.io/skip': '', [INJECT]: 'true' };
    assert.ok(podEntries.every((w: any) => !selects(w.objectSelector, skipped)));
    const own = { 'kubernetes.io/metadata.name': 'wiw-system', team: 'a', [INJECT]: 'true' };
    assert.ok(podEntries.every((w: any) => !selects(w.namespaceSelector, own)));
    // Labelled Secrets and the system entry are chosen as with scope all.
    const all = find((await renderChart({})).manifests, 'MutatingWebhookConfiguration')!;
    const others = (m: Manifest) =>
      m.webhooks.filter((w: any) => !LABELLED_POD_ENTRIES.includes(w.name)).map((w: any) => [w.name, w.objectSelector]);
    const plain = find(
      (await renderChart({ webhook: { scope: 'labelled' } })).manifests,
      'MutatingWebhookConfiguration',
    )!;
    assert.deepEqual(others(plain), others(all));
  });

  test('the schema refuses an unknown scope or reinvocation policy', async () => {
    for (const [values, message] of [
      [{ webhook: { scope: 'some' } }, /scope must be one of/],
      [{ webhook: { reinvocationPolicy: 'Always' } }, /reinvocationPolicy must be one of/],
    ] as const)
      await assert.rejects(renderChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stderr));
  });
});

describe('metrics, alerts and the dashboard', () => {
  const RUNBOOK = 'https://docs.example.com/observability.md';

  test("the token requestor's metrics: a Service over its replicas, and a ServiceMonitor with the webhook's", async () => {
    const values = { tokenRequestor: { enabled: true, namespaces: ['apps'] }, serviceMonitor: { enabled: true } };
    const { manifests } = await renderChart(values);
    const name = `${FULLNAME}-token-requestor`;
    const service = find(manifests, 'Service', name)!;
    const deployment = find(manifests, 'Deployment', name)!;
    assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
    assert.deepEqual(service.spec.ports, [{ name: 'metrics', port: 9090, targetPort: 'metrics', protocol: 'TCP' }]);
    assert.equal(deployment.spec.template.spec.containers[0].ports[0].name, 'metrics');
    const monitors = all(manifests, 'ServiceMonitor');
    assert.deepEqual(
      monitors.map((m) => m.metadata.name),
      [FULLNAME, name],
    );
    // Each ServiceMonitor selects its own Service, and only that one.
    for (const [monitor, svc] of [
      [monitors[0], find(manifests, 'Service', FULLNAME)!],
      [monitors[1], service],
    ]) {
      const matches = all(manifests, 'Service').filter((s) =>
        Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => s.metadata.labels?.[k] === v),
      );
      assert.deepEqual(
        matches.map((s) => s.metadata.name),
        [svc.metadata.name],
      );
    }
    const off = (await renderChart({ ...values, metrics: { enabled: false }, serviceMonitor: { enabled: false } }))
      .manifests;
    assert.equal(find(off, 'Service', name), undefined);
    assert.deepEqual(
      all((await renderChart({ tokenRequestor: values.tokenRequestor })).manifests, 'ServiceMonitor'),
      [],
    );
  });

  test('the PrometheusRule is opt-in; its thresholds, selector and labels come from the values', async () => {
    assert.equal(find((await renderChart({})).manifests, 'PrometheusRule'), undefined);
    const rule = find(
      (
        await renderChart({
          prometheusRule: {
            enabled: true,
            runbookUrl: RUNBOOK,
            labels: { release: 'prometheus' },
            alertLabels: { team: 'platform' },
            denialRatio: 0.25,
            certificateExpiryDays: 30,
            latencyTimeoutRatio: 0.8,
          },
          webhook: { timeoutSeconds: 5 },
        })
      ).manifests,
      'PrometheusRule',
    )!;
    assert.equal(rule.metadata.labels!.release, 'prometheus');
    const rules = rule.spec.groups[0].rules as {
      alert: string;
      expr: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
    }[];
    const byName = Object.fromEntries(rules.map((r) => [r.alert, r]));
    assert.deepEqual(Object.keys(byName), WEBHOOK_ALERTS, 'without the token requestor, none of its alerts');
    assert.match(byName.WorkloadIdentityWebhookDenialsRising.expr, />\s*0\.25$/);
    assert.match(byName.WorkloadIdentityWebhookCertificateExpiring.expr, /< 2592000$/);
    assert.match(byName.WorkloadIdentityWebhookSlowAdmissions.expr, /> 4$/, '0.8 of the 5 s timeout');
    for (const r of rules) {
      assert.match(r.expr, /namespace="wiw-system"/, `${r.alert} selects the release's namespace`);
      assert.equal(r.labels.team, 'platform');
      assert.match(r.labels.severity, /^(warning|critical)$/);
      assert.equal(r.annotations.runbook_url, `${RUNBOOK}#${r.alert.toLowerCase()}`);
    }
    const custom = find(
      (
        await renderChart({
          prometheusRule: { enabled: true, runbookUrl: RUNBOOK, selector: 'job="identity"' },
          tokenRequestor: { enabled: true, namespaces: ['apps'] },
        })
      ).manifests,
      'PrometheusRule',
    )!;
    const customRules = custom.spec.groups[0].rules as { alert: string; expr: string }[];
    assert.deepEqual(
      customRules.map((r) => r.alert),
      [...WEBHOOK_ALERTS, ...REQUESTOR_ALERTS],
    );
    for (const r of customRules) {
      assert.match(r.expr, /\{job="identity"[,}]/, r.alert);
      assert.doesNotMatch(r.expr, /namespace=/, r.alert);
    }
  });

  test("without runbookUrl the alerts link to docs/observability.md of the chart's source at this version", async () => {
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { sources?: string[]; appVersion: string };
    const render = renderChart({ prometheusRule: { enabled: true } });
    if (!chart.sources?.length) {
      await assert.rejects(render, /prometheusRule\.runbookUrl is required: Chart\.yaml names no source repository/);
      return;
    }
    const rule = find((await render).manifests, 'PrometheusRule')!;
    assert.equal(
      rule.spec.groups[0].rules[0].annotations.runbook_url,
      `${chart.sources[0].replace(/\/$/, '')}/blob/v${chart.appVersion}/docs/observability.md#workloadidentitywebhookerrors`,
    );
  });

  test("the dashboard is opt-in, in a ConfigMap with the Grafana sidecar's label, exactly the file", async () => {
    assert.equal(find((await renderChart({})).manifests, 'ConfigMap', `${FULLNAME}-dashboard`), undefined);
    const file = readFileSync(join(CHART, 'files/dashboards/workload-identity-webhook.json'), 'utf8');
    const cm = find(
      (await renderChart({ grafanaDashboard: { enabled: true } })).manifests,
      'ConfigMap',
      `${FULLNAME}-dashboard`,
    )!;
    assert.equal(cm.metadata.labels!.grafana_dashboard, '1');
    assert.equal(cm.metadata.namespace, 'wiw-system');
    assert.equal(cm.data['workload-identity-webhook.json'], file.trim());
    assert.equal(JSON.parse(cm.data['workload-identity-webhook.json']).uid, 'workload-identity-webhook');
    const elsewhere = find(
      (
        await renderChart({
          grafanaDashboard: {
            enabled: true,
            label: 'dashboards',
            labelValue: 'identity',
            annotations: { grafana_folder: 'Identity' },
            namespace: 'monitoring',
          },
        })
      ).manifests,
      'ConfigMap',
      `${FULLNAME}-dashboard`,
    )!;
    assert.equal(elsewhere.metadata.namespace, 'monitoring');
    assert.equal(elsewhere.metadata.labels!.dashboards, 'identity');
    assert.equal(
      elsewhere.metadata.labels!.grafana_dashboard,
      undefined,
      'the default label is replaced, not added to',
    );
    assert.deepEqual(elsewhere.metadata.annotations, { grafana_folder: 'Identity' });
  });
});

describe('values cover the webhook', () => {
  test('every setting in src/config.ts is a chart value, set by the chart, or one the README names as without a value', () => {
    const table = configFlagTable();
    const configKeys = Object.keys(valuesYaml.config).sort();
    assert.deepEqual(
      Object.keys(table).sort(),
      configKeys,
      'wiw.configFlags and values.yaml config have the same keys',
    );
    for (const key of Object.keys(settings) as SettingKey[]) {
      const homes = [key in table, key in CHART_MANAGED, key in WITHOUT_VALUE].filter(Boolean).length;
      assert.equal(
        homes,
        1,
        `setting ${key} (--${settings[key].flag}) must be exactly one of: config.${key} in values.yaml, chart-managed, without a value`,
      );
      if (key in table) assert.equal(table[key], settings[key].flag, `config.${key} maps to --${settings[key].flag}`);
    }
    for (const key of configKeys) assert.ok(key in settings, `config.${key} is a setting of src/config.ts`);
    // The README's list (generated) is exactly these: the chart-managed ones are found in the templates.
    assert.deepEqual(
      flagsWithoutValue().sort(),
      (Object.keys(WITHOUT_VALUE) as SettingKey[]).map((k) => settings[k].flag).sort(),
    );
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8');
    for (const flag of flagsWithoutValue()) assert.match(readme, new RegExp(`no value sets .*\`--${flag}\``));
    assert.doesNotMatch(readme, /every flag of the webhook has a value/);
  });

  test("values.yaml config defaults are the webhook's defaults", () => {
    for (const [key, value] of Object.entries(valuesYaml.config)) {
      const setting = (settings as Record<string, Setting<unknown>>)[key];
      // A file mode is written as an octal string in YAML; the webhook holds the number.
      const read =
        typeof setting.default === 'number' && typeof value === 'string' ? setting.parse(value, setting.flag) : value;
      assert.deepEqual(read === '' ? undefined : read, setting.default, `config.${key}`);
    }
  });

  test('each config value reaches the container as its WIW_ variable, and the webhook reads it back', async () => {
    const values = {
      config: {
        port: 9443,
        metricsPort: 9191,
        drainSeconds: 7,
        logLevel: 'debug',
        logFormat: 'named',
        cacheMissTimeoutMs: 3000,
        cacheMissRate: 20,
        slippedPodsIntervalSeconds: 300,
        strict: true,
        awsAnnotationPrefix: 'iam.example.com',
        awsDefaultRegion: 'eu-west-1',
        awsAudience: 'aud',
        awsTokenExpiration: 7200,
        awsStsRegionalEndpoints: true,
        awsRoleSessionName: 'pod-name',
        awsComposeRoleArn: true,
        awsComposeRoleArnAccount: '111122223333',
        awsComposeRoleArnPartition: 'aws-us-gov',
        awsContainerCredentialsAudience: 'pods.example.com',
        awsContainerCredentialsFullUri: 'http://169.254.170.23/v2/credentials',
        awsContainerCredentialsTokenMountPath: '/var/run/pod-identity',
        awsContainerCredentialsTokenVolumeName: 'pod-identity-token',
        awsContainerCredentialsTokenPath: 'token',
        azureTenantId: 'contoso.onmicrosoft.com',
        azureCloud: 'AzureChinaCloud',
        azureAudience: 'api://x',
        azureTokenExpiration: 7200,
        azureProxyImage: 'registry.example/azwi/proxy:v1',
        azureProxyInitImage: 'registry.example/azwi/proxy-init:v1',
        azureProxyNativeSidecar: false,
        azureProxyLogLevel: 'debug',
        gcpDefaultRegion: 'europe-west1',
        gcpAudience: 'gcp-aud',
        gcpTokenExpiration: 7200,
        gcpGcloudImage: 'registry.example/cloud-sdk:1',
        gcpFileMode: '0400',
        gcpSetupContainerResources: '{"requests":{"cpu":"100m"}}',
        gcpDefaultInjectionMode: 'direct',
        gcpDirectGcloud: true,
        host: '0.0.0.0',
        metricsHost: '127.0.0.1',
        metricsNamespaceLabel: false,
        gcpAllowedTokenUrls: ['https://sts.googleapis.com/v1/token', 'https://sts.example.com/v1/token'],
        secretTokenPath: '/var/run/identity/token',
        watchPolicies: true,
        policyFailureMode: 'keep-last-good',
        tlsMinVersion: 'TLSv1.3',
        tlsCipherSuites: ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384'],
        maxRequestBytes: 8388608,
        maxInflightRequestBytes: 67108864,
        maxContainers: 100,
        maxPatchBytes: 2097152,
        maxConnections: 1000,
        maxConnectionsPerSource: 200,
        firstRequestTimeoutMs: 3000,
        proxySources: ['10.8.0.0/14', '192.168.7.1'],
        http2: false,
        maxConcurrentStreams: 64,
        maxConnectionAgeSeconds: 120,
      },
    };
    const table = configFlagTable();
    assert.deepEqual(Object.keys(values.config).sort(), Object.keys(table).sort(), 'this test sets every config key');
    const env = containerEnv(webhookDeployment((await renderChart(values)).manifests));
    for (const [key, value] of Object.entries(values.config))
      assert.equal(env[envName(table[key])], String(value), `config.${key}`); // arrays join with commas
    const config = loadConfig(new Map(), env);
    const asRead: Record<string, unknown> = {
      gcpFileMode: 0o400,
      gcpSetupContainerResources: { requests: { cpu: '100m' } },
      awsRoleSessionName: { podName: true },
    };
    for (const [key, value] of Object.entries(values.config))
      assert.deepEqual(
        (config as Record<string, unknown>)[key],
        key in asRead ? asRead[key] : value,
        `config.${key} read back`,
      );
  });

  for (const [key, { values, expect, kubeVersion }] of Object.entries(CHART_MANAGED)) {
    test(`chart-managed --${settings[key as SettingKey].flag} is rendered from its value`, async () => {
      const env = containerEnv(webhookDeployment((await renderChart(values, { kubeVersion })).manifests));
      const actual = env[envName(settings[key as SettingKey].flag)];
      if (expect instanceof RegExp) assert.match(actual, expect);
      else assert.equal(actual, expect);
    });
  }

  test('every token-requestor setting is a tokenRequestor.config value or set by the chart, and it reads them back', async () => {
    const helpers = readFileSync(join(CHART, 'templates/_helpers.tpl'), 'utf8');
    const table = parse(
      /define "wiw\.tokenRequestorFlags" -\}\}\n([\s\S]*?)\{\{- end \}\}/.exec(helpers)![1],
    ) as Record<string, string>;
    const chartManaged = {
      leaseNamespace: 'WIW_LEASE_NAMESPACE',
      leaseName: 'WIW_LEASE_NAME',
      identity: 'WIW_IDENTITY (the Pod name)',
      namespaces: 'WIW_NAMESPACES (tokenRequestor.namespaces)',
      watchScope: 'WIW_WATCH_SCOPE (tokenRequestor.watchScope: its RBAC follows it)',
    };
    assert.deepEqual(Object.keys(table).sort(), Object.keys(valuesYaml.tokenRequestor.config).sort());
    for (const [key, s] of Object.entries(requestorSettings)) {
      assert.equal(
        [key in table, key in chartManaged].filter(Boolean).length,
        1,
        `token-requestor setting ${key} (--${s.flag}) has one home in the chart`,
      );
      if (key in table) {
        assert.equal(table[key], s.flag);
        assert.equal(valuesYaml.tokenRequestor.config[key], s.default, `tokenRequestor.config.${key} default`);
      }
    }
    const { manifests } = await renderChart({
      tokenRequestor: {
        enabled: true,
        namespaces: ['apps', 'batch'],
        leaseName: 'wi-lease',
        config: { leaseDurationSeconds: 20, tokenExpiration: 7200 },
      },
    });
    const d = find(manifests, 'Deployment', `${FULLNAME}-token-requestor`)!;
    const env = containerEnv(d);
    const identity = d.spec.template.spec.containers[0].env.find((e: any) => e.name === 'WIW_IDENTITY');
    assert.deepEqual(identity.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
    const rc = loadRequestorConfig(new Map(), { ...env, WIW_IDENTITY: 'pod-1' });
    assert.deepEqual(rc, {
      leaseNamespace: 'wiw-system',
      leaseName: 'wi-lease',
      leaseDurationSeconds: 20,
      identity: 'pod-1',
      namespaces: ['apps', 'batch'],
      watchScope: 'namespaces',
      tokenExpiration: 7200,
    });
    assert.doesNotThrow(() => loadConfig(new Map(), env), 'the shared settings it reads are valid too');
    assert.deepEqual(find(manifests, 'Role', `${FULLNAME}-token-requestor`)!.rules[0].resourceNames, ['wi-lease']);
    assert.ok(find(manifests, 'Lease', 'wi-lease'));
  });

  test('the container port and the probes follow config.port', async () => {
    const c = webhookDeployment((await renderChart({ config: { port: 9443 } })).manifests).spec.template.spec
      .containers[0];
    assert.equal(c.ports[0].containerPort, 9443);
    assert.equal(c.livenessProbe.httpGet.port, 'https');
  });
});

describe('values.schema.json and README', () => {
  function leaves(obj: Record<string, any>, prefix = ''): string[] {
    return Object.entries(obj).flatMap(([k, v]) => {
      const path = prefix ? `${prefix}.${k}` : k;
      const isMapOfSettings = v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0;
      return isMapOfSettings ? leaves(v, path) : [path];
    });
  }
  const keys = readValueKeys(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
  const everyKey = (ks: ValueKey[]): ValueKey[] => ks.flatMap((k) => [k, ...everyKey(k.children)]);

  test('values.schema.json and the README table are what values.yaml generates (npm run chart-docs)', () => {
    const generated = chartDocs();
    assert.equal(readFileSync(join(CHART, 'values.schema.json'), 'utf8'), generated.schema, 'npm run chart-docs');
    assert.equal(readFileSync(join(CHART, 'README.md'), 'utf8'), generated.readme, 'npm run chart-docs');
  });

  test('the schema has every value of values.yaml, each with a description', () => {
    const all = everyKey(keys);
    assert.ok(all.length > 200, `${all.length} values`);
    for (const key of all) {
      let node = schema;
      for (const part of key.path) node = node.properties?.[part];
      assert.ok(node, `values.schema.json has ${key.path.join('.')}`);
      assert.ok(node.description?.length > 3, `${key.path.join('.')} has a description`);
    }
  });

  test('a value without a comment is refused by the generator, naming it', () => {
    const text = '# The image.\nimage:\n  # The repository.\n  repository: x\n  tag: ""\n';
    assert.throws(() => valuesSchema(readValueKeys(text)), /values\.yaml: image\.tag has no comment/);
    // A key the line reader cannot see (a flow map) is refused rather than left undescribed.
    assert.throws(() => readValueKeys('# A map.\nimage: {repository: x}\n'), /image\.repository was not read/);
  });

  test('helm checks values against the schema: a wrong type fails lint and template with the schema message', async () => {
    for (const [values, message] of [
      [{ replicaCount: 'two' }, /replicaCount: Invalid type\. Expected: integer, given: string/],
      [{ config: { strict: 'sometimes' } }, /config\.strict: Invalid type\. Expected: boolean, given: string/],
      [{ extraArgs: '--strict' }, /extraArgs: Invalid type\. Expected: array, given: string/],
      [{ tokenRequestor: { podDisruptionBudget: { enabeld: true } } }, /Additional property enabeld is not allowed/],
    ] as const) {
      await assert.rejects(renderChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stderr));
      await assert.rejects(lintChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stdout));
    }
  });

  test('the schema refuses bad values before anything renders', async () => {
    for (const [values, message] of [
      [{ webhook: { failurePolicy: 'Sometimes' } }, /failurePolicy must be one of/],
      [{ webhook: { timeoutSeconds: 31 } }, /timeoutSeconds/],
      [{ certificates: { mode: 'vault' } }, /certificates.mode must be one of/],
      [{ config: { nope: 1 } }, /Additional property nope is not allowed/],
      [{ config: { awsDefaultRegion: 'EU_WEST_1' } }, /awsDefaultRegion/], // what --aws-default-region refuses
    ] as const) {
      await assert.rejects(renderChart(values), (err: unknown) => err instanceof HelmError && message.test(err.stderr));
    }
  });

  test('the injected images take a digest; the schema refuses what is no image reference, as the flags do', async () => {
    const pinned = `registry.example/azwi/proxy:v1.6.0@sha256:${'0123456789abcdef'.repeat(4)}`;
    const env = containerEnv(webhookDeployment((await renderChart({ config: { azureProxyImage: pinned } })).manifests));
    assert.equal(env.WIW_AZURE_PROXY_IMAGE, pinned);
    for (const key of ['azureProxyImage', 'azureProxyInitImage', 'gcpGcloudImage']) {
      assert.equal(schema.properties.config.properties[key].pattern, IMAGE_REFERENCE.source, key);
      await assert.rejects(
        renderChart({ config: { [key]: 'gcr.io/x:stable; rm -rf /' } }),
        (err: unknown) => err instanceof HelmError && new RegExp(key).test(err.stderr),
      );
    }
  });

  test('the chart README has a row for every value', () => {
    const readme = readFileSync(join(CHART, 'README.md'), 'utf8').split('## Values')[1];
    const rows = new Set([...readme.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]));
    for (const path of leaves(valuesYaml)) assert.ok(rows.has(path), `README.md documents ${path}`);
    for (const row of rows) assert.ok(leaves(valuesYaml).includes(row), `README.md row ${row} is a value`);
  });

  test("a config value is described by its flag, and by the flag's help where values.yaml says nothing more", () => {
    assert.match(schema.properties.config.properties.awsAudience.description, /^`--aws-audience`: /);
    assert.ok(
      schema.properties.config.properties.awsAudience.description.endsWith(`${settings.awsAudience.description}.`),
    );
    assert.match(schema.properties.config.properties.port.description, /^`--port`: HTTPS port/);
  });
});

describe("extra containers settings, the token requestor's availability, the icon and helm test", () => {
  test('extraArgs, extraEnv, extraVolumes and extraVolumeMounts reach the webhook container: --record-key-file can be set', async () => {
    const mount = '/etc/workload-identity-webhook/record-key';
    const { manifests } = await renderChart({
      extraArgs: [`--record-key-file=${mount}/key`, '--log-level=debug'],
      extraEnv: [{ name: 'TZ', value: 'UTC' }],
      extraVolumes: [{ name: 'record-key', secret: { secretName: 'wiw-record-key' } }],
      extraVolumeMounts: [{ name: 'record-key', mountPath: mount, readOnly: true }],
    });
    const pod = webhookDeployment(manifests).spec.template.spec;
    const c = pod.containers[0];
    assert.deepEqual(c.args, ['serve', `--record-key-file=${mount}/key`, '--log-level=debug']);
    assert.equal(containerEnv(webhookDeployment(manifests)).TZ, 'UTC');
    assert.ok(
      c.env.some((e: { name: string }) => e.name === 'WIW_LOG_LEVEL'),
      "config's variables stay",
    );
    assert.deepEqual(pod.volumes.at(-1), { name: 'record-key', secret: { secretName: 'wiw-record-key' } });
    assert.deepEqual(c.volumeMounts.at(-1), { name: 'record-key', mountPath: mount, readOnly: true });
    // The flags parse as serve's own, and win over the environment config sets.
    const { parseArgs } = await import('../../src/cli-args.ts');
    const parsed = parseArgs(c.args);
    const config = loadConfig(parsed.flags, containerEnv(webhookDeployment(manifests)));
    assert.equal(config.recordKeyFile, `${mount}/key`);
    assert.equal(config.logLevel, 'debug');
    // Without them, the container is as before.
    const plain = webhookDeployment((await renderChart({})).manifests).spec.template.spec;
    assert.deepEqual(plain.containers[0].args, ['serve']);
    assert.ok(!plain.volumes.some((v: { name: string }) => v.name === 'record-key'));
  });

  test('the token requestor gets a PodDisruptionBudget, a NetworkPolicy that opens only metrics, and topology spread', async () => {
    const name = `${FULLNAME}-token-requestor`;
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    const d = find(manifests, 'Deployment', name)!;
    const selector = d.spec.selector.matchLabels;
    const pdb = find(manifests, 'PodDisruptionBudget', name)!;
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, selector);
    const np = find(manifests, 'NetworkPolicy', name)!;
    assert.deepEqual(np.spec.podSelector.matchLabels, selector);
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    assert.deepEqual(np.spec.ingress, [
      { ports: [{ port: 'metrics', protocol: 'TCP' }], from: [{ namespaceSelector: {} }] },
    ]);
    const spread = d.spec.template.spec.topologySpreadConstraints;
    assert.deepEqual(
      spread.map((t: any) => t.topologyKey),
      ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    );
    for (const t of spread) assert.deepEqual(t.labelSelector.matchLabels, selector);
    // The webhook's PodDisruptionBudget and NetworkPolicy still select only the webhook's Pods.
    assert.notDeepEqual(find(manifests, 'PodDisruptionBudget', FULLNAME)!.spec.selector.matchLabels, selector);

    const custom = (
      await renderChart({
        tokenRequestor: {
          enabled: true,
          namespaces: ['apps'],
          replicaCount: 1,
          networkPolicy: { metricsFrom: [], egress: [{ ports: [{ port: 443 }] }] },
          topologySpreadConstraints: [
            { maxSkew: 2, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
          ],
        },
      })
    ).manifests;
    assert.equal(find(custom, 'PodDisruptionBudget', name), undefined, 'one replica: no PDB to block drains');
    const closed = find(custom, 'NetworkPolicy', name)!;
    assert.deepEqual(closed.spec.policyTypes, ['Ingress', 'Egress']);
    assert.equal(closed.spec.ingress, null, 'no metricsFrom: every ingress closed');
    assert.deepEqual(closed.spec.egress, [{ ports: [{ port: 443 }] }]);
    const one = find(custom, 'Deployment', name)!.spec.template.spec.topologySpreadConstraints;
    assert.deepEqual(one, [
      {
        maxSkew: 2,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'DoNotSchedule',
        labelSelector: { matchLabels: selector },
      },
    ]);
    const off = (
      await renderChart({
        tokenRequestor: {
          enabled: true,
          namespaces: ['apps'],
          networkPolicy: { enabled: false },
          podDisruptionBudget: { enabled: false },
        },
      })
    ).manifests;
    assert.equal(find(off, 'NetworkPolicy', name), undefined);
    assert.equal(find(off, 'PodDisruptionBudget', name), undefined);
  });

  test("Chart.yaml's icon is the repository's raw URL of an SVG that exists in the repository", () => {
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { icon: string; home: string };
    const repo = /^https:\/\/github\.com\/([^/]+\/[^/]+)$/.exec(chart.home)![1];
    const m = new RegExp(`^https://raw\\.githubusercontent\\.com/${repo}/main/(.+\\.svg)$`).exec(chart.icon);
    assert.ok(m, `icon ${chart.icon} is a raw URL of ${repo}`);
    const svg = readFileSync(join(REPO, m[1]), 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 128 128"/);
    assert.ok(svg.length < 4096, 'a small icon');
  });

  test('helm test: a Pod with no API access, of a ServiceAccount of its own that asks for an AWS role, in tests.namespace', async () => {
    const rendered = await renderChart(
      { webhook: { scope: 'labelled' }, tests: { namespace: 'apps' } },
      { tests: true },
    );
    const tests = rendered.manifests.filter((m) => m.metadata.annotations?.['helm.sh/hook'] === 'test');
    assert.deepEqual(
      tests.map((m) => m.kind),
      ['ServiceAccount', 'Pod'],
    );
    const [sa, pod] = tests;
    for (const m of tests) assert.equal(m.metadata.namespace, 'apps');
    assert.equal(sa.automountServiceAccountToken, false);
    assert.match(sa.metadata.annotations!['eks.amazonaws.com/role-arn'], /^arn:aws:iam::111122223333:role\//);
    // No RBAC binds it: the test reads only what the webhook injected.
    for (const b of [...all(rendered.manifests, 'RoleBinding'), ...all(rendered.manifests, 'ClusterRoleBinding')])
      assert.ok(!b.subjects.some((s: { name: string }) => s.name === sa.metadata.name));
    assert.equal(pod.spec.serviceAccountName, sa.metadata.name);
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.equal(pod.spec.restartPolicy, 'Never');
    assert.equal(pod.metadata.labels!['workload-identity-webhook.io/inject'], 'true', 'scope labelled sends it');
    const c = pod.spec.containers[0];
    assert.equal(c.image, webhookDeployment(rendered.manifests).spec.template.spec.containers[0].image);
    assert.deepEqual(c.securityContext.capabilities, { drop: ['ALL'] });
    assert.deepEqual(c.args, [
      sa.metadata.annotations!['eks.amazonaws.com/role-arn'],
      'sts.amazonaws.com',
      `system:serviceaccount:apps:${sa.metadata.name}`,
    ]);
    // Default: the namespace `default`; an install (helm template --skip-tests) has no test objects.
    const defaults = await renderChart({}, { tests: true });
    assert.ok(defaults.manifests.some((m) => m.kind === 'Pod' && m.metadata.namespace === 'default'));
    assert.ok(!(await renderChart({})).manifests.some((m) => m.kind === 'Pod'));
  });

  test('NOTES name the helm test command and the namespace its Pod runs in', async () => {
    assert.match(await renderNotes({}), /helm test wiw -n wiw-system +\(a Pod in namespace default /);
    assert.match(await renderNotes({ tests: { namespace: 'apps' } }), /\(a Pod in namespace apps /);
  });

  test("the test Pod's check passes only with the role, audience and subject injected", async () => {
    const { manifests } = await renderChart({}, { tests: true });
    const c = manifests.find((m) => m.kind === 'Pod')!.spec.containers[0];
    const [role, audience, subject] = c.args as string[];
    const dir = await mkdtemp(join(tmpdir(), 'wiw-helm-test-'));
    const jwt = (claims: object) =>
      ['{"alg":"RS256"}', JSON.stringify(claims), 'sig'].map((p) => Buffer.from(p).toString('base64url')).join('.');
    const run = async (env: Record<string, string>, token?: object) => {
      if (token) await writeFile(join(dir, 'token'), jwt(token));
      const r = await promisify(execFile)(process.execPath, ['-e', c.command[2], ...c.args], {
        env: { PATH: process.env.PATH, ...env },
      }).then(
        (out) => ({ code: 0, stdout: out.stdout }),
        (err) => ({ code: err.code as number, stdout: err.stdout as string }),
      );
      return r;
    };
    try {
      const injected = { AWS_ROLE_ARN: role, AWS_WEB_IDENTITY_TOKEN_FILE: join(dir, 'token') };
      const good = await run(injected, { aud: [audience], sub: subject });
      assert.equal(good.code, 0, good.stdout);
      assert.match(good.stdout, /^ok: /);
      const none = await run({});
      assert.equal(none.code, 1);
      assert.match(none.stdout, /FAIL AWS_ROLE_ARN is undefined/);
      assert.match(none.stdout, /FAIL AWS_WEB_IDENTITY_TOKEN_FILE is not set/);
      const other = await run(injected, { aud: ['sts.example'], sub: 'system:serviceaccount:x:y' });
      assert.equal(other.code, 1);
      assert.match(other.stdout, /audience is \["sts\.example"\]/);
      assert.match(other.stdout, /subject is "system:serviceaccount:x:y"/);
      assert.doesNotMatch(other.stdout + good.stdout, /eyJ/, 'the token is never printed');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('plain manifests', () => {
  test('webhook-config/ is exactly what the chart renders with its defaults', async () => {
    const expected = await plainManifests();
    const actual = await readPlainManifests();
    assert.deepEqual(
      [...actual.keys()].sort(),
      [...expected.keys()].sort(),
      'the same files (regenerate: node test/support/chart.ts write-plain-manifests)',
    );
    for (const [name, text] of expected)
      assert.equal(
        actual.get(name),
        text,
        `webhook-config/${name} is current (regenerate: node test/support/chart.ts write-plain-manifests)`,
      );
  });
});

describe('the WorkloadIdentityPolicy CRD', () => {
  const crd = parse(
    readFileSync(join(CHART, 'crds/workloadidentitypolicies.workload-identity-webhook.io.yaml'), 'utf8'),
  ) as Record<string, any>;
  const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties;

  test("each cloud's identity provider schema is the one generated from its policy part and facts", () => {
    assert.deepEqual(spec.identityProviders.items, identityProviderSchema());
  });

  test("the examples' identity has every field a policy sees, and the defaults' enums name every field and cloud", () => {
    assert.deepEqual(spec.validations.items.properties.examples.items.properties.identity, identitySchema());
    assert.deepEqual(spec.defaults.items.properties.examples.items.properties.identity, identitySchema());
    const { field, providers } = defaultRuleSchemas();
    assert.deepEqual(spec.defaults.items.properties.field, field);
    assert.deepEqual(spec.defaults.items.properties.providers, providers);
  });
});
