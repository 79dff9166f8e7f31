// The loop closed: `trust` prints the cloud side for the cluster's identities, the strict cloud
// stand-ins are configured with exactly what it printed (AWS role trust policy and OIDC provider
// client IDs, Entra federated identity credentials, Google pool provider and service account
// binding), and an official SDK in a Pod of the webhook's making is accepted. The same trust
// printed for another namespace is refused. Runs the built CLI (test/harness/cli-process.ts), what
// operators run.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { runCliAsync } from '../harness/cli-process.ts';
import { createServiceAccount, requestToken } from '../harness/control-plane.ts';
import { createAwsSts, type AwsSts } from '../sdk/aws-sts.ts';
import { startSdkCluster, type SdkCluster } from '../sdk/cluster.ts';
import { createEntra, type Entra } from '../sdk/entra.ts';
import { createGoogleCloud, type GoogleCloud } from '../sdk/google.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import type { TrustReport } from '../../src/trust/report.ts';
import type { AwsWebIdentityStatement } from '../../src/clouds/aws/trust.ts';
import {
  CLIENT,
  GCP_EMAIL as EMAIL,
  GCP_PROJECT,
  PROJECT_NUMBER,
  ROLE_ARN as ROLE,
  roleArn,
  TENANT,
  WIF_PROVIDER as PROVIDER,
  OTHER_AWS_ACCOUNT,
  oidcProviderArn,
} from '../support/identities.ts';

const HUB = roleArn('hub');
const CHAINED_ROLE = roleArn('chained-writer', OTHER_AWS_ACCOUNT);
const NS = 'trust-proof';
const ACCOUNTS: Record<string, Record<string, string>> = {
  // Role chaining (AWS #258), first as the cluster lists it: [default] (the hub) presents the
  // token; writer, in another account, is assumed with the hub's credentials. Trust prints both
  // steps and the hub's permission.
  'aws-chained': {
    'eks.amazonaws.com/role-arn': HUB,
    'eks.amazonaws.com/role-arns': `writer=${CHAINED_ROLE}`,
    'eks.amazonaws.com/source-profiles': 'writer=default',
  },
  'aws-reader': { 'eks.amazonaws.com/role-arn': ROLE },
  // Same role: its trust policy must admit both.
  'aws-writer': { 'eks.amazonaws.com/role-arn': ROLE },
  'azure-reader': { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT },
  'gcp-reader': {
    'cloud.google.com/workload-identity-provider': PROVIDER,
    'cloud.google.com/service-account-email': EMAIL,
    'cloud.google.com/injection-mode': 'direct',
  },
};
const subject = (sa: string, ns = NS) => `system:serviceaccount:${ns}:${sa}`;

let cluster: SdkCluster;
let sts: AwsSts;
let entra: Entra;
let google: GoogleCloud;
// What the stand-ins hold; emptied and refilled from each printed trust.
const clientIds: string[] = [];
const roles: Parameters<typeof createAwsSts>[0]['roles'] = [];
const applications: Parameters<typeof createEntra>[0]['applications'] = [];
const providers: Parameters<typeof createGoogleCloud>[0]['providers'] = [];
const serviceAccounts: Parameters<typeof createGoogleCloud>[0]['serviceAccounts'] = [];

/** The stand-ins take exactly the printed trust, and nothing else. */
function configure(report: TrustReport): void {
  for (const list of [clientIds, roles, applications, providers, serviceAccounts]) list.length = 0;
  clientIds.push(...report.aws!.oidcProviders.flatMap((p) => p.clientIds));
  // Each role with its printed trust, and a source role with the permission printed for it.
  const permissions = (arn: string) => report.aws!.rolePermissions.find((p) => p.roleArn === arn)?.policy.Statement;
  roles.push(
    ...report.aws!.roles.map((r) => ({
      arn: r.roleArn,
      trustPolicy: r.trustPolicy,
      permissions: permissions(r.roleArn),
    })),
  );
  applications.push(
    ...report.azure!.identities.map((i) => ({
      tenantId: i.tenantId!,
      clientId: i.clientId,
      federatedCredentials: i.federatedCredentials,
    })),
  );
  providers.push(
    ...report.gcp!.providers.map((p) => ({
      name: p.name,
      issuer: p.issuerUri,
      allowedAudiences: p.allowedAudiences,
      attributeMapping: p.attributeMapping,
    })),
  );
  serviceAccounts.push(
    ...report.gcp!.serviceAccounts.map((s) => ({ email: s.email, workloadIdentityUsers: s.binding.members })),
  );
}

/** `trust -o json <args>`, which must exit 0, with `input` on its stdin; the report and the warnings. */
async function trustRun(args: string[], input?: string): Promise<{ report: TrustReport; stderr: string }> {
  const r = await runCliAsync(['trust', '-o', 'json', ...args], { input });
  assert.equal(r.code, 0, r.stderr);
  return { report: JSON.parse(r.stdout) as TrustReport, stderr: r.stderr };
}

async function trust(args: string[], input?: string): Promise<TrustReport> {
  return (await trustRun(args, input)).report;
}

/** The cluster's ServiceAccounts as manifests, in `namespace`. */
function manifests(namespace: string): string {
  return Object.entries(ACCOUNTS)
    .map(([name, annotations]) =>
      stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace, annotations } }),
    )
    .join('---\n');
}

let printed: TrustReport;

before(async () => {
  cluster = await startSdkCluster({
    name: 'trust-proof',
    namespace: NS,
    serviceAccounts: ACCOUNTS,
    services: (issuer) => [
      (sts = createAwsSts({ issuer, clientIds, roles })),
      (entra = createEntra({ issuer, applications })),
      (google = createGoogleCloud({
        issuer,
        providers,
        serviceAccounts,
        projects: { [PROJECT_NUMBER]: GCP_PROJECT },
      })),
    ],
  });
  printed = await trust(['--kubeconfig', cluster.cp.kubeconfigPath, '--namespace', NS]);
  configure(printed);
});

after(async () => {
  await cluster?.stop();
});

describe('trust, read from the cluster', () => {
  test("names the issuer of the discovery document and groups one role's ServiceAccounts into one policy", () => {
    assert.equal(printed.issuer, cluster.issuer.issuer);
    assert.deepEqual(
      printed.aws!.roles.map((r) => r.roleArn),
      [HUB, CHAINED_ROLE, ROLE],
    );
    const statement = printed.aws!.roles[2].trustPolicy.Statement as AwsWebIdentityStatement[];
    assert.equal(statement.length, 1);
    const hostPath = cluster.issuer.issuer.replace('https://', '');
    assert.deepEqual(statement[0].Condition.StringEquals, {
      [`${hostPath}:sub`]: [subject('aws-reader'), subject('aws-writer')],
      [`${hostPath}:aud`]: 'sts.amazonaws.com',
    });
    assert.equal(statement[0].Principal.Federated, oidcProviderArn(hostPath));
  });

  test("--issuer other than the cluster's: printed as asked, with a warning that the tokens carry another", async () => {
    const { report, stderr } = await trustRun([
      '--kubeconfig',
      cluster.cp.kubeconfigPath,
      '--namespace',
      NS,
      '--issuer',
      'https://oidc.example.com',
    ]);
    assert.equal(report.issuer, 'https://oidc.example.com');
    assert.equal(
      stderr,
      `warning: the cluster's tokens carry iss ${cluster.issuer.issuer}, not --issuer https://oidc.example.com: a cloud given this trust refuses them\n`,
    );
  });

  test('a kubeconfig that may list ServiceAccounts but not Secrets: the same trust, and a warning that Secrets were left out', async () => {
    const rbac = cluster.cp.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({
      body: {
        metadata: { name: 'trust-viewer' },
        rules: [{ apiGroups: [''], resources: ['serviceaccounts'], verbs: ['list'] }],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'trust-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'trust-viewer' },
        subjects: [{ kind: 'ServiceAccount', name: 'trust-viewer', namespace: 'default' }],
      },
    });
    await createServiceAccount(cluster.cp, 'default', 'trust-viewer');
    const token = await requestToken(cluster.cp, 'default', 'trust-viewer', cluster.issuer.issuer, 600);
    const kubeconfig = join(cluster.cp.dir, 'trust-viewer.kubeconfig');
    await writeFile(
      kubeconfig,
      stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'c',
        clusters: [
          {
            name: 'c',
            cluster: {
              server: cluster.cp.server,
              'certificate-authority-data': Buffer.from(cluster.cp.caPem).toString('base64'),
            },
          },
        ],
        users: [{ name: 'u', user: { token } }],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      }),
      { mode: 0o600 },
    );
    const { report, stderr } = await trustRun(['--kubeconfig', kubeconfig, '--namespace', NS]);
    assert.deepEqual(report, printed);
    assert.equal(
      stderr,
      `warning: cannot list Secrets labelled workload-identity-webhook.io/provider (HTTP 403): their identities are left out\n`,
    );
  });

  test('offline from manifests with --issuer: the same trust as from the cluster', async () => {
    assert.deepEqual(await trust(['-f', '-', '--issuer', cluster.issuer.issuer], manifests(NS)), printed);
  });
});

describe("the stand-ins accept a Pod's token with the printed trust (official Node.js SDKs)", () => {
  for (const sa of ['aws-reader', 'aws-writer']) {
    test(`AWS: ${sa} assumes the role through the printed trust policy`, async () => {
      const { container, sdk } = await cluster.start('node', 'aws', sa);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
      assert.equal(exchange.subject, subject(sa));
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      await sdk.stop();
    });
  }

  for (const language of ['node', 'python'] as const)
    test(`AWS, role chaining (${language}): the printed trust and permission admit AssumeRole with the hub's credentials`, async () => {
      const { container, sdk } = await cluster.start(language, 'aws', 'aws-chained');
      const answer = await sdk.credentials('writer');
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const assumed = sts.assumptions.find((a) => a.accessKeyId === answer.accessKeyId);
      assert.ok(assumed, 'the SDK returned credentials the stand-in issued by AssumeRole');
      assert.deepEqual([assumed.roleArn, assumed.callerRoleArn], [CHAINED_ROLE, HUB]);
      const exchange = sts.exchanges.find((e) => e.accessKeyId === assumed.callerAccessKeyId);
      assert.ok(exchange, "the hub's credentials came from the token");
      assert.deepEqual([exchange.roleArn, exchange.subject], [HUB, subject('aws-chained')]);
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      await sdk.stop();
    });

  test('Azure: the printed federated identity credential admits the projected token', async () => {
    const { container, sdk } = await cluster.start('node', 'azure', 'azure-reader', {
      labels: { 'azure.workload.identity/use': 'true' },
    });
    const answer = await sdk.credentials();
    assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
    const exchange = entra.exchanges.find((e) => e.accessToken === answer.token);
    assert.ok(exchange, 'the SDK returned a token the stand-in issued');
    assert.equal(exchange.clientId, CLIENT);
    assert.equal(exchange.subject, subject('azure-reader'));
    assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
    await sdk.stop();
  });

  test('Google: the printed provider allows the audience, its mapping and binding let the principal impersonate', async () => {
    const { container, sdk } = await cluster.start('node', 'gcp', 'gcp-reader');
    const answer = await sdk.credentials();
    assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
    const impersonation = google.impersonations.find((i) => i.accessToken === answer.token);
    assert.ok(impersonation, 'the SDK returned a token the stand-in issued for the service account');
    assert.equal(impersonation.email, EMAIL);
    assert.match(impersonation.principal, new RegExp(`/subject/${subject('gcp-reader')}$`));
    assert.ok(google.exchanges.some((e) => e.tokenDigest === tokenDigest(container.tokens[0].token)));
    await sdk.stop();
  });
});

describe('the same trust printed for another namespace is refused', () => {
  before(async () => configure(await trust(['-f', '-', '--issuer', cluster.issuer.issuer], manifests('elsewhere'))));
  after(() => configure(printed));

  test('AWS: AccessDenied', async () => {
    const { sdk } = await cluster.start('node', 'aws', 'aws-reader');
    const answer = await sdk.credentials();
    assert.equal(answer.ok, false);
    assert.equal(answer.error?.code, 'AccessDenied');
    await sdk.stop();
  });

  test('Azure: AADSTS700213, no federated identity record for the subject', async () => {
    const { sdk } = await cluster.start('node', 'azure', 'azure-reader', {
      labels: { 'azure.workload.identity/use': 'true' },
    });
    const answer = await sdk.credentials();
    assert.equal(answer.ok, false);
    assert.match(answer.error!.message, /AADSTS700213/);
    await sdk.stop();
  });

  test('Google: the exchange succeeds but impersonation is PERMISSION_DENIED', async () => {
    const { container, sdk } = await cluster.start('node', 'gcp', 'gcp-reader');
    const errorsBefore = google.errors.length;
    const answer = await sdk.credentials();
    assert.equal(answer.ok, false);
    assert.match(JSON.stringify(answer.error), /iam\.serviceAccounts\.getAccessToken|PERMISSION_DENIED/);
    assert.ok(
      google.exchanges.some((e) => e.tokenDigest === tokenDigest(container.tokens[0].token)),
      'the provider (same pool, same audience) accepted the token',
    );
    assert.deepEqual(
      google.errors.slice(errorsBefore).map((e) => [e.service, e.status]),
      [['iamcredentials', 403]],
    );
    await sdk.stop();
  });
});

describe("a role over IAM's trust policy quota: each role of the printed split admits its part", () => {
  // ServiceAccounts of the same role in namespaces that sort before NS: the policy is over 2,048
  // characters, and NS's ServiceAccounts land in a later part, a new role.
  const fillers = Array.from({ length: 64 }, (_, n) =>
    stringify({
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: `filler-${n}`, namespace: `aa-${n % 4}`, annotations: { 'eks.amazonaws.com/role-arn': ROLE } },
    }),
  );
  const moved = stringify({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'aws-moved', namespace: NS, annotations: { 'eks.amazonaws.com/role-arn': ROLE } },
  });
  after(() => configure(printed));

  test('the split roles, configured in the STS stand-in: the re-annotated ServiceAccount assumes its new role, the old role refuses it', async () => {
    const overQuota = await runCliAsync(['trust', '-o', 'json', '-f', '-', '--issuer', cluster.issuer.issuer], {
      input: [manifests(NS), moved, ...fillers].join('---\n'),
    });
    assert.equal(overQuota.code, 1, 'trust must exit 1 for a role over the quota');
    const report = JSON.parse(overQuota.stdout) as TrustReport;
    const role = report.aws!.roles.find((r) => r.roleArn === ROLE)!;
    assert.ok(role.overLimit, 'the role is over the quota');
    const split = role.overLimit.split;
    for (const p of split) assert.ok(JSON.stringify(p.trustPolicy).length <= 2048);
    const part = split.find((p) => p.trustedBy.includes(`ServiceAccount ${NS}/aws-moved`))!;
    assert.notEqual(part.roleArn, ROLE, "NS's ServiceAccounts moved to a new role");
    assert.ok(part.roleArn.startsWith(roleArn('s3-reader-')), part.roleArn);
    // The stand-in holds exactly the split, as an admin would create it.
    for (const list of [clientIds, roles]) list.length = 0;
    clientIds.push(...report.aws!.oidcProviders.flatMap((p) => p.clientIds));
    roles.push(...split.map((p) => ({ arn: p.roleArn, trustPolicy: p.trustPolicy })));

    // Annotated with its part's role, as trust says: accepted through the new role's policy.
    await createServiceAccount(cluster.cp, NS, 'aws-moved', { 'eks.amazonaws.com/role-arn': part.roleArn });
    const { container, sdk } = await cluster.start('node', 'aws', 'aws-moved');
    const answer = await sdk.credentials();
    assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
    const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
    assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
    assert.equal(exchange.subject, subject('aws-moved'));
    assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
    await sdk.stop();

    // Not re-annotated: the old role's policy (the first part) no longer admits it.
    const old = await cluster.start('node', 'aws', 'aws-reader');
    const refused = await old.sdk.credentials();
    assert.equal(refused.ok, false);
    assert.equal(refused.error?.code, 'AccessDenied');
    await old.sdk.stop();
  });
});
