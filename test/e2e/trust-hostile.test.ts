// Hostile values against the text an admin pastes into a shell. `trust` output is run for real by
// bash, with aws, az and gcloud as functions that record their argv and every other command
// (PATH is empty) caught by command_not_found_handle: every recorded argv must be an intended
// one, nothing else may run, and no file may appear. Also: shellQuote round-trips any string.
// Runs the built CLI (test/harness/cli-process.ts), whose output an admin pastes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { printable, shellComment, shellQuote } from '../../src/shell.ts';
import type { TrustReport } from '../../src/trust/report.ts';
import { issuerProblem } from '../../src/issuer/discovery.ts';
import { HOSTILE } from '../support/hostile.ts';
import { runCli } from '../harness/cli-process.ts';
import {
  CLIENT,
  GCP_EMAIL as EMAIL,
  PATH_ROLE_ARN as ROLE,
  TENANT,
  WIF_PROVIDER as PROVIDER,
} from '../support/identities.ts';

const dir = mkdtempSync(join(tmpdir(), 'wiw-hostile-'));
const ISSUER = 'https://oidc.example.com/cluster-a';

function sa(namespace: string, name: string, annotations: Record<string, string>): string {
  return stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace, name, annotations } });
}

function secret(name: string, provider: string, config: Record<string, string>): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      namespace: 'apps',
      name,
      labels: { 'workload-identity-webhook.io/provider': provider },
      annotations: { 'workload-identity-webhook.io/service-account': 'uploader' },
    },
    stringData: { config: JSON.stringify(config) },
  });
}

const AWS = { 'eks.amazonaws.com/role-arn': ROLE };
// Role chaining: writer is assumed with [default]'s credentials (an AssumeRole trust and a permission).
const CHAINED = {
  ...AWS,
  'eks.amazonaws.com/role-arns': `writer=${ROLE.replace('s3-reader', 's3-writer')}`,
  'eks.amazonaws.com/source-profiles': 'writer=default',
};
const POD_IDENTITY = { 'eks.amazonaws.com/pod-identity-role-arn': ROLE };
const AZURE = { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT };
const GCP = {
  'cloud.google.com/workload-identity-provider': PROVIDER,
  'cloud.google.com/service-account-email': EMAIL,
};

/** Every field a tenant controls, per cloud, with each hostile value in turn. */
function hostileAccounts(): string[] {
  const docs: string[] = [];
  HOSTILE.forEach((bad, n) => {
    docs.push(
      sa('evil', `aws-arn-${n}`, { 'eks.amazonaws.com/role-arn': `${ROLE}${bad}` }),
      sa('evil', `aws-aud-${n}`, { ...AWS, 'eks.amazonaws.com/audience': bad }),
      sa('evil', `az-client-${n}`, { ...AZURE, 'azure.workload.identity/client-id': bad }),
      sa('evil', `az-tenant-${n}`, { ...AZURE, 'azure.workload.identity/tenant-id': bad }),
      sa('evil', `gcp-provider-${n}`, {
        ...GCP,
        'cloud.google.com/workload-identity-provider': `projects/1/locations/global/workloadIdentityPools/${bad}/providers/p`,
      }),
      sa('evil', `gcp-email-${n}`, {
        ...GCP,
        'cloud.google.com/service-account-email': `a${bad}@p.iam.gserviceaccount.com`,
      }),
      sa('evil', `gcp-aud-${n}`, { ...GCP, 'cloud.google.com/audience': bad }),
      sa(bad, 'in-hostile-namespace', AWS),
      sa('evil', bad, AZURE),
      sa('evil', `aws-source-${n}`, { ...CHAINED, 'eks.amazonaws.com/source-profiles': `writer=${bad}` }),
      sa('evil', `aws-chained-${n}`, { ...CHAINED, 'eks.amazonaws.com/source-profiles': `${bad}=default` }),
      sa('evil', `pi-arn-${n}`, { 'eks.amazonaws.com/pod-identity-role-arn': `${ROLE}${bad}` }),
      sa(bad, 'pi-in-hostile-namespace', POD_IDENTITY),
      secret(`aws-secret-${n}`, 'aws', { roleARN: `${ROLE}${bad}` }),
      secret(`azure-secret-${n}`, 'azure', { clientID: bad, tenantID: TENANT }),
    );
  });
  return docs;
}

/**
 * The EKS Pod Identity associations file: a file, so its names were never checked by the API
 * server. Hostile namespace and ServiceAccount names; a hostile roleArn is refused where it is read.
 */
function associationsFile(): string {
  const identities = [
    { namespace: 'apps', serviceAccount: 'pod-identity', roleArn: ROLE },
    ...HOSTILE.flatMap((bad) => [
      { namespace: bad, serviceAccount: 'x', roleArn: ROLE },
      { namespace: 'evil', serviceAccount: bad, roleArn: ROLE },
    ]),
  ];
  const path = join(dir, 'associations.json');
  writeFileSync(path, JSON.stringify({ identities }));
  return path;
}

function manifests(docs: string[]): string {
  const path = join(dir, `m${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, docs.join('---\n'));
  return path;
}

/** Runs text as a bash script in an empty folder; returns each recorded argv and the files left. */
function runScript(script: string): { calls: string[][]; files: string[]; stderr: string } {
  const work = mkdtempSync(join(dir, 'run-'));
  const record = join(dir, `record-${Math.random().toString(36).slice(2)}`);
  writeFileSync(record, '');
  const prelude = `
rec() { printf '%s\\0' "$@" >>"$WIW_RECORD"; printf '\\n' >>"$WIW_RECORD"; }
aws() { rec aws "$@"; }
gcloud() { rec gcloud "$@"; }
az() {
  rec az "$@"
  if [ "$1 $2" = "identity list" ]; then echo "looked-up"; fi
}
command_not_found_handle() { rec UNEXPECTED "$@"; return 127; }
`;
  const r = spawnSync('/bin/bash', ['--norc', '--noprofile', '-c', prelude + script], {
    cwd: work,
    env: { PATH: '', WIW_RECORD: record },
    encoding: 'utf8',
  });
  const calls = readFileSync(record, 'utf8')
    .split('\0\n')
    .filter((line) => line !== '')
    .map((line) => line.split('\0'));
  return { calls, files: readdirSync(work), stderr: r.stderr };
}

/** The argv each command must have, from the JSON report of the same run. */
function intended(report: TrustReport): string[][] {
  const calls: string[][] = [];
  for (const p of report.aws?.oidcProviders ?? [])
    calls.push(['aws', 'iam', 'create-open-id-connect-provider', '--url', p.url, '--client-id-list', ...p.clientIds]);
  for (const r of report.aws?.roles ?? [])
    calls.push([
      'aws',
      'iam',
      'update-assume-role-policy',
      '--role-name',
      r.roleName,
      '--policy-document',
      JSON.stringify(r.trustPolicy),
    ]);
  for (const p of report.aws?.rolePermissions ?? [])
    calls.push([
      'aws',
      'iam',
      'put-role-policy',
      '--role-name',
      p.roleName,
      '--policy-name',
      p.policyName,
      '--policy-document',
      JSON.stringify(p.policy),
    ]);
  for (const a of report.aws?.podIdentityAssociations ?? [])
    if (a.roleArn && !a.problem)
      calls.push([
        'aws',
        'eks',
        'create-pod-identity-association',
        '--cluster-name',
        report.aws!.clusterName!,
        '--namespace',
        a.namespace,
        '--service-account',
        a.serviceAccount,
        '--role-arn',
        a.roleArn,
      ]);
  for (const i of report.azure?.identities ?? []) {
    const list = (field: string) => [
      'az',
      'identity',
      'list',
      '--query',
      `[?clientId=='${i.clientId}'].${field} | [0]`,
      '-o',
      'tsv',
    ];
    for (const c of i.federatedCredentials) {
      calls.push(list('name'), list('resourceGroup'));
      calls.push([
        'az',
        'identity',
        'federated-credential',
        'create',
        '--name',
        c.name,
        '--identity-name',
        'looked-up',
        '--resource-group',
        'looked-up',
        '--issuer',
        c.issuer,
        '--subject',
        c.subject,
        '--audiences',
        ...c.audiences,
      ]);
    }
    for (const c of i.federatedCredentials)
      calls.push([
        'az',
        'ad',
        'app',
        'federated-credential',
        'create',
        '--id',
        i.clientId,
        '--parameters',
        JSON.stringify(c),
      ]);
  }
  const gcp = report.gcp;
  for (const p of gcp?.providers ?? [])
    calls.push([
      'gcloud',
      'iam',
      'workload-identity-pools',
      'providers',
      'create-oidc',
      p.provider,
      `--project=${p.projectNumber}`,
      '--location=global',
      `--workload-identity-pool=${p.pool}`,
      `--issuer-uri=${p.issuerUri}`,
      `--allowed-audiences=${p.allowedAudiences.join(',')}`,
      '--attribute-mapping=google.subject=assertion.sub',
    ]);
  for (const s of gcp?.serviceAccounts ?? [])
    for (const member of s.binding.members)
      calls.push([
        'gcloud',
        'iam',
        'service-accounts',
        'add-iam-policy-binding',
        s.email,
        `--role=${s.binding.role}`,
        `--member=${member}`,
      ]);
  for (const d of gcp?.directAccess ?? [])
    calls.push([
      'gcloud',
      'projects',
      'add-iam-policy-binding',
      'PROJECT_ID',
      '--role=ROLE',
      `--member=${d.principal}`,
    ]);
  return calls;
}

describe('trust against hostile annotation values', () => {
  const benign = [
    sa('apps', 'reader', { ...AWS, 'eks.amazonaws.com/audience': 'api://sts.example.com' }),
    sa('apps', 'azure-app', AZURE),
    sa('apps', 'gcp-app', GCP),
    sa('apps', 'gcp-direct', { 'cloud.google.com/workload-identity-provider': PROVIDER }),
    sa('apps', 'uploader', {}),
    sa('apps', 'pod-identity', POD_IDENTITY),
    sa('apps', 'chained', CHAINED),
  ];
  const file = manifests([...benign, ...hostileAccounts()]);
  const podIdentity = ['--aws-container-credentials-config', associationsFile(), '--aws-eks-cluster-name', 'prod'];
  const text = runCli(['trust', '-f', file, '--issuer', ISSUER, ...podIdentity]);
  const json = runCli(['trust', '-f', file, '--issuer', ISSUER, '-o', 'json', ...podIdentity]);
  const report = JSON.parse(json.stdout) as TrustReport;

  test('only the benign identities get commands; every hostile one is a FAIL line or left out, exit 1', () => {
    assert.equal(text.code, 1, text.stderr);
    assert.equal(json.code, 1, json.stderr);
    assert.deepEqual(
      report.identities.map((i) => i.source),
      [
        'ServiceAccount apps/reader',
        'ServiceAccount apps/azure-app',
        'ServiceAccount apps/gcp-app',
        'ServiceAccount apps/gcp-direct',
        'ServiceAccount apps/chained',
        'ServiceAccount apps/chained',
      ],
    );
    // Each hostile object is a FAIL line or, when the webhook itself refuses it, left out with a warning.
    const failed = new Set(report.failures?.map((f) => f.source));
    const leftOut = (source: string) => text.stderr.split('\n').some((l) => l.startsWith(`warning: ${source}: `));
    for (const kind of [
      'aws-arn',
      'aws-aud',
      'aws-source',
      'aws-chained',
      'az-client',
      'az-tenant',
      'gcp-provider',
      'gcp-email',
      'gcp-aud',
    ])
      for (let n = 0; n < HOSTILE.length; n++) {
        const source = `ServiceAccount evil/${kind}-${n}`;
        assert.ok(failed.has(source) || leftOut(source), `${source} has a FAIL line or is left out`);
      }
    assert.ok(failed.size >= 4 * HOSTILE.length, 'values the webhook tolerates reach trust and fail there');
    // EKS Pod Identity: every hostile annotation, and every hostile name of the file, a FAIL line.
    const podIdentityFails = new Set(
      report.findings?.filter((f) => f.check === 'pod-identity-associations').map((f) => f.subject),
    );
    for (let n = 0; n < HOSTILE.length; n++)
      assert.ok(podIdentityFails.has(`ServiceAccount evil/pi-arn-${n}`), `pi-arn-${n} has a FAIL line`);
    for (const bad of HOSTILE) {
      assert.ok(podIdentityFails.has(`ServiceAccount ${bad}/x`), `file namespace ${JSON.stringify(bad)}`);
      assert.ok(podIdentityFails.has(`ServiceAccount evil/${bad}`), `file name ${JSON.stringify(bad)}`);
    }
    assert.deepEqual(
      report.aws?.podIdentityAssociations.filter((a) => !a.problem).map((a) => `${a.namespace}/${a.serviceAccount}`),
      ['apps/pod-identity'],
      'only the benign association is printed',
    );
    for (const line of text.stdout.split('\n').filter((l) => l.includes('FAIL')))
      assert.ok(line.startsWith('# FAIL '), line);
  });

  test('run as a script, only the intended commands run, each with exactly the intended argv', () => {
    const run = runScript(text.stdout);
    assert.deepEqual(run.files, [], 'no file was created');
    assert.deepEqual(
      run.calls.filter((c) => c[0] === 'UNEXPECTED'),
      [],
      'no other command ran',
    );
    const expected = intended(report);
    assert.ok(expected.length >= 9, 'every cloud has commands');
    assert.ok(
      expected.some((c) => c.join(' ').startsWith('aws iam put-role-policy --role-name s3-reader ')),
      "the benign chain's permission is among them",
    );
    assert.ok(
      expected.some((c) => c.join(' ').startsWith('aws eks create-pod-identity-association --cluster-name prod ')),
      'the benign Pod Identity association is among them',
    );
    assert.deepEqual(run.calls, expected);
    assert.equal(run.stderr, '');
  });

  test('every line of the text is a comment, blank, or a command of aws, az or gcloud', () => {
    for (const line of text.stdout.split('\n'))
      assert.match(line, /^(#.*|)$|^(aws|az|gcloud) /, `line ${JSON.stringify(line)}`);
    assert.doesNotMatch(text.stdout, /[\u2028\u2029\u202e\r]/);
  });

  test('a hostile roleArn in the associations file, or --aws-eks-cluster-name, is refused before anything is printed', () => {
    for (const bad of HOSTILE) {
      const path = join(dir, 'bad-associations.json');
      writeFileSync(
        path,
        JSON.stringify({ identities: [{ namespace: 'apps', serviceAccount: 'x', roleArn: `${ROLE}${bad}` }] }),
      );
      const r = runCli(['trust', '-f', file, '--issuer', ISSUER, '--aws-container-credentials-config', path]);
      assert.equal(r.code, 2, `${JSON.stringify(bad)}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /identities\[0\]\.roleArn .* is not an IAM role ARN/);
      const c = runCli(['trust', '-f', file, '--issuer', ISSUER, '--aws-eks-cluster-name', `prod${bad}`]);
      assert.equal(c.code, 2, `${JSON.stringify(bad)}: ${c.stderr}`);
      assert.equal(c.stdout, '');
      assert.match(c.stderr, /--aws-eks-cluster-name=.* is not an EKS cluster name/);
    }
  });

  test('a hostile --issuer is refused before anything is printed', () => {
    for (const bad of HOSTILE) assert.ok(issuerProblem(`https://oidc.example.com/${bad}`), JSON.stringify(bad));
    for (const bad of HOSTILE.slice(0, 2)) {
      const r = runCli(['trust', '-f', file, '--issuer', `https://oidc.example.com/${bad}`]);
      assert.equal(r.code, 2, `${JSON.stringify(bad)}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /is not an issuer URL/);
      assert.doesNotMatch(r.stderr, /\n.*touch pwned.*\n[\s\S]*\n/, 'the value stays on one line');
    }
  });

  test('issuer publish refuses a hostile --issuer and quotes the flags it prints', () => {
    const key = join(dir, 'sa.pub');
    writeFileSync(
      key,
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }),
    );
    for (const bad of HOSTILE.slice(0, 2)) {
      const r = runCli([
        'issuer',
        'publish',
        '--dir',
        join(dir, 'site'),
        '--key-file',
        key,
        '--issuer',
        `https://o.example.com/${bad}`,
      ]);
      assert.equal(r.code, 2, r.stderr);
    }
    const ok = runCli(['issuer', 'publish', '--dir', join(dir, 'site'), '--key-file', key, '--issuer', ISSUER]);
    assert.equal(ok.code, 0, ok.stderr);
    const flags = ok.stdout.split('\n').slice(-3, -1).join(' ');
    const run = runScript(`kube_apiserver() { rec "$@"; }; kube_apiserver ${flags}`);
    assert.deepEqual(run.calls, [
      [`--service-account-issuer=${ISSUER}`, `--service-account-jwks-uri=${ISSUER}/openid/v1/jwks`],
    ]);
  });
});

describe('shell text helpers', () => {
  test('shellQuote: bash reads back exactly the word given, for any string', () => {
    // Seeded: every printable ASCII, controls, quotes, and astral and look-alike characters.
    let seed = 0x9e3779b9;
    const next = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) / 2 ** 24;
    const alphabet = [...Array.from({ length: 127 }, (_, i) => String.fromCharCode(i + 1)), 'é', '＄', '\u2028', '😀'];
    const words = ["'", '"', "it's", '!', '$', '\\', '', ' ', '-n', '--x=$(y)', "[?a=='b'] | [0]"];
    for (let n = 0; n < 400; n++) {
      let w = '';
      const len = Math.floor(next() * 12);
      for (let i = 0; i < len; i++) w += alphabet[Math.floor(next() * alphabet.length)];
      words.push(w);
    }
    const script = `printf '%s\\0' ${words.map(shellQuote).join(' ')}`;
    const r = spawnSync('bash', ['--norc', '--noprofile', '-c', script], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin' },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.split('\0').slice(0, -1), words);
  });

  test('a comment stays one line and shows no control characters', () => {
    for (const bad of HOSTILE) {
      const c = shellComment(`client id ${bad}`);
      assert.equal(c.split(/\r|\n|\u2028|\u2029/).length, 1, JSON.stringify(c));
      assert.ok(c.startsWith('# '));
      assert.equal(printable(bad), printable(printable(bad)), 'nothing left to escape');
      assert.doesNotMatch(printable(bad), /[\n\r\u2028\u2029\u202e]/);
    }
  });
});
