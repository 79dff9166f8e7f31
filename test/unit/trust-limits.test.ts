// The clouds' documented limits as `trust` and `doctor` count them (clouds/<cloud>/facts.ts), at,
// below and above each, and the split printed for an identity over one; and the EKS Pod Identity
// associations read from the associations file and the pod-identity-role-arn annotation.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AWS_ROLE_TRUST_POLICY_LENGTH } from '../../src/clouds/aws/facts.ts';
import { type AwsTrust, trustPolicyLength } from '../../src/clouds/aws/trust.ts';
import { AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY } from '../../src/clouds/azure/facts.ts';
import type { AzureTrust } from '../../src/clouds/azure/trust.ts';
import { GCP_PROVIDER_LIMITS } from '../../src/clouds/gcp/facts.ts';
import type { GcpTrust } from '../../src/clouds/gcp/trust.ts';
import { partNames, splitToFit } from '../../src/clouds/trust-split.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { identitiesOfServiceAccounts } from '../../src/trust/identities.ts';
import { type TrustReport, trustChecks, trustFailed, trustReport, trustText } from '../../src/trust/report.ts';
import { config, providers, sa } from '../support/builders.ts';
import { CLIENT, ROLE_ARN, roleArn, WIF_PROVIDER } from '../support/identities.ts';

const ISSUER = 'https://oidc.example.com/cluster-a';

function report(accounts: ServiceAccountView[], flags: Record<string, string> = {}): TrustReport {
  const { identities, problems } = identitiesOfServiceAccounts(providers(flags), accounts);
  assert.deepEqual(problems, []);
  return trustReport(ISSUER, identities, { settings: config(flags), accounts });
}

const awsSa = (ns: string, name: string, role = ROLE_ARN) => sa({ 'eks.amazonaws.com/role-arn': role }, name, ns);

describe('splitToFit and partNames', () => {
  test("a group's members stay in one part when the group fits one; a group over a part is split member by member", () => {
    const members = ['a1', 'a2', 'b1', 'b2', 'b3', 'c1', 'd1', 'd2', 'd3', 'd4', 'd5'];
    const parts = splitToFit(
      members,
      (m) => m[0],
      (p) => p.length <= 4,
    );
    assert.deepEqual(parts, [['a1', 'a2'], ['b1', 'b2', 'b3', 'c1'], ['d1', 'd2', 'd3', 'd4'], ['d5']]);
    assert.deepEqual(parts.flat(), members, 'every member once, in order');
    assert.deepEqual(
      splitToFit(
        ['x'],
        (m) => m,
        () => false,
      ),
      [['x']],
      'one that fits nowhere gets its own part',
    );
    assert.deepEqual(
      splitToFit(
        [],
        (m: string) => m,
        () => true,
      ),
      [],
    );
  });

  test('the first part keeps the name, the others get -2, -3..., cut to the limit', () => {
    assert.deepEqual(partNames('reader', 3, 64), ['reader', 'reader-2', 'reader-3']);
    const long = 'r'.repeat(64);
    assert.deepEqual(partNames(long, 2, 64), [long, `${'r'.repeat(62)}-2`]);
  });
});

describe("AWS: a role's trust policy against IAM's quota", () => {
  /** ServiceAccounts of one role whose trust policy is exactly `length` characters. */
  function accountsOfLength(length: number): ServiceAccountView[] {
    const accounts = Array.from({ length: 42 }, (_, n) => awsSa(`team-${n % 3}`, `app-${n}`));
    const base = trustPolicyLength((report(accounts).aws as AwsTrust).roles[0].trustPolicy);
    const pad = length - base;
    assert.ok(pad >= 0 && pad < 200, `${pad} characters to add`);
    accounts[0] = awsSa('team-0', `app-0${'x'.repeat(pad)}`);
    return accounts;
  }

  test('at the quota: one role, its command; one character over: a FAIL with a split whose every role fits', () => {
    const limit = AWS_ROLE_TRUST_POLICY_LENGTH.default;
    for (const length of [limit - 1, limit]) {
      const r = report(accountsOfLength(length));
      const role = (r.aws as AwsTrust).roles[0];
      assert.equal(trustPolicyLength(role.trustPolicy), length);
      assert.equal(role.overLimit, undefined, `${length} characters fit`);
      assert.equal(trustFailed(r), false);
      assert.ok((r.aws as AwsTrust).commands.some((c) => c.startsWith('aws iam update-assume-role-policy')));
    }
    const accounts = accountsOfLength(limit + 1);
    const r = report(accounts);
    const role = (r.aws as AwsTrust).roles[0];
    assert.equal(role.overLimit?.length, limit + 1);
    assert.equal(role.overLimit?.limit, limit);
    assert.equal(trustFailed(r), true);
    assert.deepEqual(
      r.findings?.map((f) => [f.cloud, f.check, f.verdict, f.subject]),
      [['aws', 'cloud-limits', 'fail', `role ${ROLE_ARN}`]],
    );
    const split = role.overLimit!.split;
    assert.deepEqual(
      split.map((p) => p.roleArn),
      [ROLE_ARN, roleArn('s3-reader-2')],
    );
    for (const p of split) assert.ok(trustPolicyLength(p.trustPolicy) <= limit, `${p.roleName} fits`);
    assert.deepEqual(
      split.flatMap((p) => p.trustedBy).sort(),
      accounts.map((a) => `ServiceAccount ${a.namespace}/${a.name}`).sort(),
      'every ServiceAccount in exactly one part',
    );
    // A namespace's ServiceAccounts on one role.
    for (const ns of ['team-0', 'team-1', 'team-2'])
      assert.equal(split.filter((p) => p.trustedBy.some((s) => s.includes(` ${ns}/`))).length, 1, ns);
    // No command for the role IAM would refuse; the split only as comments.
    const commands = (r.aws as AwsTrust).commands.filter((c) => !c.startsWith('#'));
    assert.ok(!commands.some((c) => c.includes('update-assume-role-policy')), commands.join('\n'));
    assert.match(trustText(r), /^# FAIL aws role .*over IAM's quota of 2048/m);
    assert.match(trustText(r), /^# {3}aws iam create-role --role-name s3-reader-2 /m);
  });

  test('--aws-role-trust-policy-length: the raised quota (up to 8192) is the limit', () => {
    const accounts = accountsOfLength(AWS_ROLE_TRUST_POLICY_LENGTH.default + 1);
    assert.equal(
      (report(accounts, { 'aws-role-trust-policy-length': '8192' }).aws as AwsTrust).roles[0].overLimit,
      undefined,
    );
    assert.throws(() => config({ 'aws-role-trust-policy-length': '8193' }), /out of range; expected 2048 to 8192/);
    assert.throws(() => config({ 'aws-role-trust-policy-length': '2047' }), /out of range; expected 2048 to 8192/);
  });
});

describe("Azure: federated identity credentials per identity against Entra's 20", () => {
  const azureSa = (ns: string, name: string) => sa({ 'azure.workload.identity/client-id': CLIENT }, name, ns);
  const accounts = (count: number, namespaces: number) =>
    Array.from({ length: count }, (_, n) => azureSa(`ns-${n % namespaces}`, `app-${n}`));
  const limit = AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY;

  test('19 and 20 get their commands; 21 is a FAIL with a split that keeps namespaces together', () => {
    for (const count of [limit - 1, limit]) {
      const r = report(accounts(count, 3));
      const identity = (r.azure as AzureTrust).identities[0];
      assert.equal(identity.federatedCredentials.length, count);
      assert.equal(identity.overLimit, undefined);
      assert.equal(
        (r.azure as AzureTrust).commands.filter((c) => c.startsWith('az identity federated-credential create')).length,
        count,
      );
    }
    const r = report(accounts(limit + 1, 3));
    const identity = (r.azure as AzureTrust).identities[0];
    assert.equal(identity.overLimit?.count, limit + 1);
    assert.equal(trustFailed(r), true);
    assert.deepEqual(
      identity.overLimit!.split.map((p) => p.federatedCredentials.length),
      [14, 7],
      'namespaces of 7: two on the first identity, the third on a new one',
    );
    assert.ok(!(r.azure as AzureTrust).commands.some((c) => !c.startsWith('#')), 'no command for it');
    assert.match(
      trustText(r),
      /^# FAIL azure client id .*21 federated identity credentials, over Entra's limit of 20/m,
    );
  });

  test('one namespace of 25: 20 and 5', () => {
    const identity = (report(accounts(25, 1)).azure as AzureTrust).identities[0];
    assert.deepEqual(
      identity.overLimit!.split.map((p) => p.federatedCredentials.length),
      [20, 5],
    );
  });
});

describe("Google: a provider's audiences and google.subject", () => {
  const gcpSa = (ns: string, name: string, audience: string) =>
    sa(
      { 'cloud.google.com/workload-identity-provider': WIF_PROVIDER, 'cloud.google.com/audience': audience },
      name,
      ns,
    );

  test('10 audiences on one provider pass; 11 are a FAIL split into providers of at most 10', () => {
    const limit = GCP_PROVIDER_LIMITS.allowedAudiences;
    for (const count of [limit - 1, limit]) {
      const ok = report(Array.from({ length: count }, (_, n) => gcpSa('apps', `a${n}`, `aud-${n}`)));
      assert.equal((ok.gcp as GcpTrust).providers[0].allowedAudiences.length, count);
      assert.equal((ok.gcp as GcpTrust).providers[0].overLimit, undefined);
      assert.ok((ok.gcp as GcpTrust).commands.some((c) => c.includes(' create-oidc ')));
      assert.equal(trustFailed(ok), false);
    }
    const over = report(Array.from({ length: limit + 1 }, (_, n) => gcpSa('apps', `a${n}`, `aud-${n}`)));
    const provider = (over.gcp as GcpTrust).providers[0];
    assert.deepEqual(
      provider.overLimit?.split.map((p) => [p.provider, p.allowedAudiences.length]),
      [
        ['cluster-a', 10],
        ['cluster-a-2', 1],
      ],
    );
    assert.deepEqual(provider.overLimit?.split[1].trustedBy, ['ServiceAccount apps/a10']);
    assert.ok(!(over.gcp as GcpTrust).commands.some((c) => c.includes('create-oidc')));
    assert.equal(trustFailed(over), true);
  });

  test('a subject of 127 bytes is trusted; 128 bytes is a FAIL and gets no binding', () => {
    // system:serviceaccount:a:<name> is 24 bytes and the name.
    const limit = GCP_PROVIDER_LIMITS.subjectBytes;
    for (const bytes of [limit - 1, limit]) {
      const at = report([gcpSa('a', 'n'.repeat(bytes - 24), 'sts.googleapis.com')]);
      assert.deepEqual((at.gcp as GcpTrust).subjectsOverLimit, []);
      assert.equal((at.gcp as GcpTrust).directAccess.length, 1, `${bytes} bytes`);
    }
    const over = report([gcpSa('a', 'n'.repeat(limit - 23), 'sts.googleapis.com')]);
    assert.deepEqual(
      (over.gcp as GcpTrust).subjectsOverLimit.map((s) => s.bytes),
      [limit + 1],
    );
    assert.equal((over.gcp as GcpTrust).directAccess.length, 0);
    assert.match(trustText(over), /^# FAIL gcp ServiceAccount a\/n+: its subject .* is 128 bytes, over the 127/m);
  });
});

describe('EKS Pod Identity associations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-pia-'));
  const PI_ROLE = roleArn('pod-identity');
  const file = (identities: object[]) => {
    const path = join(dir, `a${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(path, JSON.stringify({ identities }));
    return path;
  };
  const annotated = (ns: string, name: string, role = PI_ROLE) =>
    sa({ 'eks.amazonaws.com/pod-identity-role-arn': role }, name, ns);

  test('the file and the annotations: one create-pod-identity-association each, with the cluster name', () => {
    const flags = {
      'aws-container-credentials-config': file([
        { namespace: 'apps', serviceAccount: 'in-file', roleArn: PI_ROLE },
        { namespace: 'apps', serviceAccount: 'both' },
        { namespace: 'apps', serviceAccount: 'no-role' },
      ]),
      'aws-eks-cluster-name': 'prod_1',
    };
    const r = report([annotated('apps', 'both'), sa({}, 'in-file', 'apps')], flags);
    const aws = r.aws as AwsTrust;
    assert.deepEqual(
      aws.podIdentityAssociations.map((a) => [a.serviceAccount, a.roleArn, a.from.join('+')]),
      [
        ['in-file', PI_ROLE, 'file'],
        ['both', PI_ROLE, 'file+annotation'],
        ['no-role', undefined, 'file'],
      ],
    );
    assert.deepEqual(
      aws.commands.filter((c) => !c.startsWith('#')),
      ['in-file', 'both'].map(
        (name) =>
          `aws eks create-pod-identity-association --cluster-name prod_1 --namespace apps --service-account ${name} --role-arn ${PI_ROLE}`,
      ),
    );
    assert.equal(trustFailed(r), false);
    assert.deepEqual(
      trustChecks(ISSUER, [], { settings: config(flags), accounts: [annotated('apps', 'both')] }).map((c) => [
        c.check,
        c.verdict,
      ]),
      [['pod-identity-associations', 'pass']],
    );
  });

  test("--namespace: only that namespace's entries of the file", () => {
    const flags = {
      'aws-container-credentials-config': file([
        { namespace: 'apps', serviceAccount: 'one', roleArn: PI_ROLE },
        { namespace: 'other', serviceAccount: 'two', roleArn: PI_ROLE },
      ]),
    };
    const { identities } = identitiesOfServiceAccounts(providers(flags), []);
    const r = trustReport(ISSUER, identities, { settings: config(flags), accounts: [], namespace: 'apps' });
    assert.deepEqual(
      (r.aws as AwsTrust).podIdentityAssociations.map((a) => a.serviceAccount),
      ['one'],
    );
  });

  test('without --aws-eks-cluster-name the command reads "$EKS_CLUSTER_NAME"', () => {
    const r = report([annotated('apps', 'one')], {
      'aws-container-credentials-config': file([{ namespace: 'apps', serviceAccount: 'one' }]),
    });
    assert.deepEqual(
      (r.aws as AwsTrust).commands.filter((c) => !c.startsWith('#')),
      [
        `aws eks create-pod-identity-association --cluster-name "$EKS_CLUSTER_NAME" --namespace apps --service-account one --role-arn ${PI_ROLE}`,
      ],
    );
  });

  test('annotated but not in the file, no file at all, or another role than the file names: a FAIL each', () => {
    const other = roleArn('other');
    const flags = {
      'aws-container-credentials-config': file([{ namespace: 'apps', serviceAccount: 'conflict', roleArn: other }]),
    };
    const r = report([annotated('apps', 'missing'), annotated('apps', 'conflict')], flags);
    assert.deepEqual(
      r.findings?.map((f) => [f.subject, f.verdict, f.message.replace(/ \(.*$|: .*$/, '')]),
      [
        ['ServiceAccount apps/conflict', 'fail', `EKS Pod Identity`],
        ['ServiceAccount apps/missing', 'fail', 'annotated for EKS Pod Identity'],
      ],
    );
    assert.match(r.findings![0].message, new RegExp(`file names role ${other}, the annotation role ${PI_ROLE}`));
    assert.match(r.findings![1].message, /the associations file .* does not list it/);
    // The association the annotation asks for is still printed; the conflicting one is not.
    assert.deepEqual(
      (r.aws as AwsTrust).commands.filter((c) => !c.startsWith('#')).map((c) => c.split(' --service-account ')[1]),
      [`missing --role-arn ${PI_ROLE}`],
    );
    const noFile = report([annotated('apps', 'missing')]);
    assert.match(
      noFile.findings![0].message,
      /the webhook has no associations file \(--aws-container-credentials-config\)/,
    );
    assert.equal(trustFailed(noFile), true);
  });

  test('a value of the wrong form (a file is not checked by the API server) is a FAIL and reaches no command', () => {
    const flags = {
      'aws-container-credentials-config': file([
        { namespace: "apps'; touch pwned; '", serviceAccount: 'x' },
        { namespace: 'apps', serviceAccount: '$(id)' },
      ]),
    };
    const r = report([annotated('apps', 'bad-role', `${PI_ROLE}'; touch pwned; '`)], flags);
    assert.deepEqual(
      r.findings?.map((f) => f.message.replace(/ is not .*$/, '')),
      [
        'EKS Pod Identity: namespace "apps\'; touch pwned; \'"',
        'EKS Pod Identity: ServiceAccount name "$(id)"',
        `EKS Pod Identity: role ARN "${PI_ROLE}'; touch pwned; '"`,
      ],
    );
    assert.deepEqual(
      (r.aws as AwsTrust).commands.filter((c) => !c.startsWith('#')),
      [],
    );
  });
});

describe("doctor's checks of the trust", () => {
  test('a pass of the limits when every identity fits; the FAIL when one does not', () => {
    const accounts = Array.from({ length: 3 }, (_, n) => awsSa('apps', `app-${n}`));
    const { identities } = identitiesOfServiceAccounts(providers(), accounts);
    const settings = config();
    assert.deepEqual(
      trustChecks(ISSUER, identities, { settings, accounts }).map((c) => [c.check, c.verdict]),
      [['cloud-limits', 'pass']],
    );
    const many = Array.from({ length: 80 }, (_, n) => awsSa('apps', `app-${n}`));
    const over = identitiesOfServiceAccounts(providers(), many).identities;
    assert.deepEqual(
      trustChecks(ISSUER, over, { settings, accounts: many }).map((c) => [c.check, c.verdict]),
      [['cloud-limits', 'fail']],
    );
    assert.deepEqual(trustChecks(ISSUER, [], { settings, accounts: [] }), [], 'nothing to count, nothing said');
  });
});
