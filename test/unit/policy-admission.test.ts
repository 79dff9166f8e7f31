// Golden tests of tenant policy at admission: identity provider matching, defaults flowing into
// the injection, validations and their deny messages, broken policies, and the Secret path.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { admitPod } from '../../src/admission/pods.ts';
import { admitSecret } from '../../src/admission/secrets.ts';
import type { AdmissionRequest } from '../../src/admission/review.ts';
import type { Pod, Secret, ServiceAccountView } from '../../src/kube/types.ts';
import { mutatePod, plan, resolve } from '../../src/mutate/pod.ts';
import type { PodMutation } from '../../src/mutate/pod-plan.ts';
import { isDenial } from '../../src/errors.ts';
import { compilePolicy } from '../../src/policy/compile.ts';
import { policySet } from '../../src/policy/evaluate.ts';
import { judgesOf, podPolicy, staticPolicyGate, type PolicyGate } from '../../src/policy/gate.ts';
import type { NamespaceView } from '../../src/kube/types.ts';
import { loadPolicyFile } from '../../src/policy/load.ts';
import type { CompiledPolicy } from '../../src/policy/model.ts';
import { providerOptionsFromConfig } from '../../src/clouds/index.ts';
import { PolicyStore } from '../../src/policy/store.ts';
import { createAwsProvider } from '../../src/clouds/aws/pod.ts';
import { createAzureProvider } from '../../src/clouds/azure/pod.ts';
import { createGcpProvider } from '../../src/clouds/gcp/pod.ts';
import { createSecretProviders } from '../../src/clouds/index.ts';
import { apply, config, envOf, pod, providers, sa } from '../support/builders.ts';
import { labelledSecret } from '../support/secrets.ts';
import { CLIENT, OTHER_ID as TENANT_B, roleArn, TENANT as TENANT_A } from '../support/identities.ts';

const ARN_A = roleArn('app', '111111111111');
const ARN_B = roleArn('app', '222222222222');
const WIF = (project: string, pool: string) =>
  `projects/${project}/locations/global/workloadIdentityPools/${pool}/providers/cluster-a`;
const STARTER = new URL('../../charts/workload-identity-webhook/files/policies/namespace-labels.yaml', import.meta.url)
  .pathname;

function policy(spec: unknown, name = 'tenants'): CompiledPolicy {
  const r = compilePolicy({ name, generation: 1, source: 'test', spec });
  assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems));
  return r.policy;
}

function gate(
  policies: CompiledPolicy[],
  namespaces: NamespaceView[] = [],
  flags: Record<string, string> = {},
): PolicyGate {
  return staticPolicyGate(policySet(policies), providerOptionsFromConfig(config(flags)), namespaces);
}

/** The core with policy, as admitPod wires it, for a Pod in namespace team-a. */
function run(
  g: PolicyGate,
  annotations: Record<string, string> | undefined,
  p: Pod = pod(),
  flags: Record<string, string> = {},
): PodMutation {
  const ns = g.namespace('team-a');
  assert.ok(!(ns instanceof Promise));
  const judge = podPolicy(g, ns);
  // The admission steps (admission/pods.ts): resolve, judge, plan.
  const admission = { pod: p, namespace: 'team-a', serviceAccount: annotations ? sa(annotations) : undefined };
  const resolved = resolve(providers(flags), admission);
  if (isDenial(resolved)) return { allowed: false, denial: resolved };
  const judged = judge ? judge(admission, resolved) : resolved;
  if (isDenial(judged)) return { allowed: false, denial: judged };
  return plan(admission, judged);
}

function admitted(
  g: PolicyGate,
  annotations: Record<string, string>,
  p: Pod = pod(),
  flags: Record<string, string> = {},
): Pod {
  const r = run(g, annotations, p, flags);
  assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
  return apply(p, r.patch);
}

function refused(
  g: PolicyGate,
  annotations: Record<string, string>,
  p: Pod = pod(),
  flags: Record<string, string> = {},
) {
  const r = run(g, annotations, p, flags);
  assert.equal(r.allowed, false, 'expected a denial');
  return r.allowed ? assert.fail() : r.denial;
}

const token = (p: Pod, volume: string) =>
  p.spec!.volumes!.find((v) => v.name === volume)!.projected!.sources![0].serviceAccountToken!;
const azurePod = () => pod({ labels: { 'azure.workload.identity/use': 'true' } });

const providersSpec = {
  identityProviders: [
    {
      name: 'prod',
      displayName: 'Production',
      aws: {
        accountIds: ['111111111111'],
        region: 'eu-west-1',
        audience: 'sts.prod.example',
        tokenExpirationSeconds: 3600,
      },
    },
    { name: 'gov', displayName: 'GovCloud', aws: { partition: 'aws-us-gov' } },
    {
      name: 'corp',
      displayName: 'Corp Entra',
      azure: { tenantId: TENANT_A, cloud: 'AzureUSGovernmentCloud', tokenExpirationSeconds: 7200 },
    },
    {
      name: 'onprem',
      displayName: 'On-prem pool',
      gcp: { projectNumber: '123456789012', pool: 'on-prem', region: 'europe-west1' },
    },
  ],
};

describe('identity providers', () => {
  const g = gate([policy(providersSpec)]);

  test("an AWS role in a declared account gets that provider's region, audience and token expiry", () => {
    const out = admitted(g, { 'eks.amazonaws.com/role-arn': ARN_A });
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.AWS_REGION, 'eu-west-1');
    assert.equal(env.AWS_DEFAULT_REGION, 'eu-west-1');
    assert.deepEqual(token(out, 'aws-iam-token'), {
      audience: 'sts.prod.example',
      expirationSeconds: 3600,
      path: 'token',
    });
  });

  test("annotations still win over a provider's defaults", () => {
    const out = admitted(g, {
      'eks.amazonaws.com/role-arn': ARN_A,
      'eks.amazonaws.com/audience': 'own',
      'eks.amazonaws.com/token-expiration': '7200',
    });
    assert.deepEqual(token(out, 'aws-iam-token'), { audience: 'own', expirationSeconds: 7200, path: 'token' });
  });

  test('a role in an undeclared account is refused, naming the providers the cluster trusts', () => {
    assert.deepEqual(refused(g, { 'eks.amazonaws.com/role-arn': ARN_B }), {
      reason: 'UntrustedIdentityProvider',
      status: 403,
      message:
        'AWS account 222222222222 (partition aws) of role arn:aws:iam::222222222222:role/app is not an identity provider this cluster trusts: the AWS identity providers declared are "Production" (accounts 111111111111), "GovCloud" (partition aws-us-gov)',
    });
  });

  test('a provider without accounts trusts its whole partition', () => {
    const out = admitted(g, { 'eks.amazonaws.com/role-arn': 'arn:aws-us-gov:iam::333333333333:role/app' });
    assert.equal(envOf(out.spec!.containers![0]).AWS_ROLE_ARN, 'arn:aws-us-gov:iam::333333333333:role/app');
  });

  test('Azure: the only declared tenant is the default, with its cloud and token expiry', () => {
    const out = admitted(g, { 'azure.workload.identity/client-id': CLIENT }, azurePod());
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.AZURE_TENANT_ID, TENANT_A);
    assert.equal(env.AZURE_AUTHORITY_HOST, 'https://login.microsoftonline.us/');
    assert.equal(token(out, 'azure-identity-token').expirationSeconds, 7200);
  });

  test('Azure: a tenant the ServiceAccount names is matched as written (case does not matter) or refused', () => {
    admitted(
      g,
      { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT_A.toUpperCase() },
      azurePod(),
    );
    const d = refused(
      g,
      { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT_B },
      azurePod(),
    );
    assert.equal(
      d.message,
      `Entra tenant ${TENANT_B} is not an identity provider this cluster trusts: the Azure identity providers declared are "Corp Entra" (tenant ${TENANT_A})`,
    );
  });

  test("Azure: a declared authority host replaces the cloud's", () => {
    const custom = gate([
      policy({
        identityProviders: [{ name: 'c', azure: { tenantId: TENANT_A, authorityHost: 'https://login.example.test' } }],
      }),
    ]);
    const out = admitted(custom, { 'azure.workload.identity/client-id': CLIENT }, azurePod());
    assert.equal(envOf(out.spec!.containers![0]).AZURE_AUTHORITY_HOST, 'https://login.example.test/');
  });

  test('GCP: the pool is matched with its project; the same pool id elsewhere is refused', () => {
    const out = admitted(g, { 'cloud.google.com/workload-identity-provider': WIF('123456789012', 'on-prem') });
    assert.equal(envOf(out.spec!.containers![0]).CLOUDSDK_COMPUTE_REGION, 'europe-west1');
    assert.equal(
      refused(g, { 'cloud.google.com/workload-identity-provider': WIF('999999999999', 'on-prem') }).message,
      'workload identity pool on-prem of project 999999999999 is not an identity provider this cluster trusts: the GCP identity providers declared are "On-prem pool" (pool on-prem of project 123456789012)',
    );
  });

  test('a cloud without declared providers is refused once any provider is declared', () => {
    const awsOnly = gate([policy({ identityProviders: [providersSpec.identityProviders[0]] })]);
    assert.match(
      refused(awsOnly, { 'cloud.google.com/workload-identity-provider': WIF('1', 'pool') }).message,
      /: no GCP identity provider is declared$/,
    );
  });

  test('policies that declare no provider leave matching off', () => {
    const none = gate([policy({ validations: [{ name: 'v', expression: 'true' }] })]);
    admitted(none, { 'eks.amazonaws.com/role-arn': ARN_B });
  });

  test('a Pod that requests no identity is not judged at all', () => {
    const r = run(g, {});
    assert.deepEqual(r, { allowed: true, patch: [], injections: [], warnings: [], shadowed: [] });
  });
});

describe('defaults', () => {
  const regionOfNamespace = {
    name: 'region-of-namespace',
    field: 'region',
    expression: "'region' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels.region : null",
  };

  test("a CEL default computes a value from the namespace and beats the provider's and the flag", () => {
    const g = gate(
      [policy({ ...providersSpec, defaults: [regionOfNamespace] })],
      [{ name: 'team-a', labels: { region: 'us-east-2' } }],
    );
    const out = admitted(g, { 'eks.amazonaws.com/role-arn': ARN_A }, pod(), { 'aws-default-region': 'ap-south-1' });
    assert.equal(envOf(out.spec!.containers![0]).AWS_REGION, 'us-east-2');
  });

  test("a default that gives null leaves the provider's value, then the flag", () => {
    const g = gate([policy({ ...providersSpec, defaults: [regionOfNamespace] })]);
    assert.equal(
      envOf(admitted(g, { 'eks.amazonaws.com/role-arn': ARN_A }).spec!.containers![0]).AWS_REGION,
      'eu-west-1',
    );
    const flagOnly = gate([policy({ defaults: [regionOfNamespace] })]);
    const out = admitted(flagOnly, { 'eks.amazonaws.com/role-arn': ARN_A }, pod(), {
      'aws-default-region': 'ap-south-1',
    });
    assert.equal(envOf(out.spec!.containers![0]).AWS_REGION, 'ap-south-1');
  });

  test('a default applies only to the clouds it names', () => {
    const g = gate(
      [policy({ defaults: [{ ...regionOfNamespace, providers: ['gcp'] }] })],
      [{ name: 'team-a', labels: { region: 'europe-west4' } }],
    );
    const out = admitted(g, {
      'eks.amazonaws.com/role-arn': ARN_A,
      'cloud.google.com/workload-identity-provider': WIF('1', 'pool'),
    });
    const env = envOf(out.spec!.containers![0]);
    assert.equal(env.AWS_REGION, undefined);
    assert.equal(env.CLOUDSDK_COMPUTE_REGION, 'europe-west4');
  });

  test('the Azure tenant from a namespace label, as the starter policy does it', () => {
    const [starter] = loadPolicyFile(STARTER);
    assert.ok(starter.ok);
    const g = gate(
      [starter.policy],
      [{ name: 'team-a', labels: { [`azure-tenant.workload-identity-webhook.io/${TENANT_A}`]: 'true' } }],
    );
    const out = admitted(g, { 'azure.workload.identity/client-id': CLIENT }, azurePod());
    assert.equal(envOf(out.spec!.containers![0]).AZURE_TENANT_ID, TENANT_A);
  });

  test('a default that gives an invalid value, or fails, refuses the identity and says which default', () => {
    const bad = gate([policy({ defaults: [{ ...regionOfNamespace, expression: "'Europe'" }] })]);
    assert.deepEqual(refused(bad, { 'eks.amazonaws.com/role-arn': ARN_A }), {
      reason: 'PolicyError',
      status: 403,
      message:
        'default "region-of-namespace" of WorkloadIdentityPolicy "tenants" gave region "Europe", which is not an AWS region (for example eu-west-1)',
    });
    const failing = gate([
      policy({ defaults: [{ ...regionOfNamespace, expression: 'namespaceObject.metadata.labels.region' }] }),
    ]);
    assert.equal(
      refused(failing, { 'eks.amazonaws.com/role-arn': ARN_A }).message,
      'default "region-of-namespace" of WorkloadIdentityPolicy "tenants" could not be evaluated: expression failed: field not found: region',
    );
  });

  test("a token expiry default is held to the cloud's bounds, the same as a static provider default (GCP: an hour at least)", () => {
    const expiry = (expression: string) =>
      gate([policy({ defaults: [{ name: 'expiry', field: 'tokenExpirationSeconds', expression }] })]);
    const gcp = { 'cloud.google.com/workload-identity-provider': WIF('1', 'pool') };
    assert.deepEqual(refused(expiry('1800'), gcp), {
      reason: 'PolicyError',
      status: 403,
      message:
        'default "expiry" of WorkloadIdentityPolicy "tenants" gave tokenExpirationSeconds 1800, which is outside 3600 to 4294967296 seconds for GCP',
    });
    assert.equal(token(admitted(expiry('7200'), gcp), 'gcp-iam-token').expirationSeconds, 7200);
    // AWS takes the API server's own minimum.
    assert.equal(
      token(admitted(expiry('1800'), { 'eks.amazonaws.com/role-arn': ARN_A }), 'aws-iam-token').expirationSeconds,
      1800,
    );
  });

  test('the first policy by name gives a field its value', () => {
    const g = gate([
      policy({ defaults: [{ name: 'x', field: 'region', expression: "'eu-central-1'" }] }, 'b-second'),
      policy({ defaults: [{ name: 'y', field: 'region', expression: "'eu-north-1'" }] }, 'a-first'),
    ]);
    assert.equal(
      envOf(admitted(g, { 'eks.amazonaws.com/role-arn': ARN_A }).spec!.containers![0]).AWS_REGION,
      'eu-north-1',
    );
  });
});

describe('validations', () => {
  const [starterResult] = loadPolicyFile(STARTER);
  assert.ok(starterResult.ok);
  const starter = starterResult.policy;
  const tenantA: NamespaceView = {
    name: 'team-a',
    labels: { 'aws-account.workload-identity-webhook.io/111111111111': 'true' },
  };

  test("tenant-a claiming tenant-b's role is denied with the policy's message", () => {
    const d = refused(gate([starter], [tenantA]), { 'eks.amazonaws.com/role-arn': ARN_B });
    assert.deepEqual(d, {
      reason: 'PolicyDenied',
      status: 403,
      message:
        'namespace team-a may not use AWS account 222222222222; a cluster administrator allows it with the namespace label aws-account.workload-identity-webhook.io/222222222222=true (WorkloadIdentityPolicy "namespace-labels", validation "aws-account-of-namespace")',
    });
  });

  test("the namespace's own role is admitted, and so is the other role once the namespace is labelled for it", () => {
    admitted(gate([starter], [tenantA]), { 'eks.amazonaws.com/role-arn': ARN_A });
    const relabelled = {
      ...tenantA,
      labels: { ...tenantA.labels, 'aws-account.workload-identity-webhook.io/222222222222': 'true' },
    };
    admitted(gate([starter], [relabelled]), { 'eks.amazonaws.com/role-arn': ARN_B });
  });

  test('every identity of a multi-cloud Pod is judged and every refusal reported', () => {
    const d = refused(gate([starter], [tenantA]), {
      'eks.amazonaws.com/role-arn': ARN_B,
      'cloud.google.com/workload-identity-provider': WIF('123456789012', 'on-prem'),
    });
    assert.equal(d.reason, 'PolicyDenied');
    assert.match(
      d.message,
      /^namespace team-a may not use AWS account 222222222222; .*; namespace team-a may not use workload identity pool on-prem of project 123456789012; /,
    );
  });

  test("validations see the identity after defaults and the matched provider's name", () => {
    const g = gate([
      policy({
        ...providersSpec,
        validations: [
          {
            name: 'prod-only-from-prod',
            expression: "identity.identityProvider != 'prod' || namespaceObject.metadata.name.startsWith('prod-')",
            messageExpression:
              "'only prod-* namespaces may use ' + identity.identityProvider + ' (' + identity.audience + ')'",
          },
        ],
      }),
    ]);
    assert.equal(
      refused(g, { 'eks.amazonaws.com/role-arn': ARN_A }).message,
      'only prod-* namespaces may use prod (sts.prod.example) (WorkloadIdentityPolicy "tenants", validation "prod-only-from-prod")',
    );
  });

  test('the object and the ServiceAccount are there to judge', () => {
    const g = gate([
      policy({
        validations: [
          {
            name: 'owner-team',
            expression:
              "'team' in object.metadata.labels && object.metadata.labels.team == serviceAccount.metadata.annotations['eks.amazonaws.com/role-arn'].split('/')[1]",
            message: "the Pod's team label must name its role",
          },
        ],
      }),
    ]);
    admitted(g, { 'eks.amazonaws.com/role-arn': ARN_A }, pod({ labels: { team: 'app' } }));
    assert.equal(
      refused(g, { 'eks.amazonaws.com/role-arn': ARN_A }, pod({ labels: { team: 'web' } })).message,
      'the Pod\'s team label must name its role (WorkloadIdentityPolicy "tenants", validation "owner-team")',
    );
  });

  test('an expression that fails at admission refuses the identity (fail closed)', () => {
    const g = gate([
      policy({ validations: [{ name: 'team', expression: "namespaceObject.metadata.labels.team == 'a'" }] }),
    ]);
    assert.deepEqual(refused(g, { 'eks.amazonaws.com/role-arn': ARN_A }), {
      reason: 'PolicyError',
      status: 403,
      message:
        'WorkloadIdentityPolicy "tenants", validation "team" could not be evaluated, so the identity is refused: expression failed: field not found: team',
    });
  });
});

describe('broken policies', () => {
  test('in deny mode every identity is refused, naming the broken policy; Pods without identities pass', () => {
    const store = new PolicyStore('deny');
    store.put(
      compilePolicy({
        name: 'tenants',
        generation: 4,
        source: 'cluster',
        spec: {
          validations: [{ name: 'v', expression: 'true', examples: [{ name: 'e', expect: { allowed: false } }] }],
        },
      }),
    );
    const g: PolicyGate = {
      current: () => store.current(),
      options: providerOptionsFromConfig(config()),
      namespace: (name) => ({ name, labels: {} }),
    };
    assert.deepEqual(refused(g, { 'eks.amazonaws.com/role-arn': ARN_A }), {
      reason: 'PolicyUnavailable',
      status: 403,
      message:
        'cloud identities are refused until the broken tenant policy is fixed (--policy-failure-mode=deny): WorkloadIdentityPolicy "tenants": spec.validations[0].examples[0]: validation "v", example "e": expected denied, but the expression gave true (allowed)',
    });
    assert.equal(run(g, {}).allowed, true);
  });
});

describe('admission glue', () => {
  const request = (
    object: unknown,
    kind = 'Pod',
    operation: AdmissionRequest['operation'] = 'CREATE',
  ): AdmissionRequest => ({
    uid: 'u',
    kind: { group: '', version: 'v1', kind },
    namespace: 'team-a',
    operation,
    object,
  });
  const starter = (() => {
    const [r] = loadPolicyFile(STARTER);
    assert.ok(r.ok);
    return r.policy;
  })();
  const lookup =
    (annotations: Record<string, string>) =>
    (ns: string, name: string): ServiceAccountView =>
      sa(annotations, name, ns);

  test('admitPod reads the namespace (here on a cache miss, asynchronously) before the core judges', async () => {
    let reads = 0;
    const g: PolicyGate = {
      current: () => policySet([starter]),
      options: providerOptionsFromConfig(config()),
      namespace: async (name) => {
        reads++;
        return { name, labels: {} };
      },
    };
    const d = await admitPod(providers(), lookup({ 'eks.amazonaws.com/role-arn': ARN_A }), request(pod()), judgesOf(g));
    assert.equal(d.allowed, false);
    assert.equal(d.denial?.reason, 'PolicyDenied');
    assert.equal(reads, 1);
  });

  test('a namespace that cannot be read refuses identities, not Pods that request none', async () => {
    const g: PolicyGate = {
      current: () => policySet([starter]),
      options: providerOptionsFromConfig(config()),
      namespace: () =>
        Promise.reject(
          new Error('the labels of namespace team-a are needed for tenant policy but cannot be read: timeout'),
        ),
    };
    const d = await admitPod(providers(), lookup({ 'eks.amazonaws.com/role-arn': ARN_A }), request(pod()), judgesOf(g));
    assert.deepEqual(d, {
      allowed: false,
      denial: {
        reason: 'NamespaceUnavailable',
        status: 403,
        message:
          'the labels of namespace team-a are needed for tenant policy but cannot be read: timeout; the identity is refused rather than judged without them',
      },
    });
    const plain = await admitPod(providers(), lookup({}), request(pod()), judgesOf(g));
    assert.equal(plain.allowed, true);
  });

  test('with no policy in force the namespace is not read and nothing changes', async () => {
    let reads = 0;
    const g: PolicyGate = {
      current: () => policySet([]),
      options: providerOptionsFromConfig(config()),
      namespace: (name) => {
        reads++;
        return { name, labels: {} };
      },
    };
    const d = await admitPod(providers(), lookup({ 'eks.amazonaws.com/role-arn': ARN_B }), request(pod()), judgesOf(g));
    const without = await admitPod(providers(), lookup({ 'eks.amazonaws.com/role-arn': ARN_B }), request(pod()));
    assert.equal(reads, 0);
    assert.ok(d.allowed);
    assert.deepEqual(d, without);
  });

  test("a labelled Secret naming another tenant's role is refused; its own is admitted", async () => {
    const core = { providers: createSecretProviders(config()), defaultTokenPath: config().secretTokenPath };
    const ns: NamespaceView = {
      name: 'team-a',
      labels: { 'aws-account.workload-identity-webhook.io/111111111111': 'true' },
    };
    const g = gate([starter], [ns]);
    const own: Secret = labelledSecret('aws', { config: { roleARN: ARN_A } });
    const other: Secret = labelledSecret('aws', { config: { roleARN: ARN_B } });
    const ok = await admitSecret(core, lookup({}), request(own, 'Secret'), judgesOf(g));
    assert.equal(ok.allowed, true, ok.denial?.message);
    const no = await admitSecret(core, lookup({}), request(other, 'Secret', 'UPDATE'), judgesOf(g));
    assert.equal(no.allowed, false);
    assert.equal(
      no.denial?.message,
      'namespace team-a may not use AWS account 222222222222; a cluster administrator allows it with the namespace label aws-account.workload-identity-webhook.io/222222222222=true (WorkloadIdentityPolicy "namespace-labels", validation "aws-account-of-namespace")',
    );
  });

  test('a Secret is matched to the declared identity providers too', async () => {
    const core = { providers: createSecretProviders(config()), defaultTokenPath: config().secretTokenPath };
    const g = gate([policy(providersSpec)]);
    const no = await admitSecret(
      core,
      lookup({}),
      request(
        labelledSecret('azure', { config: { clientID: CLIENT, tenantID: TENANT_B, subscriptionID: TENANT_A } }),
        'Secret',
      ),
      judgesOf(g),
    );
    assert.equal(no.denial?.reason, 'UntrustedIdentityProvider');
    const yes = await admitSecret(core, lookup({}), request(labelledSecret('gcp'), 'Secret'), judgesOf(g));
    assert.equal(yes.allowed, true, yes.denial?.message);
  });
});

describe('provider options', () => {
  test("the policy's copy of the provider options builds providers that resolve exactly as the configured ones", () => {
    const flags = {
      'aws-default-region': 'eu-west-1',
      'aws-audience': 'a',
      'aws-token-expiration': '3600',
      'aws-sts-regional-endpoints': 'true',
      'aws-annotation-prefix': 'example.com',
      'azure-tenant-id': TENANT_A,
      'azure-cloud': 'china',
      'azure-audience': 'b',
      'azure-token-expiration': '7200',
      'gcp-default-region': 'europe-west1',
      'gcp-audience': 'c',
      'gcp-token-expiration': '7200',
    };
    const o = providerOptionsFromConfig(config(flags));
    const rebuilt = [createAwsProvider(o.aws), createAzureProvider(o.azure), createGcpProvider(o.gcp)];
    const admission = {
      pod: azurePod(),
      namespace: 'team-a',
      serviceAccount: sa({
        'example.com/role-arn': ARN_A,
        'azure.workload.identity/client-id': CLIENT,
        'cloud.google.com/workload-identity-provider': WIF('1', 'pool'),
      }),
    };
    const expected = mutatePod(providers(flags), admission);
    assert.ok(expected.allowed && expected.injections.length === 3);
    assert.deepEqual(mutatePod(rebuilt, admission), expected);
  });
});
