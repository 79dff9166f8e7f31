// What the peers' users ask for and the peers do not give (issue 22 §3), through the same core
// as `serve`: AWS bare role names (--aws-compose-role-arn), malformed ARNs outside --strict, a
// region per ServiceAccount and Pod, a region envFrom may set, several roles per Pod; Azure a
// client id per container; GCP a project for direct access and several providers.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { completeConfig, loadConfig } from '../../src/config.ts';
import { ConfigError, isDenial } from '../../src/errors.ts';
import { readInstanceIdentity } from '../../src/clouds/aws/imds.ts';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod, plan, resolve } from '../../src/mutate/pod.ts';
import { compilePolicy } from '../../src/policy/compile.ts';
import { policySet } from '../../src/policy/evaluate.ts';
import { podPolicy, staticPolicyGate } from '../../src/policy/gate.ts';
import { loadPolicyFile } from '../../src/policy/load.ts';
import type { CompiledPolicy } from '../../src/policy/model.ts';
import { cloudModule, createProviders, providerOptionsFromConfig } from '../../src/clouds/index.ts';
import type { NamespaceView } from '../../src/kube/types.ts';
import { identitiesOfServiceAccounts } from '../../src/trust/identities.ts';
import { apply, config, envOf, pod, providers, sa } from '../support/builders.ts';
import {
  AWS_ACCOUNT,
  BILLING_EMAIL,
  BILLING_PROVIDER,
  CLIENT,
  GCP_EMAIL,
  OTHER_ACCOUNT_ROLE_ARN as WRITER,
  OTHER_AWS_ACCOUNT,
  OTHER_ID,
  PATH_ROLE_ARN,
  POOL,
  PROJECT_NUMBER,
  ROLE_ARN as ARN,
  roleArn,
  TENANT,
  WIF_PROVIDER,
} from '../support/identities.ts';

const TOKEN = '/var/run/secrets/eks.amazonaws.com/serviceaccount/token';

function run(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  return mutatePod(providers(flags), {
    pod: p,
    namespace: 'team-a',
    serviceAccount: annotations ? sa(annotations) : undefined,
  });
}

function admitted(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  const result = run(p, annotations, flags);
  assert.ok(result.allowed, result.allowed ? '' : result.denial.message);
  return { pod: apply(p, result.patch), warnings: result.warnings, injections: result.injections };
}

function denied(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  const result = run(p, annotations, flags);
  assert.equal(result.allowed, false, 'expected a denial');
  return result.allowed ? assert.fail() : result.denial;
}

const withContainers = (...containers: Record<string, unknown>[]) =>
  pod({ spec: { containers: containers.map((c) => ({ image: 'app', ...c })) } });

describe('AWS: --aws-compose-role-arn, as the peer', () => {
  const compose = { 'aws-compose-role-arn': 'true', 'aws-compose-role-arn-account': AWS_ACCOUNT };

  test("a role name or path completes to the account's ARN; a value with arn: anywhere is left as written", () => {
    const env = (value: string, flags: Record<string, string> = compose) =>
      envOf(admitted(pod(), { 'eks.amazonaws.com/role-arn': value }, flags).pod.spec!.containers![0]).AWS_ROLE_ARN;
    assert.equal(env('s3-reader'), ARN);
    assert.equal(env('team/s3-reader'), PATH_ROLE_ARN);
    assert.equal(env(WRITER), WRITER);
    // Without the flag a bare name is a malformed ARN: injected as written, with a warning.
    assert.equal(env('s3-reader', {}), 's3-reader');
  });

  test('the partition: the flag, else the one of --aws-default-region, else aws', () => {
    const arn = (flags: Record<string, string>) => config({ ...compose, ...flags }).awsRoleArnBase;
    assert.deepEqual(arn({}), { account: '111122223333', partition: 'aws' });
    assert.deepEqual(arn({ 'aws-default-region': 'cn-north-1' }), { account: '111122223333', partition: 'aws-cn' });
    assert.deepEqual(arn({ 'aws-default-region': 'us-gov-west-1' }), {
      account: '111122223333',
      partition: 'aws-us-gov',
    });
    assert.deepEqual(arn({ 'aws-compose-role-arn-partition': 'aws-iso-b', 'aws-default-region': 'cn-north-1' }), {
      account: '111122223333',
      partition: 'aws-iso-b',
    });
    const out = admitted(
      pod(),
      { 'eks.amazonaws.com/role-arn': 'r' },
      { ...compose, 'aws-default-region': 'cn-north-1' },
    );
    assert.equal(envOf(out.pod.spec!.containers![0]).AWS_ROLE_ARN, 'arn:aws-cn:iam::111122223333:role/r');
    assert.deepEqual(out.injections[0].identity, {
      roleArn: 'arn:aws-cn:iam::111122223333:role/r',
      account: '111122223333',
      partition: 'aws-cn',
      audience: 'sts.amazonaws.com',
    });
  });

  test('a completed value that is still no role ARN says what it was completed to; --strict refuses it', () => {
    const d = denied(pod(), { 'eks.amazonaws.com/role-arn': 'bad name' }, { ...compose, strict: 'true' });
    assert.equal(d.reason, 'InvalidRoleArn');
    assert.equal(
      d.message,
      'ServiceAccount team-a/app annotation eks.amazonaws.com/role-arn="bad name" (completed by --aws-compose-role-arn to "arn:aws:iam::111122223333:role/bad name") is not an IAM role ARN; expected arn:<partition>:iam::<12-digit account>:role/<optional path/><name>, or a role name or path',
    );
    const out = admitted(pod(), { 'eks.amazonaws.com/role-arn': 'bad name' }, compose);
    assert.equal(envOf(out.pod.spec!.containers![0]).AWS_ROLE_ARN, 'arn:aws:iam::111122223333:role/bad name');
    assert.equal(out.warnings.length, 1);
  });

  test('the account and partition flags need --aws-compose-role-arn, and are checked', () => {
    assert.throws(() => config({ 'aws-compose-role-arn-account': AWS_ACCOUNT }), ConfigError);
    assert.throws(
      () => config({ 'aws-compose-role-arn': 'true', 'aws-compose-role-arn-account': '1234' }),
      /--aws-compose-role-arn-account="1234" is not an AWS account id/,
    );
    assert.throws(
      () => config({ 'aws-compose-role-arn': 'true', 'aws-compose-role-arn-partition': 'gcp' }),
      /is not an AWS partition/,
    );
  });
});

/** A strict stand-in of the EC2 instance metadata service (IMDSv2): token first, then the document. */
describe('AWS: --aws-compose-role-arn without an account reads the instance identity document', () => {
  let server: Server;
  let endpoint: string;
  const TOKEN_VALUE = 'imds-session-token';
  let mode: 'v2' | 'v1-only' | 'down' = 'v2';
  let region = 'us-gov-west-1';
  const seen: string[] = [];

  before(async () => {
    server = createServer((req: IncomingMessage, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (mode === 'down') return void res.writeHead(500).end();
      if (req.url === '/latest/api/token') {
        if (mode === 'v1-only') return void res.writeHead(404).end();
        if (req.method !== 'PUT' || req.headers['x-aws-ec2-metadata-token-ttl-seconds'] === undefined)
          return void res.writeHead(400).end();
        return void res.writeHead(200).end(TOKEN_VALUE);
      }
      if (req.url === '/latest/dynamic/instance-identity/document' && req.method === 'GET') {
        if (mode === 'v2' && req.headers['x-aws-ec2-metadata-token'] !== TOKEN_VALUE)
          return void res.writeHead(401).end();
        return void res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(JSON.stringify({ accountId: '777788889999', region, instanceId: 'i-0123' }));
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  test('IMDSv2: the account and the partition of its region, as the peer derives them', async () => {
    mode = 'v2';
    region = 'us-gov-west-1';
    seen.length = 0;
    assert.deepEqual(await readInstanceIdentity(endpoint), { accountId: '777788889999', region: 'us-gov-west-1' });
    assert.deepEqual(seen, ['PUT /latest/api/token', 'GET /latest/dynamic/instance-identity/document']);
  });

  test('completeConfig fills the account from the document; providers then complete bare names', async () => {
    mode = 'v2';
    region = 'cn-northwest-1';
    const before = process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT;
    process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = endpoint;
    try {
      const c = await completeConfig(loadConfig(new Map([['aws-compose-role-arn', 'true']]), {}));
      assert.deepEqual(c.awsRoleArnBase, { account: '777788889999', partition: 'aws-cn' });
      const result = mutatePod(createProviders(c), {
        pod: pod(),
        namespace: 'team-a',
        serviceAccount: sa({ 'eks.amazonaws.com/role-arn': 'reader' }),
      });
      assert.ok(result.allowed);
      assert.equal(
        envOf(apply(pod(), result.patch).spec!.containers![0]).AWS_ROLE_ARN,
        'arn:aws-cn:iam::777788889999:role/reader',
      );
    } finally {
      if (before === undefined) delete process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT;
      else process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = before;
    }
  });

  test('an IMDSv1-only endpoint (no token endpoint) is read without a token', async () => {
    mode = 'v1-only';
    region = 'eu-west-1';
    assert.deepEqual(await readInstanceIdentity(endpoint), { accountId: '777788889999', region: 'eu-west-1' });
  });

  test('an endpoint that fails or is absent is a start-up error naming the flag that avoids it', async () => {
    mode = 'down';
    await assert.rejects(readInstanceIdentity(endpoint), (err: Error) => {
      assert.ok(err instanceof ConfigError);
      assert.match(
        err.message,
        /cannot read the EC2 instance identity document at http:\/\/127\.0\.0\.1:\d+ \(session token: HTTP 500\); give the account with --aws-compose-role-arn-account/,
      );
      return true;
    });
    // Nothing listens on port 9 of loopback: refused at once.
    await assert.rejects(readInstanceIdentity('http://127.0.0.1:9'), /session token: fetch failed/);
  });
});

describe('AWS: a region per ServiceAccount and per Pod (AWS #149, #238)', () => {
  const region = (p: Pod, annotations: Record<string, string>, flags: Record<string, string> = {}) => {
    const env = envOf(
      admitted(p, { 'eks.amazonaws.com/role-arn': ARN, ...annotations }, flags).pod.spec!.containers![0],
    );
    assert.equal(env.AWS_REGION, env.AWS_DEFAULT_REGION);
    return env.AWS_REGION;
  };

  test("the Pod's annotation over the ServiceAccount's over --aws-default-region", () => {
    const flags = { 'aws-default-region': 'us-gov-west-1' };
    assert.equal(region(pod(), {}, flags), 'us-gov-west-1');
    assert.equal(region(pod(), { 'eks.amazonaws.com/region': 'us-east-1' }, flags), 'us-east-1');
    assert.equal(region(pod(), { 'eks.amazonaws.com/region': 'us-east-1' }), 'us-east-1');
    const p = pod({ annotations: { 'eks.amazonaws.com/region': 'eu-central-1' } });
    assert.equal(region(p, { 'eks.amazonaws.com/region': 'us-east-1' }, flags), 'eu-central-1');
    assert.equal(region(p, {}), 'eu-central-1');
    assert.equal(region(pod(), {}), undefined);
  });

  test('the annotation takes the configured prefix', () => {
    const env = envOf(
      admitted(
        pod(),
        { 'corp.example.com/role-arn': ARN, 'corp.example.com/region': 'ap-south-1' },
        { 'aws-annotation-prefix': 'corp.example.com' },
      ).pod.spec!.containers![0],
    );
    assert.equal(env.AWS_REGION, 'ap-south-1');
  });

  test('a value that is no region name denies, naming where it was written', () => {
    const d = denied(pod({ annotations: { 'eks.amazonaws.com/region': 'EU West' } }), {
      'eks.amazonaws.com/role-arn': ARN,
    });
    assert.equal(d.reason, 'InvalidAnnotation');
    assert.equal(
      d.message,
      'Pod annotation eks.amazonaws.com/region="EU West" is not an AWS region name (lower-case letters, digits and hyphens, for example eu-west-1)',
    );
    assert.match(
      denied(pod(), { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/region': '' }).message,
      /^ServiceAccount team-a\/app annotation eks\.amazonaws\.com\/region="" is not an AWS region name/,
    );
  });

  test("a container's own region still wins", () => {
    const p = withContainers({ name: 'app', env: [{ name: 'AWS_REGION', value: 'sa-east-1' }] });
    const env = envOf(
      admitted(p, { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/region': 'us-east-1' }).pod.spec!
        .containers![0],
    );
    assert.equal(env.AWS_REGION, 'sa-east-1');
    assert.equal('AWS_DEFAULT_REGION' in env, false);
  });
});

describe('AWS: a region the container sets through envFrom is not shadowed (AWS #248)', () => {
  const flags = { 'aws-default-region': 'eu-central-1' };
  const irsa = { 'eks.amazonaws.com/role-arn': ARN };
  const configMap = { configMapRef: { name: 'settings' } };

  test('a container whose envFrom may set the region gets none, the others do; a warning names it', () => {
    const p = withContainers(
      { name: 'cron', envFrom: [configMap] },
      { name: 'plain' },
      { name: 'prefixed', envFrom: [{ prefix: 'APP_', secretRef: { name: 's' } }] },
      { name: 'aws-prefixed', envFrom: [{ prefix: 'AWS_', configMapRef: { name: 'aws' } }] },
    );
    const out = admitted(p, irsa, flags);
    const [cron, plain, prefixed, awsPrefixed] = out.pod.spec!.containers!.map(envOf);
    for (const env of [cron, awsPrefixed]) {
      assert.equal('AWS_REGION' in env || 'AWS_DEFAULT_REGION' in env, false);
      assert.equal(env.AWS_ROLE_ARN, ARN, 'the identity itself is still injected');
    }
    for (const env of [plain, prefixed]) assert.equal(env.AWS_REGION, 'eu-central-1');
    assert.deepEqual(out.warnings, [
      'containers "cron", "aws-prefixed": AWS_REGION and AWS_DEFAULT_REGION (eu-central-1) are not injected because envFrom may set them and an env entry would override it; set them in env or in that ConfigMap or Secret, or name the region in the Pod annotation eks.amazonaws.com/region',
    ]);
  });

  test("the Pod's own region annotation is injected anyway; a region in env needs no warning", () => {
    const p = pod({
      annotations: { 'eks.amazonaws.com/region': 'eu-west-1' },
      spec: { containers: [{ name: 'app', image: 'app', envFrom: [configMap] }] },
    });
    const out = admitted(p, irsa, flags);
    assert.equal(envOf(out.pod.spec!.containers![0]).AWS_REGION, 'eu-west-1');
    assert.deepEqual(out.warnings, []);
    const own = withContainers({ name: 'app', envFrom: [configMap], env: [{ name: 'AWS_REGION', value: 'x-1' }] });
    assert.deepEqual(admitted(own, irsa, flags).warnings, []);
  });

  test('init containers follow the same rule; skipped containers are not named', () => {
    const p = pod({
      annotations: { 'eks.amazonaws.com/skip-containers': 'skipped' },
      spec: {
        initContainers: [{ name: 'init', image: 'app', envFrom: [configMap] }],
        containers: [
          { name: 'app', image: 'app' },
          { name: 'skipped', image: 'app', envFrom: [configMap] },
        ],
      },
    });
    const out = admitted(p, irsa, flags);
    assert.equal('AWS_REGION' in envOf(out.pod.spec!.initContainers![0]), false);
    assert.equal(envOf(out.pod.spec!.containers![0]).AWS_REGION, 'eu-central-1');
    assert.match(out.warnings[0], /^container "init": /);
  });

  test('a ServiceAccount region yields to envFrom like the flag does', () => {
    const p = withContainers({ name: 'app', envFrom: [configMap] });
    const out = admitted(p, { ...irsa, 'eks.amazonaws.com/region': 'us-east-2' });
    assert.equal('AWS_REGION' in envOf(out.pod.spec!.containers![0]), false);
    assert.match(out.warnings[0], /\(us-east-2\) are not injected/);
  });

  test('admitting the stored Pod again changes nothing', () => {
    const p = withContainers({ name: 'cron', envFrom: [configMap] }, { name: 'plain' });
    const first = admitted(p, irsa, flags).pod;
    const again = run(first, irsa, flags);
    assert.ok(again.allowed);
    assert.deepEqual(again.patch, []);
  });
});

describe('AWS: several roles in one Pod, one profile each (AWS #20)', () => {
  const CONFIG = '/var/run/secrets/eks.amazonaws.com/serviceaccount/config';
  const file = (profiles: [string, string][]) =>
    profiles
      .map(
        ([name, arn]) =>
          `${name === 'default' ? '[default]' : `[profile ${name}]`}\nrole_arn = ${arn}\nweb_identity_token_file = ${TOKEN}`,
      )
      .join('\n\n') + '\n';

  test('a shared config file, projected from a Pod annotation into the token volume, and AWS_CONFIG_FILE', () => {
    const out = admitted(
      pod(),
      { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/role-arns': `writer=${WRITER}, audit=${ARN}` },
      { 'aws-default-region': 'eu-west-1' },
    );
    assert.equal(
      out.pod.metadata!.annotations!['workload-identity-webhook.io/aws-config-file'],
      file([
        ['default', ARN],
        ['writer', WRITER],
        ['audit', ARN],
      ]),
    );
    assert.deepEqual(out.pod.spec!.volumes![0].projected!.sources, [
      { serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 86400, path: 'token' } },
      {
        downwardAPI: {
          items: [
            {
              path: 'config',
              fieldRef: {
                apiVersion: 'v1',
                fieldPath: "metadata.annotations['workload-identity-webhook.io/aws-config-file']",
              },
            },
          ],
        },
      },
    ]);
    // No AWS_ROLE_ARN beside the file: boto3 would take it over the profile's role_arn.
    assert.deepEqual(out.pod.spec!.containers![0].env, [
      { name: 'AWS_DEFAULT_REGION', value: 'eu-west-1' },
      { name: 'AWS_REGION', value: 'eu-west-1' },
      { name: 'AWS_CONFIG_FILE', value: CONFIG },
    ]);
  });

  test('every role is an identity: the default first, each profile named', () => {
    const { injections } = admitted(pod(), {
      'eks.amazonaws.com/role-arn': ARN,
      'eks.amazonaws.com/role-arns': `writer=${WRITER}`,
    });
    assert.deepEqual(injections[0].identity, {
      roleArn: ARN,
      account: '111122223333',
      partition: 'aws',
      audience: 'sts.amazonaws.com',
      profile: 'default',
    });
    assert.deepEqual(injections[0].additionalIdentities, [
      {
        roleArn: WRITER,
        account: OTHER_AWS_ACCOUNT,
        partition: 'aws',
        audience: 'sts.amazonaws.com',
        profile: 'writer',
      },
    ]);
  });

  test('without role-arn the profile named default, else the first listed (kept under its name too), is [default]', () => {
    const ann = (p: Pod) => p.metadata!.annotations!['workload-identity-webhook.io/aws-config-file'];
    const out = admitted(pod(), { 'eks.amazonaws.com/role-arns': `writer=${WRITER}\nreader=${ARN}` });
    assert.equal(
      ann(out.pod),
      file([
        ['default', WRITER],
        ['writer', WRITER],
        ['reader', ARN],
      ]),
    );
    // One identity per role.
    assert.deepEqual(
      [out.injections[0].identity, ...out.injections[0].additionalIdentities!].map((i) => [i.roleArn, i.profile]),
      [
        [WRITER, 'default'],
        [ARN, 'reader'],
      ],
    );
    const named = admitted(pod(), { 'eks.amazonaws.com/role-arns': `writer=${WRITER};default=${ARN}` }).pod;
    assert.equal(
      ann(named),
      file([
        ['default', ARN],
        ['writer', WRITER],
      ]),
    );
  });

  test('bare role names complete with --aws-compose-role-arn', () => {
    const out = admitted(
      pod(),
      { 'eks.amazonaws.com/role-arns': 'reader=s3-reader,writer=team/s3-writer' },
      { 'aws-compose-role-arn': 'true', 'aws-compose-role-arn-account': AWS_ACCOUNT },
    ).pod;
    assert.equal(
      out.metadata!.annotations!['workload-identity-webhook.io/aws-config-file'],
      file([
        ['default', ARN],
        ['reader', ARN],
        ['writer', roleArn('team/s3-writer')],
      ]),
    );
  });

  test('nothing malformed goes into the file, with or without --strict', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ 'eks.amazonaws.com/role-arns': 'writer' }, /"writer" is not <profile>=<role>/],
      [{ 'eks.amazonaws.com/role-arns': ' , ' }, /names no role/],
      [{ 'eks.amazonaws.com/role-arns': `[x]=${ARN}` }, /profile "\[x\]" is not a profile name/],
      [{ 'eks.amazonaws.com/role-arns': `a=${ARN},a=${WRITER}` }, /profile "a" is named twice/],
      [
        { 'eks.amazonaws.com/role-arns': 'a=arn:aws:iam::1:role/x' },
        /profile a="arn:aws:iam::1:role\/x" is not an IAM role ARN/,
      ],
      [
        {
          'eks.amazonaws.com/role-arn': 'nope\nweb_identity_token_file = /etc/shadow',
          'eks.amazonaws.com/role-arns': `a=${ARN}`,
        },
        /annotation eks\.amazonaws\.com\/role-arn=[\s\S]* is not an IAM role ARN/,
      ],
      [
        { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/role-arns': `default=${WRITER}` },
        /names the default profile twice/,
      ],
    ];
    for (const [annotations, message] of cases) assert.match(denied(pod(), annotations).message, message);
  });

  test("a container's own web identity or config file wins; AWS_PROFILE is the container's to set", () => {
    const p = withContainers(
      { name: 'own-role', env: [{ name: 'AWS_ROLE_ARN', value: ARN }] },
      { name: 'own-file', env: [{ name: 'AWS_CONFIG_FILE', value: '/etc/aws/config' }] },
      { name: 'picks', env: [{ name: 'AWS_PROFILE', value: 'writer' }] },
    );
    const out = admitted(p, { 'eks.amazonaws.com/role-arns': `reader=${ARN},writer=${WRITER}` });
    const [ownRole, ownFile, picks] = out.pod.spec!.containers!.map(envOf);
    assert.equal('AWS_CONFIG_FILE' in ownRole, false);
    assert.equal(ownFile.AWS_CONFIG_FILE, '/etc/aws/config');
    assert.deepEqual(picks, { AWS_PROFILE: 'writer', AWS_CONFIG_FILE: CONFIG });
    for (const c of out.pod.spec!.containers!) assert.equal(c.volumeMounts!.length, 1, `${c.name} has the token mount`);
  });

  test('Windows Pods get Windows paths in the variable and in the file', () => {
    const p = pod({ spec: { nodeSelector: { 'kubernetes.io/os': 'windows' } } });
    const out = admitted(p, { 'eks.amazonaws.com/role-arns': `reader=${ARN}` }).pod;
    assert.equal(
      envOf(out.spec!.containers![0]).AWS_CONFIG_FILE,
      'C:\\var\\run\\secrets\\eks.amazonaws.com\\serviceaccount\\config',
    );
    assert.match(
      out.metadata!.annotations!['workload-identity-webhook.io/aws-config-file'],
      /^web_identity_token_file = C:\\var\\run\\secrets\\eks\.amazonaws\.com\\serviceaccount\\token$/m,
    );
  });

  test('a change of ServiceAccount removes the file and its variable with the rest', () => {
    const annotated = { 'eks.amazonaws.com/role-arns': `reader=${ARN}` };
    const first = admitted(pod(), annotated).pod;
    const moved = { ...first, spec: { ...first.spec, serviceAccountName: 'other' } };
    const result = mutatePod(providers(), { pod: moved, namespace: 'team-a', serviceAccount: sa({}, 'other') });
    assert.ok(result.allowed);
    const after = apply(moved, result.patch);
    assert.equal(after.metadata!.annotations?.['workload-identity-webhook.io/aws-config-file'], undefined);
    assert.equal(after.spec!.containers![0].env?.length ?? 0, 0);
    assert.equal(after.spec!.volumes?.length ?? 0, 0);
  });
});

const STARTER = new URL('../../charts/workload-identity-webhook/files/policies/namespace-labels.yaml', import.meta.url)
  .pathname;

/** The core with tenant policy, as admitPod wires it, for a Pod in namespace team-a. */
function judged(
  policies: CompiledPolicy[],
  labels: Record<string, string>,
  annotations: Record<string, string>,
  p: Pod = pod(),
  flags: Record<string, string> = {},
) {
  const ns: NamespaceView = { name: 'team-a', labels };
  const gate = staticPolicyGate(policySet(policies), providerOptionsFromConfig(config(flags)), [ns]);
  const judge = podPolicy(gate, ns)!;
  // The admission steps (admission/pods.ts): resolve, judge, plan.
  const admission = { pod: p, namespace: 'team-a', serviceAccount: sa(annotations) };
  const resolved = resolve(providers(flags), admission);
  if (isDenial(resolved)) return { allowed: false as const, denial: resolved };
  const kept = judge(admission, resolved);
  if (isDenial(kept)) return { allowed: false as const, denial: kept };
  return plan(admission, kept);
}

function starter(): CompiledPolicy {
  const [result] = loadPolicyFile(STARTER);
  assert.ok(result.ok);
  return result.policy;
}

function declaring(spec: unknown): CompiledPolicy {
  const r = compilePolicy({ name: 'declared', generation: 1, source: 'test', spec });
  assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems));
  return r.policy;
}

const account = (id: string) => ({ [`aws-account.workload-identity-webhook.io/${id}`]: 'true' });

describe('tenant policy judges every identity of a cloud in the Pod', () => {
  const roles = { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/role-arns': `writer=${WRITER}` };

  test("one profile's role in an account the namespace may not use denies the whole Pod", () => {
    const r = judged([starter()], account('111122223333'), roles);
    assert.equal(r.allowed, false);
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'PolicyDenied');
    assert.match(r.denial.message, /^namespace team-a may not use AWS account 444455556666; /);
    assert.doesNotMatch(r.denial.message, /111122223333/);
    const both = judged([starter()], { ...account(AWS_ACCOUNT), ...account(OTHER_AWS_ACCOUNT) }, roles);
    assert.ok(both.allowed, both.allowed ? '' : both.denial.message);
  });

  test('with identity providers declared, a profile in an undeclared account is untrusted', () => {
    const policy = declaring({
      identityProviders: [{ name: 'main', displayName: 'Main', aws: { accountIds: ['111122223333'] } }],
    });
    const r = judged([policy], {}, roles);
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'UntrustedIdentityProvider');
    assert.match(
      r.denial.message,
      /^AWS account 444455556666 \(partition aws\) of role arn:aws:iam::444455556666:role\/s3-writer is not/,
    );
  });

  test("container-profiles (AWS #147): a container's profile is judged as every role-arns role", () => {
    const perContainer = { ...roles, 'eks.amazonaws.com/container-profiles': 'app=writer' };
    const r = judged([starter()], account('111122223333'), perContainer);
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'PolicyDenied');
    assert.match(r.denial.message, /^namespace team-a may not use AWS account 444455556666; /);
  });

  test('a malformed role ARN admitted outside --strict matches no declared account', () => {
    const policy = declaring({
      identityProviders: [{ name: 'main', displayName: 'Main', aws: { accountIds: ['111122223333'] } }],
    });
    const r = judged([policy], {}, { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/a b' });
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'UntrustedIdentityProvider');
  });
});

describe('trust prints every identity', () => {
  test('each role of a ServiceAccount gets its trust policy, for the same subject and audience', () => {
    const { identities, problems } = identitiesOfServiceAccounts(providers(), [
      sa({ 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/role-arns': `writer=${WRITER}` }, 'jobs', 'batch'),
    ]);
    assert.deepEqual(problems, []);
    const report = cloudModule('aws').trust.report('https://oidc.example.com/c', identities, {
      settings: config(),
      accounts: [],
    }) as {
      roles: { roleArn: string; trustedBy: string[] }[];
      oidcProviders: { account: string }[];
    };
    assert.deepEqual(
      report.roles.map((r) => [r.roleArn, r.trustedBy]),
      [
        [ARN, ['ServiceAccount batch/jobs']],
        [WRITER, ['ServiceAccount batch/jobs']],
      ],
    );
    assert.deepEqual(
      report.oidcProviders.map((p) => p.account),
      [AWS_ACCOUNT, OTHER_AWS_ACCOUNT],
    );
  });
});

describe('trust and a role per container (AWS #147)', () => {
  test("container-profiles: the container's role is printed with its trust; a profile role-arns lacks is a problem named", () => {
    const { identities, problems } = identitiesOfServiceAccounts(providers(), [
      sa(
        {
          'eks.amazonaws.com/role-arn': ARN,
          'eks.amazonaws.com/role-arns': `writer=${WRITER}`,
          'eks.amazonaws.com/container-profiles': 'app=writer',
        },
        'jobs',
        'batch',
      ),
      sa(
        { 'eks.amazonaws.com/role-arns': `writer=${WRITER}`, 'eks.amazonaws.com/container-profiles': 'app=admin' },
        'typo',
        'batch',
      ),
    ]);
    assert.equal(problems.length, 1);
    assert.match(
      problems[0],
      /^ServiceAccount batch\/typo: .*container "app" names profile "admin", which is not one of the role-arns profiles/,
    );
    const report = cloudModule('aws').trust.report('https://oidc.example.com/c', identities, {
      settings: config(),
      accounts: [],
    }) as { roles: { roleArn: string; trustedBy: string[] }[] };
    assert.deepEqual(
      report.roles.map((r) => [r.roleArn, r.trustedBy]),
      [
        [ARN, ['ServiceAccount batch/jobs']],
        [WRITER, ['ServiceAccount batch/jobs']],
      ],
    );
  });
});

describe('Azure: a client id per container (Azure #408)', () => {
  const APP = CLIENT;
  const SIDECAR = OTHER_ID;
  const INIT = '11111111-2222-4333-8444-555555555555';
  const optedIn = (spec: Record<string, unknown>, annotations?: Record<string, string>) =>
    pod({ labels: { 'azure.workload.identity/use': 'true' }, annotations, spec });
  const spec = {
    initContainers: [{ name: 'migrate', image: 'app' }],
    containers: [
      { name: 'app', image: 'app' },
      { name: 'sync', image: 'app' },
    ],
  };

  test('each named container gets its own AZURE_CLIENT_ID; the others the ServiceAccount one', () => {
    const out = admitted(optedIn(spec), {
      'azure.workload.identity/client-id': APP,
      'azure.workload.identity/tenant-id': TENANT,
      'azure.workload.identity/container-client-ids': `sync=${SIDECAR}; migrate=${INIT}`,
    });
    const [migrate] = out.pod.spec!.initContainers!.map(envOf);
    const [app, sync] = out.pod.spec!.containers!.map(envOf);
    assert.equal(app.AZURE_CLIENT_ID, APP);
    assert.equal(sync.AZURE_CLIENT_ID, SIDECAR);
    assert.equal(migrate.AZURE_CLIENT_ID, INIT);
    for (const env of [app, sync, migrate]) {
      assert.equal(env.AZURE_TENANT_ID, TENANT);
      assert.equal(env.AZURE_FEDERATED_TOKEN_FILE, '/var/run/secrets/azure/tokens/azure-identity-token');
    }
    assert.deepEqual(
      out.pod.spec!.containers![1].env!.map((e) => e.name),
      ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_FEDERATED_TOKEN_FILE', 'AZURE_AUTHORITY_HOST'],
    );
    assert.deepEqual(
      out.injections[0].additionalIdentities!.map((i) => [i.clientId, i.tenantId]),
      [
        [SIDECAR, TENANT],
        [INIT, TENANT],
      ],
    );
  });

  test('without a ServiceAccount client id only the named containers get one; a skipped container none', () => {
    const p = optedIn(spec, { 'azure.workload.identity/skip-containers': 'migrate' });
    const out = admitted(p, {
      'azure.workload.identity/tenant-id': TENANT,
      'azure.workload.identity/container-client-ids': `sync=${SIDECAR}\nmigrate=${INIT}`,
    });
    assert.equal('AZURE_CLIENT_ID' in envOf(out.pod.spec!.containers![0]), false);
    assert.equal(envOf(out.pod.spec!.containers![1]).AZURE_CLIENT_ID, SIDECAR);
    assert.equal(out.pod.spec!.initContainers![0].env, undefined);
    assert.match(
      out.warnings.join('\n'),
      /AZURE_CLIENT_ID is not injected but into the containers of azure\.workload\.identity\/container-client-ids/,
    );
  });

  test("a container's own AZURE_CLIENT_ID still wins", () => {
    const p = optedIn({ containers: [{ name: 'sync', image: 'app', env: [{ name: 'AZURE_CLIENT_ID', value: APP }] }] });
    const out = admitted(p, {
      'azure.workload.identity/container-client-ids': `sync=${SIDECAR}`,
      'azure.workload.identity/tenant-id': TENANT,
    });
    assert.equal(envOf(out.pod.spec!.containers![0]).AZURE_CLIENT_ID, APP);
  });

  test('malformed entries are refused, with or without --strict', () => {
    const cases: [string, RegExp][] = [
      ['sync', /"sync" is not <container>=<client id>/],
      [`Sync=${SIDECAR}`, /"Sync" is not a container name/],
      [`sync=${SIDECAR};sync=${APP}`, /container "sync" is named twice/],
      ['sync=my-app', /the client id of container "sync", "my-app", is not a GUID/],
      [' ; ', /names no container/],
    ];
    for (const [value, message] of cases)
      assert.match(denied(optedIn(spec), { 'azure.workload.identity/container-client-ids': value }).message, message);
  });

  test('tenant policy judges every client id; trust prints a federated credential for each', () => {
    const policy = declaring({
      identityProviders: [{ name: 'corp', displayName: 'Corp', azure: { tenantId: TENANT } }],
      validations: [
        {
          name: 'approved-clients',
          expression: `identity.provider != 'azure' || identity.clientId in ['${APP}', '${SIDECAR}']`,
          message: 'unapproved client id',
        },
      ],
    });
    const annotations = {
      'azure.workload.identity/client-id': APP,
      'azure.workload.identity/container-client-ids': `sync=${SIDECAR};migrate=${INIT}`,
    };
    const r = judged([policy], {}, annotations, optedIn(spec));
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'PolicyDenied');
    assert.match(r.denial.message, /^unapproved client id/);
    const fine = judged(
      [policy],
      {},
      { ...annotations, 'azure.workload.identity/container-client-ids': `sync=${SIDECAR}` },
      optedIn(spec),
    );
    assert.ok(fine.allowed, fine.allowed ? '' : fine.denial.message);
    // The policy's only tenant is the default: every container's identity gets it.
    assert.equal(envOf(apply(optedIn(spec), fine.patch).spec!.containers![1]).AZURE_TENANT_ID, TENANT);

    const { identities } = identitiesOfServiceAccounts(providers({ 'azure-tenant-id': TENANT }), [
      sa(annotations, 'jobs', 'batch'),
    ]);
    const report = cloudModule('azure').trust.report('https://oidc.example.com/c', identities, {
      settings: config(),
      accounts: [],
    }) as {
      identities: { clientId: string; federatedCredentials: { subject: string }[] }[];
    };
    assert.deepEqual(
      report.identities.map((i) => [i.clientId, i.federatedCredentials.map((c) => c.subject)]),
      [APP, SIDECAR, INIT].map((id) => [id, ['system:serviceaccount:batch:jobs']]),
    );
  });
});

describe('GCP: a project for direct resource access (pfnet PR #138)', () => {
  const PROVIDER = WIF_PROVIDER;

  test('cloud.google.com/project-id sets CLOUDSDK_CORE_PROJECT and GOOGLE_CLOUD_PROJECT without a service account', () => {
    for (const key of [
      'gcp.auth.fluxcd.io/workload-identity-provider',
      'cloud.google.com/workload-identity-provider',
    ]) {
      const out = admitted(pod(), { [key]: PROVIDER, 'cloud.google.com/project-id': 'my-project' });
      const env = envOf(out.pod.spec!.containers![0]);
      assert.equal(env.CLOUDSDK_CORE_PROJECT, 'my-project', key);
      assert.equal(env.GOOGLE_CLOUD_PROJECT, 'my-project', key);
      const file = JSON.parse(out.pod.metadata!.annotations!['cloud.google.com/external-credentials-json']);
      assert.equal(file.service_account_impersonation_url, undefined, 'still direct access');
    }
  });

  test("it wins over the service account email's project, in the gcloud setup container too", () => {
    const out = admitted(pod(), {
      'cloud.google.com/workload-identity-provider': PROVIDER,
      'cloud.google.com/service-account-email': 'reader@sa-project.iam.gserviceaccount.com',
      'cloud.google.com/project-id': 'workload-project',
    });
    assert.equal(envOf(out.pod.spec!.containers![0]).CLOUDSDK_CORE_PROJECT, 'workload-project');
    assert.equal(envOf(out.pod.spec!.initContainers![0]).CLOUDSDK_CORE_PROJECT, 'workload-project');
    const legacy = admitted(pod(), {
      'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
      'cloud.google.com/project-id': 'example.com:legacy-project',
    });
    assert.equal(envOf(legacy.pod.spec!.containers![0]).GOOGLE_CLOUD_PROJECT, 'example.com:legacy-project');
  });

  test('a project number or a malformed id is refused, naming the annotation', () => {
    for (const value of ['123456789012', 'My Project', '']) {
      const d = denied(pod(), {
        'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
        'cloud.google.com/project-id': value,
      });
      assert.equal(d.reason, 'InvalidAnnotation');
      assert.match(
        d.message,
        /annotation cloud\.google\.com\/project-id=".*" is not a project id: .*\(the id, not the project number\)$/,
      );
    }
  });
});

describe('GCP: several providers in one Pod, one external_account file each', () => {
  const MAIN = WIF_PROVIDER;
  const BILLING = BILLING_PROVIDER;
  const EMAIL = BILLING_EMAIL;
  const DIR = '/var/run/secrets/sts.googleapis.com/serviceaccount';
  const annotations = {
    'gcp.auth.fluxcd.io/workload-identity-provider': MAIN,
    'cloud.google.com/workload-identity-providers': `billing=${BILLING}:${EMAIL}, audit=//iam.googleapis.com/${BILLING}`,
  };

  test('each named provider gets its own token (its audience) and its own file in the token volume', () => {
    const out = admitted(pod(), annotations);
    const sources = out.pod.spec!.volumes![0].projected!.sources!;
    assert.deepEqual(
      sources.map((s) => s.serviceAccountToken?.path ?? s.downwardAPI!.items![0].path),
      ['token', 'federation.json', 'token-billing', 'federation-billing.json', 'token-audit', 'federation-audit.json'],
    );
    assert.deepEqual(
      sources.filter((s) => s.serviceAccountToken).map((s) => s.serviceAccountToken!.audience),
      [`//iam.googleapis.com/${MAIN}`, `//iam.googleapis.com/${BILLING}`, `//iam.googleapis.com/${BILLING}`],
    );
    const billing = JSON.parse(out.pod.metadata!.annotations!['workload-identity-webhook.io/gcp-credentials-billing']);
    assert.equal(billing.audience, `//iam.googleapis.com/${BILLING}`);
    assert.equal(billing.credential_source.file, `${DIR}/token-billing`);
    assert.equal(
      billing.service_account_impersonation_url,
      `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${EMAIL}:generateAccessToken`,
    );
    const audit = JSON.parse(out.pod.metadata!.annotations!['workload-identity-webhook.io/gcp-credentials-audit']);
    assert.equal(audit.service_account_impersonation_url, undefined);
    assert.equal(envOf(out.pod.spec!.containers![0]).GOOGLE_APPLICATION_CREDENTIALS, `${DIR}/federation.json`);
    assert.deepEqual(
      out.injections[0].additionalIdentities!.map((i) => [i.name, i.projectNumber, i.pool, i.serviceAccountEmail]),
      [
        ['billing', '555555555555', 'billing-pool', EMAIL],
        ['audit', '555555555555', 'billing-pool', undefined],
      ],
    );
  });

  test("pfnet's layouts carry them in the same token volume", () => {
    const out = admitted(pod(), {
      'cloud.google.com/workload-identity-provider': MAIN,
      'cloud.google.com/service-account-email': GCP_EMAIL,
      'cloud.google.com/workload-identity-providers': `billing=${BILLING}`,
    });
    const volume = out.pod.spec!.volumes!.find((v) => v.name === 'gcp-iam-token')!;
    assert.equal(volume.projected!.defaultMode, 0o440);
    assert.deepEqual(
      volume.projected!.sources!.map((s) => s.serviceAccountToken?.audience ?? s.downwardAPI!.items![0].path),
      ['sts.googleapis.com', `//iam.googleapis.com/${BILLING}`, 'federation-billing.json'],
    );
  });

  test('Windows Pods get the Windows token path in each file', () => {
    const out = admitted(pod({ spec: { nodeSelector: { 'kubernetes.io/os': 'windows' } } }), annotations);
    const billing = JSON.parse(out.pod.metadata!.annotations!['workload-identity-webhook.io/gcp-credentials-billing']);
    assert.equal(
      billing.credential_source.file,
      'C:\\var\\run\\secrets\\sts.googleapis.com\\serviceaccount\\token-billing',
    );
  });

  test('malformed entries are refused, with or without --strict', () => {
    const cases: [string, RegExp][] = [
      [`billing`, /"billing" is not <name>=<provider>/],
      [`Billing=${BILLING}`, /"Billing" is not a name/],
      [`a=${BILLING},a=${MAIN}`, /"a" is named twice/],
      ['a=projects/1/pools/x', /a="projects\/1\/pools\/x" is not a workload identity provider/],
      [`a=${BILLING}:not-an-email@`, /"not-an-email@" is not a Google service account email/],
    ];
    for (const [value, message] of cases)
      assert.match(
        denied(pod(), { ...annotations, 'cloud.google.com/workload-identity-providers': value }).message,
        message,
      );
  });

  test('tenant policy judges each provider; trust prints each provider with its own audience', () => {
    const policy = declaring({
      identityProviders: [
        { name: 'main', displayName: 'Main pool', gcp: { projectNumber: PROJECT_NUMBER, pool: POOL } },
      ],
    });
    const r = judged([policy], {}, annotations);
    assert.ok(!r.allowed);
    assert.equal(r.denial.reason, 'UntrustedIdentityProvider');
    assert.match(r.denial.message, /^workload identity pool billing-pool of project 555555555555 is not/);

    const { identities } = identitiesOfServiceAccounts(providers(), [sa(annotations, 'jobs', 'batch')]);
    const report = cloudModule('gcp').trust.report('https://oidc.example.com/c', identities, {
      settings: config(),
      accounts: [],
    }) as {
      providers: { name: string; allowedAudiences: string[] }[];
      serviceAccounts: { email: string }[];
    };
    assert.deepEqual(
      report.providers.map((p) => [p.name, p.allowedAudiences]),
      [
        [MAIN, [`//iam.googleapis.com/${MAIN}`]],
        [BILLING, [`//iam.googleapis.com/${BILLING}`]],
      ],
    );
    assert.deepEqual(
      report.serviceAccounts.map((s) => s.email),
      [EMAIL],
    );
  });
});
