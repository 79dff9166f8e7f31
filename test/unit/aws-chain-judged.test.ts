// Role chaining (issue 31 item 3) as tenant policy and `trust` see it: every role of a chain is
// an identity judged on its own, and `trust` prints each step's trust: the OIDC provider for the
// role that presents the token, the source role (sts:AssumeRole) for each chained one, and the
// source role's permission to assume it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { isDenial } from '../../src/errors.ts';
import type { NamespaceView } from '../../src/kube/types.ts';
import { plan, resolve } from '../../src/mutate/pod.ts';
import { policySet } from '../../src/policy/evaluate.ts';
import { podPolicy, staticPolicyGate } from '../../src/policy/gate.ts';
import { loadPolicyFile } from '../../src/policy/load.ts';
import { cloudModule, providerOptionsFromConfig } from '../../src/clouds/index.ts';
import type { AwsTrust } from '../../src/clouds/aws/trust.ts';
import { identitiesOfServiceAccounts } from '../../src/trust/identities.ts';
import { config, pod, providers, sa } from '../support/builders.ts';
import { AWS_ACCOUNT, oidcProviderArn, OTHER_AWS_ACCOUNT, ROLE_ARN as HUB, roleArn } from '../support/identities.ts';

const TARGET = roleArn('target', OTHER_AWS_ACCOUNT);
const CHAINED = {
  'eks.amazonaws.com/role-arn': HUB,
  'eks.amazonaws.com/role-arns': `target=${TARGET}`,
  'eks.amazonaws.com/source-profiles': 'target=default',
};
const STARTER = new URL('../../charts/workload-identity-webhook/files/policies/namespace-labels.yaml', import.meta.url)
  .pathname;
const account = (id: string) => ({ [`aws-account.workload-identity-webhook.io/${id}`]: 'true' });

/** The admission steps (admission/pods.ts) with the starter policy, for a Pod in namespace team-a. */
function judged(labels: Record<string, string>, annotations: Record<string, string>) {
  const [loaded] = loadPolicyFile(STARTER);
  assert.ok(loaded.ok);
  const ns: NamespaceView = { name: 'team-a', labels };
  const gate = staticPolicyGate(policySet([loaded.policy]), providerOptionsFromConfig(config()), [ns]);
  const admission = { pod: pod(), namespace: 'team-a', serviceAccount: sa(annotations) };
  const resolved = resolve(providers(), admission);
  if (isDenial(resolved)) return resolved;
  const kept = podPolicy(gate, ns)!(admission, resolved);
  return isDenial(kept) ? kept : plan(admission, kept);
}

function trustOf(...accounts: ReturnType<typeof sa>[]): AwsTrust {
  const { identities, problems } = identitiesOfServiceAccounts(providers(), accounts);
  assert.deepEqual(problems, []);
  return cloudModule('aws').trust.report('https://oidc.example.com/c', identities, {
    settings: config(),
    accounts,
  }) as AwsTrust;
}

describe('tenant policy judges every role of a chain', () => {
  test('a chained role in an account the namespace may not use denies the Pod, though the token goes to an allowed one', () => {
    const r = judged(account(AWS_ACCOUNT), CHAINED);
    assert.ok(isDenial(r));
    assert.equal(r.reason, 'PolicyDenied');
    assert.match(r.message, new RegExp(`^namespace team-a may not use AWS account ${OTHER_AWS_ACCOUNT}; `));
    const both = judged({ ...account(AWS_ACCOUNT), ...account(OTHER_AWS_ACCOUNT) }, CHAINED);
    assert.ok(!isDenial(both) && both.allowed, isDenial(both) ? both.message : '');
  });

  test('the source role is judged too: a chain may not start in an account the namespace may not use', () => {
    const r = judged(account(OTHER_AWS_ACCOUNT), CHAINED);
    assert.ok(isDenial(r));
    assert.match(r.message, new RegExp(`^namespace team-a may not use AWS account ${AWS_ACCOUNT}; `));
  });

  test('a chained default (the first listed profile copied) is judged as the role it names', () => {
    const r = judged(account(AWS_ACCOUNT), {
      'eks.amazonaws.com/role-arns': `target=${TARGET},hub=${HUB}`,
      'eks.amazonaws.com/source-profiles': 'target=hub',
    });
    assert.ok(isDenial(r));
    assert.match(r.message, new RegExp(`may not use AWS account ${OTHER_AWS_ACCOUNT}`));
  });
});

describe('trust prints the trust each step of a chain needs', () => {
  test('the first role trusts the OIDC provider; the chained role its source role; the source may assume it', () => {
    const report = trustOf(sa(CHAINED, 'jobs', 'batch'));
    assert.deepEqual(
      report.oidcProviders.map((p) => p.account),
      [AWS_ACCOUNT],
      'no OIDC provider in an account only chained to',
    );
    const [hub, target] = report.roles;
    assert.equal(hub.roleArn, HUB);
    assert.deepEqual(
      hub.trustPolicy.Statement.map((s) => s.Action),
      ['sts:AssumeRoleWithWebIdentity'],
    );
    assert.equal(target.roleArn, TARGET);
    assert.deepEqual(target.trustPolicy, {
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Principal: { AWS: HUB }, Action: 'sts:AssumeRole' }],
    });
    assert.deepEqual(report.rolePermissions, [
      {
        roleArn: HUB,
        roleName: 's3-reader',
        policyName: 'workload-identity-webhook-role-chaining',
        trustedBy: ['ServiceAccount batch/jobs'],
        policy: {
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: TARGET }],
        },
      },
    ]);
    assert.ok(
      report.commands.includes(
        `aws iam put-role-policy --role-name s3-reader --policy-name workload-identity-webhook-role-chaining --policy-document '${JSON.stringify(report.rolePermissions[0].policy)}'`,
      ),
    );
  });

  test('a role reached with the token by one ServiceAccount and chained by another trusts both', () => {
    const direct = sa({ 'eks.amazonaws.com/role-arn': TARGET }, 'direct', 'apps');
    const report = trustOf(sa(CHAINED, 'jobs', 'batch'), direct);
    const target = report.roles.find((r) => r.roleArn === TARGET)!;
    assert.deepEqual(
      target.trustPolicy.Statement.map((s) => [s.Action, s.Principal]),
      [
        ['sts:AssumeRoleWithWebIdentity', { Federated: oidcProviderArn('oidc.example.com/c', OTHER_AWS_ACCOUNT) }],
        ['sts:AssumeRole', { AWS: HUB }],
      ],
    );
    assert.deepEqual(target.trustedBy, ['ServiceAccount batch/jobs', 'ServiceAccount apps/direct']);
  });

  test('a source-profiles the webhook would refuse is left out of trust, named', () => {
    const { problems } = identitiesOfServiceAccounts(providers(), [
      sa({ ...CHAINED, 'eks.amazonaws.com/source-profiles': 'target=target' }, 'jobs', 'batch'),
    ]);
    assert.deepEqual(problems, [
      'ServiceAccount batch/jobs: ServiceAccount batch/jobs annotation eks.amazonaws.com/source-profiles: the chain target → target is a cycle: every chain must end at a profile that assumes its role with the token (one without a source)',
    ]);
  });
});
