// `trust` and `doctor` against a real kube-apiserver count what each identity needs against the
// clouds' documented limits (IAM's role trust policy length, Entra's 20 federated credentials per
// identity, a Google provider's 10 audiences and google.subject's 127 bytes) and print the split
// that fits with a FAIL; and they read the EKS Pod Identity associations (the associations file
// and the pod-identity-role-arn annotation): `trust` prints create-pod-identity-association for
// each, `doctor` names the ServiceAccounts whose association the file lacks or contradicts.
// Brought under each limit (a ServiceAccount deleted, the raised IAM quota), the same run passes.
// Runs the built CLI (test/harness/cli-process.ts), what operators run.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import { runCliAsync } from '../harness/cli-process.ts';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import type { AwsTrust } from '../../src/clouds/aws/trust.ts';
import type { AzureTrust } from '../../src/clouds/azure/trust.ts';
import type { GcpTrust } from '../../src/clouds/gcp/trust.ts';
import type { TrustReport } from '../../src/trust/report.ts';
import { CLIENT, ROLE_ARN as ROLE, roleArn, WIF_PROVIDER as PROVIDER } from '../support/identities.ts';

const PI_ROLE = roleArn('pod-identity');
const OTHER_ROLE = roleArn('other');
const LONG_NAME = 'n'.repeat(104); // system:serviceaccount:g:<104> is 128 bytes

interface Check {
  id: string;
  verdict: string;
  message: string;
  fix?: string;
}

let cp: ControlPlane;
let associations: string;

before(async () => {
  cp = await startControlPlane({ name: 'cloud-limits' });
  for (const ns of ['team-0', 'team-1', 'team-2', 'team-3', 'az-0', 'az-1', 'az-2', 'g', 'pi'])
    await createNamespace(cp, ns);
  const created: Promise<unknown>[] = [];
  // 70 ServiceAccounts of one role: a trust policy well over 2,048 characters, under 8,192.
  for (let n = 0; n < 70; n++)
    created.push(createServiceAccount(cp, `team-${n % 4}`, `app-${n}`, { 'eks.amazonaws.com/role-arn': ROLE }));
  // 21 of one client id, 7 per namespace.
  for (let n = 0; n < 21; n++)
    created.push(createServiceAccount(cp, `az-${n % 3}`, `app-${n}`, { 'azure.workload.identity/client-id': CLIENT }));
  // 11 audiences on one pool provider, and one subject of 128 bytes.
  for (let n = 0; n < 11; n++)
    created.push(
      createServiceAccount(cp, 'g', `app-${n}`, {
        'cloud.google.com/workload-identity-provider': PROVIDER,
        'cloud.google.com/audience': `aud-${n}`,
      }),
    );
  created.push(
    createServiceAccount(cp, 'g', LONG_NAME, {
      'cloud.google.com/workload-identity-provider': PROVIDER,
      'cloud.google.com/audience': 'aud-0',
    }),
  );
  // EKS Pod Identity: agreed with the file, missing from it, and contradicting it.
  for (const name of ['in-file', 'missing', 'conflict'])
    created.push(createServiceAccount(cp, 'pi', name, { 'eks.amazonaws.com/pod-identity-role-arn': PI_ROLE }));
  await Promise.all(created);
  associations = join(await mkdtemp(join(tmpdir(), 'wiw-limits-')), 'associations.json');
  await writeFile(
    associations,
    JSON.stringify({
      identities: [
        { namespace: 'pi', serviceAccount: 'in-file' },
        { namespace: 'pi', serviceAccount: 'conflict', roleArn: OTHER_ROLE },
      ],
    }),
  );
});

after(async () => {
  await cp?.stop();
});

const flags = () => [
  '--kubeconfig',
  cp.kubeconfigPath,
  '--aws-container-credentials-config',
  associations,
  '--aws-eks-cluster-name',
  'prod',
];

async function trust(...extra: string[]): Promise<{ code: number | null; report: TrustReport; text: string }> {
  const json = await runCliAsync(['trust', '-o', 'json', ...flags(), ...extra]);
  const text = await runCliAsync(['trust', ...flags(), ...extra]);
  assert.equal(json.code, text.code, text.stderr);
  return { code: json.code, report: JSON.parse(json.stdout) as TrustReport, text: text.stdout };
}

async function doctor(...extra: string[]): Promise<{ code: number | null; checks: Check[] }> {
  const r = await runCliAsync(['doctor', '-o', 'json', '--issuer-ca', join(cp.dir, 'ca.crt'), ...flags(), ...extra]);
  const report = JSON.parse(r.stdout) as { exitCode: number; checks: Check[] };
  assert.equal(report.exitCode, r.code);
  return { code: r.code, checks: report.checks };
}

const ours = (checks: Check[]) =>
  checks
    .filter((c) => c.id === 'cloud-limits' || c.id === 'pod-identity-associations')
    .map((c) => [c.id, c.verdict, c.message.split(': ')[0]]);

describe('over the limits, and Pod Identity associations the file lacks or contradicts', () => {
  test('trust: a FAIL per identity over a limit with the split that fits, and the associations; exit 1', async () => {
    const { code, report, text } = await trust();
    assert.equal(code, 1);
    assert.deepEqual(
      report.findings?.map((f) => [f.cloud, f.check, f.subject]),
      [
        ['aws', 'cloud-limits', `role ${ROLE}`],
        ['aws', 'pod-identity-associations', 'ServiceAccount pi/conflict'],
        ['aws', 'pod-identity-associations', 'ServiceAccount pi/missing'],
        ['azure', 'cloud-limits', `client id ${CLIENT}`],
        ['gcp', 'cloud-limits', `pool provider ${PROVIDER}`],
        ['gcp', 'cloud-limits', `ServiceAccount g/${LONG_NAME}`],
      ],
    );
    for (const f of report.findings!) assert.ok(text.includes(`# FAIL ${f.cloud} ${f.subject}: `), f.subject);

    const role = (report.aws as AwsTrust).roles[0];
    assert.ok(role.overLimit!.length > 2048 && role.overLimit!.limit === 2048);
    assert.ok(role.overLimit!.split.length >= 2);
    for (const part of role.overLimit!.split) assert.ok(JSON.stringify(part.trustPolicy).length <= 2048);
    assert.equal(new Set(role.overLimit!.split.flatMap((p) => p.trustedBy)).size, 70);
    const azure = (report.azure as AzureTrust).identities[0];
    assert.deepEqual(
      azure.overLimit!.split.map((p) => p.federatedCredentials.length),
      [14, 7],
    );
    const provider = (report.gcp as GcpTrust).providers[0];
    assert.deepEqual(
      provider.overLimit!.split.map((p) => p.allowedAudiences.length),
      [10, 1],
    );

    // Commands only for what the clouds take: no role policy, no federated credential, no pool
    // provider over a limit; the associations the annotations ask for that contradict nothing.
    const commands = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    assert.deepEqual(
      commands.filter((c) => /update-assume-role-policy|federated-credential|create-oidc/.test(c)),
      [],
    );
    assert.deepEqual(
      commands.filter((c) => c.startsWith('aws eks')),
      ['in-file', 'missing'].map(
        (sa) =>
          `aws eks create-pod-identity-association --cluster-name prod --namespace pi --service-account ${sa} --role-arn ${PI_ROLE}`,
      ),
    );
  });

  test('doctor: the same, as checks in its table; exit 1', async () => {
    const { code, checks } = await doctor();
    assert.equal(code, 1);
    assert.deepEqual(ours(checks), [
      ['cloud-limits', 'fail', `role ${ROLE}`],
      ['pod-identity-associations', 'fail', 'ServiceAccount pi/conflict'],
      ['pod-identity-associations', 'fail', 'ServiceAccount pi/missing'],
      ['cloud-limits', 'fail', `client id ${CLIENT}`],
      ['cloud-limits', 'fail', `pool provider ${PROVIDER}`],
      ['cloud-limits', 'fail', `ServiceAccount g/${LONG_NAME}`],
    ]);
    const missing = checks.find((c) => c.message.startsWith('ServiceAccount pi/missing'))!;
    assert.match(missing.message, /annotated for EKS Pod Identity .* the associations file .* does not list it/);
    assert.ok(missing.fix!.includes(`"serviceAccount": "missing", "roleArn": "${PI_ROLE}"`), missing.fix);
  });
});

describe('at the limits, and the associations in agreement', () => {
  test('one ServiceAccount fewer, the raised IAM quota and the file completed: trust and doctor pass these checks', async () => {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    await core.deleteNamespacedServiceAccount({ namespace: 'az-2', name: 'app-20' });
    await core.deleteNamespacedServiceAccount({ namespace: 'g', name: 'app-10' });
    await core.deleteNamespacedServiceAccount({ namespace: 'g', name: LONG_NAME });
    await writeFile(
      associations,
      JSON.stringify({
        identities: ['in-file', 'missing', 'conflict'].map((sa) => ({
          namespace: 'pi',
          serviceAccount: sa,
          roleArn: PI_ROLE,
        })),
      }),
    );
    const { code, report, text } = await trust('--aws-role-trust-policy-length', '8192');
    assert.equal(code, 0, text);
    assert.equal(report.findings, undefined);
    assert.equal((report.azure as AzureTrust).identities[0].federatedCredentials.length, 20);
    assert.equal((report.gcp as GcpTrust).providers[0].allowedAudiences.length, 10);
    const commands = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    assert.equal(commands.filter((c) => c.startsWith('aws iam update-assume-role-policy')).length, 1);
    assert.equal(commands.filter((c) => c.startsWith('az identity federated-credential create')).length, 20);
    assert.equal(commands.filter((c) => c.startsWith('aws eks create-pod-identity-association')).length, 3);

    const { checks } = await doctor('--aws-role-trust-policy-length', '8192');
    // 70 ServiceAccounts of the role, 20 of the client id, 10 of the provider; Pod Identity's tokens are not the issuer's to trust.
    assert.deepEqual(
      ours(checks).map(([id, verdict]) => [id, verdict]),
      [
        ['cloud-limits', 'pass'],
        ['pod-identity-associations', 'pass'],
      ],
    );
    assert.match(
      checks.find((c) => c.id === 'cloud-limits')!.message,
      /^the cloud-side configuration of 100 identities is within/,
    );
  });
});
