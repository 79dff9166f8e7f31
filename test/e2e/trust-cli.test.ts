// `trust` offline (-f manifests) and `issuer publish --key-file`: what they print and write, and
// their refusals. The cloud stand-ins judge the printed trust in trust-sdk.test.ts. Runs the built
// CLI (test/harness/cli-process.ts), what operators run.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { TrustReport } from '../../src/trust/report.ts';
import type { AwsWebIdentityStatement } from '../../src/clouds/aws/trust.ts';
import { runCli } from '../harness/cli-process.ts';
import {
  AWS_ACCOUNT,
  CLIENT,
  GCP_EMAIL as EMAIL,
  PATH_ROLE_ARN as ROLE,
  POOL,
  PROJECT_NUMBER,
  TENANT,
  WIF_PROVIDER as PROVIDER,
  oidcProviderArn,
} from '../support/identities.ts';

const dir = mkdtempSync(join(tmpdir(), 'wiw-trust-'));
const ISSUER = 'https://oidc.example.com/cluster-a';

function sa(namespace: string, name: string, annotations: Record<string, string>): string {
  return stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace, name, annotations } });
}

function manifests(...docs: string[]): string {
  const path = join(dir, `m${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, docs.join('---\n'));
  return path;
}

function trustJson(file: string, ...flags: string[]): TrustReport {
  const r = runCli(['trust', '-f', file, '--issuer', ISSUER, '-o', 'json', ...flags]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as TrustReport;
}

const hostPath = 'oidc.example.com/cluster-a';

describe('trust -f (offline)', () => {
  test('AWS: one policy per role, one statement per audience, the provider lists every audience', () => {
    const report = trustJson(
      manifests(
        sa('apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE }),
        sa('apps', 'writer', { 'eks.amazonaws.com/role-arn': ROLE }),
        sa('jobs', 'batch', { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/audience': 'sts.example.com' }),
      ),
    );
    assert.deepEqual(report.aws!.oidcProviders, [
      {
        arn: oidcProviderArn(hostPath),
        url: ISSUER,
        account: AWS_ACCOUNT,
        clientIds: ['sts.amazonaws.com', 'sts.example.com'],
      },
    ]);
    assert.equal(report.aws!.roles.length, 1);
    const role = report.aws!.roles[0];
    assert.equal(role.roleName, 's3-reader');
    assert.deepEqual(role.trustedBy, [
      'ServiceAccount apps/reader',
      'ServiceAccount apps/writer',
      'ServiceAccount jobs/batch',
    ]);
    assert.deepEqual(
      (role.trustPolicy.Statement as AwsWebIdentityStatement[]).map((s) => s.Condition.StringEquals),
      [
        {
          [`${hostPath}:sub`]: ['system:serviceaccount:apps:reader', 'system:serviceaccount:apps:writer'],
          [`${hostPath}:aud`]: 'sts.amazonaws.com',
        },
        { [`${hostPath}:sub`]: 'system:serviceaccount:jobs:batch', [`${hostPath}:aud`]: 'sts.example.com' },
      ],
    );
    assert.ok(
      role.trustPolicy.Statement.every((s) => s.Action === 'sts:AssumeRoleWithWebIdentity' && s.Effect === 'Allow'),
    );
    assert.deepEqual(
      report.aws!.commands.filter((c) => !c.startsWith('#')),
      [
        `aws iam create-open-id-connect-provider --url ${ISSUER} --client-id-list sts.amazonaws.com sts.example.com`,
        `aws iam update-assume-role-policy --role-name s3-reader --policy-document '${JSON.stringify(role.trustPolicy)}'`,
      ],
    );
  });

  test('Azure: one federated credential per ServiceAccount, grouped by client id, and the az commands', () => {
    const report = trustJson(
      manifests(
        sa('apps', 'reader', {
          'azure.workload.identity/client-id': CLIENT,
          'azure.workload.identity/tenant-id': TENANT,
        }),
        sa('apps', 'writer.v2', { 'azure.workload.identity/client-id': CLIENT }),
        // No client id: the webhook injects the token file only; nothing to trust.
        sa('apps', 'plain', { 'azure.workload.identity/tenant-id': TENANT }),
      ),
    );
    assert.equal(report.azure!.identities.length, 1);
    const identity = report.azure!.identities[0];
    assert.equal(identity.clientId, CLIENT);
    assert.equal(identity.tenantId, TENANT);
    assert.deepEqual(identity.federatedCredentials, [
      {
        name: 'kubernetes-apps-reader',
        issuer: ISSUER,
        subject: 'system:serviceaccount:apps:reader',
        audiences: ['api://AzureADTokenExchange'],
        description: 'Kubernetes ServiceAccount apps/reader',
      },
      {
        name: 'kubernetes-apps-writer-v2',
        issuer: ISSUER,
        subject: 'system:serviceaccount:apps:writer.v2',
        audiences: ['api://AzureADTokenExchange'],
        description: 'Kubernetes ServiceAccount apps/writer.v2',
      },
    ]);
    const create = report.azure!.commands.filter((c) => c.startsWith('az identity federated-credential create'));
    assert.equal(create.length, 2);
    assert.match(
      create[0],
      new RegExp(
        `--identity-name "\\$\\(az identity list --query "\\[\\?clientId=='${CLIENT}'\\]\\.name \\| \\[0\\]" -o tsv\\)"`,
      ),
    );
    assert.match(
      create[0],
      new RegExp(
        `--issuer ${ISSUER} --subject system:serviceaccount:apps:reader --audiences api://AzureADTokenExchange$`,
      ),
    );
    assert.ok(
      report.azure!.commands.some((c) =>
        c.startsWith(
          `az ad app federated-credential create --id ${CLIENT} --parameters '{"name":"kubernetes-apps-reader"`,
        ),
      ),
    );
  });

  test('Google: the provider allows every injected audience, maps google.subject, one binding per service account, principals for direct access', () => {
    const report = trustJson(
      manifests(
        sa('apps', 'reader', {
          'cloud.google.com/workload-identity-provider': PROVIDER,
          'cloud.google.com/service-account-email': EMAIL,
        }),
        sa('apps', 'writer', {
          'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
          'iam.gke.io/gcp-service-account': EMAIL,
        }),
        sa('apps', 'custom', {
          'cloud.google.com/workload-identity-provider': PROVIDER,
          'cloud.google.com/audience': 'https://custom.example.com',
        }),
      ),
    );
    const principal = (name: string) =>
      `principal://iam.googleapis.com/projects/${PROJECT_NUMBER}/locations/global/workloadIdentityPools/${POOL}/subject/system:serviceaccount:apps:${name}`;
    assert.deepEqual(
      report.gcp!.providers.map(({ trustedBy: _, ...p }) => p),
      [
        {
          name: PROVIDER,
          projectNumber: PROJECT_NUMBER,
          pool: POOL,
          provider: 'cluster-a',
          issuerUri: ISSUER,
          // reader is in the pfnet dialect: pfnet's audience; writer in Flux's: the provider's own.
          allowedAudiences: ['sts.googleapis.com', `//iam.googleapis.com/${PROVIDER}`, 'https://custom.example.com'],
          attributeMapping: { 'google.subject': 'assertion.sub' },
        },
      ],
    );
    assert.deepEqual(
      report.gcp!.serviceAccounts.map((s) => [s.email, s.binding]),
      [[EMAIL, { role: 'roles/iam.workloadIdentityUser', members: [principal('reader'), principal('writer')] }]],
    );
    assert.deepEqual(report.gcp!.directAccess, [
      { source: 'ServiceAccount apps/custom', principal: principal('custom') },
    ]);
    assert.ok(
      report.gcp!.commands.includes(
        `gcloud iam workload-identity-pools providers create-oidc cluster-a --project=${PROJECT_NUMBER} --location=global --workload-identity-pool=${POOL} --issuer-uri=${ISSUER} --allowed-audiences=sts.googleapis.com,//iam.googleapis.com/${PROVIDER},https://custom.example.com --attribute-mapping=google.subject=assertion.sub`,
      ),
    );
    assert.ok(
      report.gcp!.commands.includes(
        `gcloud iam service-accounts add-iam-policy-binding ${EMAIL} --role=roles/iam.workloadIdentityUser --member=${principal('writer')}`,
      ),
    );
  });

  test('the audience printed is the audience preview injects, with the same provider flags', () => {
    const flags = [
      '--aws-audience',
      'sts.internal.example.com',
      '--azure-audience',
      'api://CustomExchange',
      '--gcp-audience',
      'https://gcp.example.com',
    ];
    const accounts = [
      sa('apps', 'aws', { 'eks.amazonaws.com/role-arn': ROLE }),
      sa('apps', 'azure', { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT }),
      sa('apps', 'gcp', { 'cloud.google.com/workload-identity-provider': PROVIDER }),
    ];
    const report = trustJson(manifests(...accounts), ...flags);
    const volumes = { aws: 'aws-iam-token', azure: 'azure-identity-token', gcp: 'gcp-iam-token' };
    for (const [cloud, volume] of Object.entries(volumes)) {
      const labels = cloud === 'azure' ? { 'azure.workload.identity/use': 'true' } : {};
      const pod = stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p', namespace: 'apps', labels },
        spec: { serviceAccountName: cloud, containers: [{ name: 'app', image: 'app' }] },
      });
      const r = runCli(['preview', '-f', manifests(...accounts, pod), ...flags]);
      assert.equal(r.code, 0, r.stderr);
      const volumesOut = parse(r.stdout).spec.volumes as {
        name: string;
        projected: { sources: { serviceAccountToken: { audience: string } }[] };
      }[];
      const injected = volumesOut.find((v) => v.name === volume)!.projected.sources[0].serviceAccountToken.audience;
      assert.deepEqual(
        report.identities.filter((i) => i.cloud === cloud).map((i) => i.audience),
        [injected],
        cloud,
      );
    }
  });

  test("a labelled Secret: trust for the ServiceAccount it names, with the token requestor's audience", () => {
    const secret = stringify({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        namespace: 'apps',
        name: 'aws-creds',
        labels: { 'workload-identity-webhook.io/provider': 'aws' },
        annotations: { 'workload-identity-webhook.io/service-account': 'uploader' },
      },
      stringData: { config: JSON.stringify({ roleARN: ROLE }) },
    });
    const report = trustJson(manifests(sa('apps', 'uploader', {}), secret));
    assert.deepEqual(report.identities, [
      {
        cloud: 'aws',
        source: 'Secret apps/aws-creds',
        subject: 'system:serviceaccount:apps:uploader',
        audience: 'sts.amazonaws.com',
      },
    ]);
    assert.deepEqual(
      (report.aws!.roles[0].trustPolicy.Statement[0] as AwsWebIdentityStatement).Condition.StringEquals[
        `${hostPath}:sub`
      ],
      'system:serviceaccount:apps:uploader',
    );
  });

  test('text output: the policies as JSON and the commands to paste', () => {
    const r = runCli([
      'trust',
      '-f',
      manifests(sa('apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE })),
      '--issuer',
      ISSUER,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^# issuer: https:\/\/oidc\.example\.com\/cluster-a\n\n## AWS\n/);
    assert.match(r.stdout, /\n# \{\n# {3}"Version": "2012-10-17",/);
    assert.match(
      r.stdout,
      /\naws iam create-open-id-connect-provider --url https:\/\/oidc\.example\.com\/cluster-a --client-id-list sts\.amazonaws\.com\n/,
    );
    assert.doesNotMatch(r.stdout, /## Azure|## Google/);
  });

  test('an annotation the webhook refuses: left out with a warning naming it, exit 1, the rest printed', () => {
    const r = runCli([
      'trust',
      '-f',
      manifests(
        // A role for the profiles' config file: refused with or without --strict.
        sa('apps', 'bad', { 'eks.amazonaws.com/role-arns': 'writer=arn:aws:iam::1:role/x' }),
        sa('apps', 'good', { 'eks.amazonaws.com/role-arn': ROLE }),
      ),
      '--issuer',
      ISSUER,
      '-o',
      'json',
    ]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /^warning: ServiceAccount apps\/bad: .*"arn:aws:iam::1:role\/x" is not an IAM role ARN.* \(left out\)\n$/,
    );
    assert.deepEqual(
      (JSON.parse(r.stdout) as TrustReport).identities.map((i) => i.source),
      ['ServiceAccount apps/good'],
    );
  });

  test('a role ARN the webhook injects as written (outside --strict, as the AWS peer): a FAIL line, exit 1, no command', () => {
    const file = manifests(
      sa('apps', 'loose', { 'eks.amazonaws.com/role-arn': "arn:aws:iam::1:role/x'; rm -rf /" }),
      sa('apps', 'good', { 'eks.amazonaws.com/role-arn': ROLE }),
    );
    const r = runCli(['trust', '-f', file, '--issuer', ISSUER]);
    assert.equal(r.code, 1);
    assert.match(
      r.stdout,
      /^# FAIL aws ServiceAccount apps\/loose: role ARN .* is not an IAM role ARN; no command is printed for it$/m,
    );
    assert.doesNotMatch(
      r.stdout
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n'),
      /rm -rf/,
    );
    const json = JSON.parse(runCli(['trust', '-f', file, '--issuer', ISSUER, '-o', 'json']).stdout) as TrustReport;
    assert.deepEqual(
      json.identities.map((i) => i.source),
      ['ServiceAccount apps/good'],
    );
    assert.deepEqual(
      json.failures!.map((f) => f.source),
      ['ServiceAccount apps/loose'],
    );
  });

  test('--namespace keeps one namespace; no identity at all says so', () => {
    const file = manifests(sa('apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE }), sa('jobs', 'x', {}));
    assert.deepEqual(trustJson(file, '--namespace', 'jobs'), { issuer: ISSUER, identities: [] });
    const r = runCli(['trust', '-f', file, '--issuer', ISSUER, '-n', 'jobs']);
    assert.match(r.stdout, /nothing to trust/);
  });

  test('bad usage: exit 2 with the reason', () => {
    const file = manifests(sa('apps', 'reader', {}));
    const cases: [string[], RegExp][] = [
      [['trust', '-f', file], /trust -f FILE needs --issuer URL/],
      [['trust', '-f', file, '--issuer', ISSUER, '-o', 'xml'], /-o xml: expected text, json or yaml/],
      [['trust', '-f', file, '--issuer', ISSUER, '--issuer', ISSUER], /--issuer given 2 times/],
      [['trust', '-f', join(dir, 'missing.yaml'), '--issuer', ISSUER], /cannot read .*missing\.yaml: ENOENT/],
      [['issuer'], /expected "issuer publish"/],
      [['issuer', 'publish'], /issuer publish needs --dir DIR/],
      [['issuer', 'publish', '--dir', dir, '-o', 'json'], /issuer publish has no -o/],
      [['doctor', '--dir', dir], /unknown flag --dir/],
    ];
    for (const [args, message] of cases) {
      const r = runCli(args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message, args.join(' '));
    }
  });

  test('a trailing slash on --issuer is warned about', () => {
    const r = runCli([
      'trust',
      '-f',
      manifests(sa('apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE })),
      '--issuer',
      `${ISSUER}/`,
      '-o',
      'json',
    ]);
    assert.equal(r.code, 0);
    assert.match(
      r.stderr,
      /the issuer https:\/\/oidc\.example\.com\/cluster-a\/ ends with "\/": AWS refuses such tokens/,
    );
  });
});

describe('issuer publish --key-file', () => {
  const keyFile = (name: string, pem: string) => {
    const path = join(dir, name);
    writeFileSync(path, pem);
    return path;
  };

  test('RSA and EC keys, public or private, into the two documents; the flags for kube-apiserver', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const out = join(dir, 'site');
    const r = runCli([
      'issuer',
      'publish',
      '--dir',
      out,
      '--issuer',
      ISSUER,
      '--key-file',
      keyFile('rsa.pub', rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string),
      // A private key file (kube-apiserver accepts those too): only its public half is published;
      // the same key twice is published once.
      '--key-file',
      keyFile(
        'both.pem',
        `${rsa.privateKey.export({ type: 'pkcs8', format: 'pem' })}${ec.privateKey.export({ type: 'sec1', format: 'pem' })}`,
      ),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /--service-account-issuer=https:\/\/oidc\.example\.com\/cluster-a\n {2}--service-account-jwks-uri=https:\/\/oidc\.example\.com\/cluster-a\/openid\/v1\/jwks\n$/,
    );
    const jwks = JSON.parse(readFileSync(join(out, 'openid/v1/jwks'), 'utf8'));
    assert.deepEqual(
      jwks.keys.map((k: { kty: string; alg: string }) => [k.kty, k.alg]),
      [
        ['RSA', 'RS256'],
        ['EC', 'ES256'],
      ],
    );
    assert.ok(
      jwks.keys.every((k: { d?: string; kid: string }) => k.d === undefined && /^[\w-]{43}$/.test(k.kid)),
      'public halves only, Kubernetes key ids',
    );
    const discovery = JSON.parse(readFileSync(join(out, '.well-known/openid-configuration'), 'utf8'));
    assert.deepEqual(discovery.id_token_signing_alg_values_supported, ['ES256', 'RS256']);
    assert.equal(discovery.jwks_uri, `${ISSUER}/openid/v1/jwks`);
  });

  test('refusals: no PEM, not an https issuer, a trailing slash, no --issuer', () => {
    const pub = keyFile(
      'ok.pub',
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }) as string,
    );
    const cases: [string[], RegExp][] = [
      [['--key-file', keyFile('empty.pem', 'nothing'), '--issuer', ISSUER], /key file .*empty\.pem holds no PEM block/],
      [['--key-file', pub, '--issuer', 'http://oidc.example.com'], /must use https/],
      [['--key-file', pub, '--issuer', `${ISSUER}/`], /ends with "\/"/],
      [['--key-file', pub], /--key-file needs --issuer URL/],
    ];
    for (const [args, message] of cases) {
      const r = runCli(['issuer', 'publish', '--dir', join(dir, 'refused'), ...args]);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, message, args.join(' '));
    }
  });
});
