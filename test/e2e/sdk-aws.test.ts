// Proof by the official AWS SDKs: @aws-sdk/credential-providers' default chain and boto3 read
// what the webhook injected into a Pod, and the credentialsFile it derived into a labelled Secret
// (whose token the token requestor wrote), exactly as stored by a real API server, and complete
// AssumeRoleWithWebIdentity against a strict STS stand-in; in EKS Pod Identity Pods they get
// container credentials from a strict stand-in of the Pod Identity Agent.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAwsSts, webIdentityTrust, type AwsSts } from '../sdk/aws-sts.ts';
import { POD_IDENTITY_AUDIENCE, startPodIdentityAgent, type PodIdentityAgent } from '../sdk/eks-pod-identity-agent.ts';
import { startSdkCluster, type SdkCluster, type StartOptions } from '../sdk/cluster.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import { refreshAcrossRotation, type Language, type SdkAnswer } from '../sdk/sdk-process.ts';
import { checkPinnedVersion } from '../sdk/versions.ts';
import {
  AWS_ACCOUNT,
  OTHER_ACCOUNT_ROLE_ARN as WRITER_ROLE,
  OTHER_AWS_ACCOUNT,
  ROLE_ARN as ROLE,
  roleArn,
} from '../support/identities.ts';

const NS = 'sdk-aws';
// Several roles in one Pod: a second role, in another account, for the `writer` profile.
const TOKEN_FILE = '/var/run/secrets/eks.amazonaws.com/serviceaccount/token';
// Where Gardener's extensions mount the Secret; the webhook's default --secret-token-path is in it.
const SECRET_MOUNT = '/var/run/secrets/gardener.cloud/workload-identity';
const LITERAL = 'nightly-report@team-a';
const subject = (sa: string) => `system:serviceaccount:${NS}:${sa}`;

// EKS Pod Identity: the association lives in EKS (here: the agent's table and the webhook's file).
const POD_IDENTITY_ROLE = roleArn('pod-identity-reader', OTHER_AWS_ACCOUNT);
const POD_IDENTITY_TOKEN_FILE = '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token';

/** A role's trust policy: these ServiceAccounts of the namespace (and these roles by AssumeRole). */
const trusting = (issuer: string, account: string, serviceAccounts: string[], roles: string[] = []) =>
  webIdentityTrust(issuer, account, serviceAccounts.map(subject), roles);

let cluster: SdkCluster;
let sts: AwsSts;
let agent: PodIdentityAgent;

before(async () => {
  agent = await startPodIdentityAgent({ [subject('associated')]: POD_IDENTITY_ROLE });
  const associations = join(mkdtempSync(join(tmpdir(), 'wiw-sdk-aws-')), 'associations.json');
  // Both are associated in the webhook's file; the agent knows only `associated`.
  writeFileSync(
    associations,
    JSON.stringify({
      identities: [
        { namespace: NS, serviceAccount: 'associated' },
        { namespace: NS, serviceAccount: 'unassociated-in-eks' },
      ],
    }),
  );
  cluster = await startSdkCluster({
    name: 'sdk-aws',
    namespace: NS,
    webhookArgs: [
      '--aws-default-region',
      'eu-west-1',
      '--aws-container-credentials-config',
      associations,
      '--aws-container-credentials-full-uri',
      agent.fullUri,
    ],
    secrets: true,
    serviceAccounts: {
      // Named by labelled Secrets; it carries no annotation of its own.
      'secret-reader': {},
      reader: { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/sts-regional-endpoints': 'true' },
      // Same role, but its trust policy does not name this ServiceAccount.
      intruder: { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/sts-regional-endpoints': 'true' },
      // An audience the account's OIDC provider does not list.
      elsewhere: { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/audience': 'sts.example.com' },
      // EKS Pod Identity wins over the IRSA annotation it also carries.
      associated: { 'eks.amazonaws.com/role-arn': ROLE },
      // One profile per role in a shared config file: [default] the reader, [profile writer].
      multi: {
        'eks.amazonaws.com/role-arn': ROLE,
        'eks.amazonaws.com/role-arns': `writer=${WRITER_ROLE}`,
        'eks.amazonaws.com/sts-regional-endpoints': 'true',
      },
      // A role per container (AWS #147): the Pod's container "app" gets the writer profile.
      'per-container': {
        'eks.amazonaws.com/role-arn': ROLE,
        'eks.amazonaws.com/role-arns': `writer=${WRITER_ROLE}`,
        'eks.amazonaws.com/container-profiles': 'app=writer',
        'eks.amazonaws.com/sts-regional-endpoints': 'true',
      },
      'unassociated-in-eks': {},
      // AWS_ROLE_SESSION_NAME (AWS #112): the Pod's own name, or a literal.
      session: { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/role-session-name': 'pod-name' },
      'session-literal': { 'eks.amazonaws.com/role-arn': ROLE, 'eks.amazonaws.com/role-session-name': LITERAL },
    },
    services: (issuer) => [
      (sts = createAwsSts({
        issuer,
        clientIds: ['sts.amazonaws.com'],
        roles: [
          {
            arn: ROLE,
            trustPolicy: trusting(issuer.issuer, AWS_ACCOUNT, [
              'reader',
              'secret-reader',
              'multi',
              'session',
              'session-literal',
            ]),
          },
          { arn: WRITER_ROLE, trustPolicy: trusting(issuer.issuer, OTHER_AWS_ACCOUNT, ['multi', 'per-container']) },
        ],
      })),
    ],
  });
  agent.issuer = cluster.issuer;
});

after(async () => {
  await cluster?.stop();
  await agent?.stop();
});

const start = (language: Language, serviceAccount: string, options?: StartOptions) =>
  cluster.start(language, 'aws', serviceAccount, options);
/** Digest of the token the stand-in saw when it issued these credentials. */
const presented = (answer: SdkAnswer) => sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId)?.tokenDigest;

const ROLE_NAME = ROLE.split('/').pop();

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@aws-sdk/credential-providers' : 'boto3';

  describe(`${sdkName} (${language}): AWS_ROLE_SESSION_NAME reaches STS`, () => {
    test('pod-name: a Pod named by generateName assumes the role in a session named after it', async () => {
      const { pod, container, sdk } = await start(language, 'session', { generateName: true });
      const name = pod.metadata!.name!;
      assert.match(name, /^session-[a-z0-9]{5}$/);
      const stored = pod.spec!.containers[0].env?.find((e) => e.name === 'AWS_ROLE_SESSION_NAME');
      assert.deepEqual({ ...stored?.valueFrom?.fieldRef }, { apiVersion: 'v1', fieldPath: 'metadata.name' });
      assert.equal(container.env.AWS_ROLE_SESSION_NAME, name);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.equal(exchange?.roleSessionName, name);
      assert.equal(exchange?.assumedRoleArn, `arn:aws:sts::${AWS_ACCOUNT}:assumed-role/${ROLE_NAME}/${name}`);
      await sdk.stop();
    });

    test('a literal session name', async () => {
      const { sdk } = await start(language, 'session-literal');
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.equal(exchange?.assumedRoleArn, `arn:aws:sts::${AWS_ACCOUNT}:assumed-role/${ROLE_NAME}/${LITERAL}`);
      await sdk.stop();
    });

    test("the container's own value wins; one of 65 characters STS refuses", async () => {
      const own = 'x'.repeat(65);
      const { container, sdk } = await start(language, 'session', { env: { AWS_ROLE_SESSION_NAME: own } });
      assert.equal(container.env.AWS_ROLE_SESSION_NAME, own);
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.equal(answer.error?.code, 'ValidationError');
      assert.match(
        answer.error!.message,
        /at 'roleSessionName' failed to satisfy constraint: Member must have length less than or equal to 64/,
      );
      await sdk.stop();
    });
  });

  describe(`${sdkName} (${language})`, () => {
    test('runs the pinned SDK version', async (t) => {
      await checkPinnedVersion(t, (await start(language, 'reader')).sdk, language, sdkName);
    });

    test('the default chain assumes the annotated role with the projected token, at the regional endpoint', async () => {
      const { container, sdk } = await start(language, 'reader');
      assert.deepEqual(container.rewrittenEnv, ['AWS_WEB_IDENTITY_TOKEN_FILE']);
      assert.equal(container.env.AWS_ROLE_ARN, ROLE);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
      assert.equal(exchange.roleArn, ROLE);
      assert.equal(exchange.audience, 'sts.amazonaws.com');
      assert.equal(exchange.subject, subject('reader'));
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      assert.equal(exchange.host, 'sts.eu-west-1.amazonaws.com');
      assert.match(String(answer.sessionToken), /^[A-Za-z0-9+/=]{200,}$/);
      await sdk.stop();
    });

    test('a token for another audience: InvalidIdentityToken, Incorrect token audience', async () => {
      const { container, sdk } = await start(language, 'elsewhere');
      assert.equal(container.tokens[0].audience, 'sts.example.com');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.equal(answer.error?.code, 'InvalidIdentityToken');
      assert.match(answer.error!.message, /Incorrect token audience/);
      await sdk.stop();
    });

    test('an expired token: ExpiredTokenException', async () => {
      const { container, sdk } = await start(language, 'reader');
      sts.clockOffsetSeconds = container.tokens[0].expirationSeconds + 60;
      try {
        const answer = await sdk.credentials();
        assert.equal(answer.ok, false);
        assert.equal(answer.error?.code, 'ExpiredTokenException');
        assert.match(
          answer.error!.message,
          /Token expired: current date\/time \d+ must be before the expiration date\/time\d+/,
        );
      } finally {
        sts.clockOffsetSeconds = 0;
        await sdk.stop();
      }
    });

    test('a ServiceAccount the role does not trust: AccessDenied', async () => {
      const { sdk } = await start(language, 'intruder');
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.equal(answer.error?.code, 'AccessDenied');
      assert.match(answer.error!.message, /Not authorized to perform sts:AssumeRoleWithWebIdentity/);
      assert.equal(answer.error?.status, 403);
      await sdk.stop();
    });

    test('rotation: once the credentials age, the refresh presents the replaced token file', async () => {
      const { container, sdk } = await start(language, 'reader');
      const original = container.tokens[0].token;
      const { first, second, rotated } = await refreshAcrossRotation(sdk, 'accessKeyId', original, () =>
        container.rotateToken(TOKEN_FILE),
      );
      assert.equal(presented(first), tokenDigest(original));
      assert.equal(presented(second), tokenDigest(rotated));
      await sdk.stop();
    });
  });
}

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@aws-sdk/credential-providers' : 'boto3';

  describe(`several roles, one profile each: ${sdkName} (${language})`, () => {
    const exchangeOf = (answer: SdkAnswer) => {
      assert.ok(answer.ok, JSON.stringify(answer.error));
      const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
      return exchange;
    };

    test('no profile named: [default], the role-arn role; code naming the writer profile: its role, same token', async () => {
      const { container, sdk } = await start(language, 'multi');
      assert.deepEqual(container.rewrittenEnv, ['AWS_CONFIG_FILE']);
      assert.equal(container.env.AWS_ROLE_ARN, undefined);
      const token = tokenDigest(container.tokens[0].token);
      const byDefault = exchangeOf(await sdk.credentials());
      assert.deepEqual([byDefault.roleArn, byDefault.subject, byDefault.tokenDigest], [ROLE, subject('multi'), token]);
      const writer = exchangeOf(await sdk.credentials('writer'));
      assert.deepEqual([writer.roleArn, writer.subject, writer.tokenDigest], [WRITER_ROLE, subject('multi'), token]);
      assert.equal(writer.host, 'sts.eu-west-1.amazonaws.com');
      await sdk.stop();
    });

    test('container-profiles: the default chain of container "app" assumes its profile\'s role', async () => {
      const { container, sdk } = await start(language, 'per-container');
      assert.equal(container.env.AWS_PROFILE, 'writer');
      const exchange = exchangeOf(await sdk.credentials());
      assert.deepEqual([exchange.roleArn, exchange.subject], [WRITER_ROLE, subject('per-container')]);
      await sdk.stop();
    });

    test("a container's own AWS_PROFILE picks its role for the default chain", async () => {
      const { sdk } = await start(language, 'multi', { env: { AWS_PROFILE: 'writer' } });
      assert.equal(exchangeOf(await sdk.credentials()).roleArn, WRITER_ROLE);
      await sdk.stop();
    });

    test('why the file comes without AWS_ROLE_ARN: beside it, boto3 takes the variable over the profile', async () => {
      // The author sets all three, so the webhook adds none of them.
      const { sdk } = await start(language, 'multi', {
        env: {
          AWS_ROLE_ARN: ROLE,
          AWS_CONFIG_FILE: '/var/run/secrets/eks.amazonaws.com/serviceaccount/config',
          AWS_PROFILE: 'writer',
        },
      });
      const role = exchangeOf(await sdk.credentials()).roleArn;
      assert.equal(role, language === 'python' ? ROLE : WRITER_ROLE);
      await sdk.stop();
    });

    test('a profile the file does not have is an error, not another role', async () => {
      const { sdk } = await start(language, 'multi');
      const issued = sts.exchanges.length;
      const answer = await sdk.credentials('nobody');
      assert.equal(answer.ok, false);
      // boto3 names the profile (ProfileNotFound); the JS chain reports that no provider could load.
      assert.match(answer.error!.message, language === 'python' ? /nobody/ : /Could not load credentials/);
      assert.equal(sts.exchanges.length, issued, 'no role was assumed');
      await sdk.stop();
    });
  });
}

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@aws-sdk/credential-providers' : 'boto3';

  describe(`EKS Pod Identity: ${sdkName} (${language})`, () => {
    test("the default chain gets the associated role's credentials from the agent with the projected token", async () => {
      const { pod, container, sdk } = await start(language, 'associated');
      assert.equal(pod.metadata!.labels!['eks.amazonaws.com/pod-identity'], 'enabled');
      assert.equal(container.env.AWS_ROLE_ARN, undefined, 'no web identity beside container credentials');
      assert.deepEqual(container.rewrittenEnv, ['AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE']);
      assert.equal(container.env.AWS_CONTAINER_CREDENTIALS_FULL_URI, agent.fullUri);
      assert.equal(container.tokens[0].audience, POD_IDENTITY_AUDIENCE);
      const answer = await sdk.credentials();
      assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
      const exchange = agent.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
      assert.ok(exchange, 'the SDK returned credentials the agent issued');
      assert.equal(exchange.roleArn, POD_IDENTITY_ROLE);
      assert.equal(exchange.subject, subject('associated'));
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      await sdk.stop();
    });

    test('rotation: once the credentials age, the refresh presents the replaced token file', async () => {
      const { container, sdk } = await start(language, 'associated');
      const original = container.tokens[0].token;
      const presentedToAgent = (answer: SdkAnswer) =>
        agent.exchanges.find((e) => e.accessKeyId === answer.accessKeyId)?.tokenDigest;
      const { first, second, rotated } = await refreshAcrossRotation(sdk, 'accessKeyId', original, () =>
        container.rotateToken(POD_IDENTITY_TOKEN_FILE),
      );
      assert.equal(presentedToAgent(first), tokenDigest(original));
      assert.equal(presentedToAgent(second), tokenDigest(rotated));
      await sdk.stop();
    });

    test('a ServiceAccount EKS has no association for: the agent refuses, the SDK reports it', async () => {
      const { container, sdk } = await start(language, 'unassociated-in-eks');
      assert.ok(container.env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE);
      const refusals = agent.errors.length;
      const answer = await sdk.credentials();
      assert.equal(answer.ok, false);
      assert.ok(
        agent.errors
          .slice(refusals)
          .some((e) => e.code === 'AccessDeniedException' && e.message.includes(subject('unassociated-in-eks'))),
        JSON.stringify(agent.errors),
      );
      await sdk.stop();
    });
  });
}

let secrets = 0;
for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@aws-sdk/credential-providers' : 'boto3';

  describe(`labelled Secret, credentialsFile: ${sdkName} (${language})`, () => {
    async function startOnSecret(variable: string) {
      const name = `aws-credentials-${++secrets}`;
      const secret = await cluster.createSecret(name, 'aws', 'secret-reader', { roleARN: ROLE });
      const credentialsFile = Buffer.from(secret.data!.credentialsFile!, 'base64').toString('utf8');
      assert.equal(
        credentialsFile,
        `[default]\nrole_arn = ${ROLE}\nweb_identity_token_file = ${SECRET_MOUNT}/token\nregion = eu-west-1\n`,
      );
      const pod = await cluster.createSecretPod(name, SECRET_MOUNT, { [variable]: `${SECRET_MOUNT}/credentialsFile` });
      const container = await cluster.materialise(pod);
      const sdk = cluster.startSdk(language, 'aws', container);
      const token = () => readFileSync(container.files.get(`${SECRET_MOUNT}/token`)!, 'utf8');
      return { name, container, sdk, token };
    }

    for (const variable of ['AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE']) {
      test(`the default chain, ${variable} naming credentialsFile: the role, with the Secret's token`, async () => {
        const { sdk, token } = await startOnSecret(variable);
        const answer = await sdk.credentials();
        assert.ok(answer.ok, `${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
        const exchange = sts.exchanges.find((e) => e.accessKeyId === answer.accessKeyId);
        assert.ok(exchange, 'the SDK returned credentials the stand-in issued');
        assert.equal(exchange.roleArn, ROLE);
        assert.equal(exchange.audience, 'sts.amazonaws.com');
        assert.equal(exchange.subject, subject('secret-reader'));
        assert.equal(exchange.tokenDigest, tokenDigest(token()));
        // The region line of credentialsFile picks the regional endpoint.
        assert.equal(exchange.host, 'sts.eu-west-1.amazonaws.com');
        await sdk.stop();
      });
    }

    test("rotation: the token requestor renews the Secret's token; the next refresh presents it", async () => {
      const { name, container, sdk, token } = await startOnSecret('AWS_CONFIG_FILE');
      const original = token();
      const { first, second, rotated } = await refreshAcrossRotation(sdk, 'accessKeyId', original, async () => {
        await cluster.renewSecretToken(name);
        await container.syncSecrets();
        return token();
      });
      assert.equal(presented(first), tokenDigest(original));
      assert.equal(presented(second), tokenDigest(rotated));
      await sdk.stop();
    });
  });
}
