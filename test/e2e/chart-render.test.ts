// The Helm chart without a cluster, as helm renders it: lint and template over the matrix of
// values with the webhook's invariants in each render, the Pod webhook's scope and safe defaults,
// the plain manifests in webhook-config/ against the chart, and the policy CRD's schema against
// the code's. The other chart-*.test.ts files check what the values turn into;
// test/e2e/chart-cluster.test.ts takes the renders to an API server.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import { defaultRuleSchemas, identityProviderSchema, identitySchema } from '../../src/policy/schema.ts';
import {
  CHART,
  FULLNAME,
  HelmError,
  VALUES_MATRIX,
  all,
  containerEnv,
  find,
  lintChart,
  plainManifests,
  readPlainManifests,
  renderChart,
  selects,
  type Manifest,
  webhookDeployment,
} from '../support/chart.ts';

const LABELLED_POD_ENTRIES = [
  'pods.workload-identity-webhook.io',
  'azure-pods.workload-identity-webhook.io',
  'namespace-pods.workload-identity-webhook.io',
];
const _schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));

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
