// Proof by the official AWS SDKs of role chaining (issue 31 item 3, AWS #258): @aws-sdk/credential-
// providers (fromIni through fromNodeProviderChain) and boto3 read the shared config file the
// webhook projected into a Pod whose ServiceAccount has role-arns and source-profiles, exactly as
// the API server stored it, and reach a chained profile's role with AssumeRoleWithWebIdentity for
// its source, then AssumeRole signed with those credentials, against the strict STS stand-in.
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createAwsSts, webIdentityTrust, type AwsSts } from '../sdk/aws-sts.ts';
import { startSdkCluster, type SdkCluster } from '../sdk/cluster.ts';
import { tokenDigest } from '../sdk/oidc.ts';
import type { SdkAnswer } from '../sdk/sdk-process.ts';
import {
  AWS_ACCOUNT,
  OTHER_ACCOUNT_ROLE_ARN as WRITER_ROLE,
  OTHER_AWS_ACCOUNT,
  ROLE_ARN as ROLE,
  roleArn,
} from '../support/identities.ts';

const NS = 'sdk-aws-chaining';
const CONFIG_FILE = '/var/run/secrets/eks.amazonaws.com/serviceaccount/config';
const subject = (sa: string) => `system:serviceaccount:${NS}:${sa}`;
// The reader's credentials assume the writer (another account), the writer's the auditor;
// `closed` does not trust the reader, the reader may not assume `unpermitted`.
const AUDITOR_ROLE = roleArn('auditor', OTHER_AWS_ACCOUNT);
const CLOSED_ROLE = roleArn('closed', OTHER_AWS_ACCOUNT);
const UNPERMITTED_ROLE = roleArn('unpermitted', OTHER_AWS_ACCOUNT);

/** A role's trust policy: these ServiceAccounts of the namespace (and these roles by AssumeRole). */
const trusting = (issuer: string, account: string, serviceAccounts: string[], roles: string[] = []) =>
  webIdentityTrust(issuer, account, serviceAccounts.map(subject), roles);

/** A role's permission to call sts:AssumeRole on these roles. */
const mayAssume = (roles: string[]) => [{ Effect: 'Allow' as const, Action: 'sts:AssumeRole', Resource: roles }];

let cluster: SdkCluster;
let sts: AwsSts;

before(async () => {
  cluster = await startSdkCluster({
    name: 'sdk-aws-chaining',
    namespace: NS,
    webhookArgs: ['--aws-default-region', 'eu-west-1'],
    serviceAccounts: {
      // [profile writer] assumes its role with [default]'s credentials, auditor with writer's.
      chained: {
        'eks.amazonaws.com/role-arn': ROLE,
        'eks.amazonaws.com/role-arns': `writer=${WRITER_ROLE}\nauditor=${AUDITOR_ROLE}\nclosed=${CLOSED_ROLE}\nunpermitted=${UNPERMITTED_ROLE}`,
        'eks.amazonaws.com/source-profiles': 'writer=default, auditor=writer, closed=default, unpermitted=default',
        'eks.amazonaws.com/sts-regional-endpoints': 'true',
      },
    },
    services: (issuer) => [
      (sts = createAwsSts({
        issuer,
        clientIds: ['sts.amazonaws.com'],
        roles: [
          {
            arn: ROLE,
            trustPolicy: trusting(issuer.issuer, AWS_ACCOUNT, ['chained']),
            permissions: mayAssume([WRITER_ROLE, CLOSED_ROLE]),
          },
          {
            arn: WRITER_ROLE,
            trustPolicy: trusting(issuer.issuer, OTHER_AWS_ACCOUNT, [], [ROLE]),
            permissions: mayAssume([AUDITOR_ROLE]),
          },
          { arn: AUDITOR_ROLE, trustPolicy: trusting(issuer.issuer, OTHER_AWS_ACCOUNT, [], [WRITER_ROLE]) },
          { arn: CLOSED_ROLE, trustPolicy: trusting(issuer.issuer, OTHER_AWS_ACCOUNT, ['chained']) },
          { arn: UNPERMITTED_ROLE, trustPolicy: trusting(issuer.issuer, OTHER_AWS_ACCOUNT, [], [ROLE]) },
        ],
      })),
    ],
  });
});

after(async () => {
  await cluster?.stop();
});

/** The AssumeRole calls that issued these credentials, back to the web identity exchange that started them. */
function chainOf(answer: SdkAnswer) {
  assert.ok(answer.ok, `${JSON.stringify(answer.error)}`);
  const calls: string[] = [];
  let key = answer.accessKeyId as string;
  for (
    let a = sts.assumptions.find((x) => x.accessKeyId === key);
    a;
    a = sts.assumptions.find((x) => x.accessKeyId === key)
  ) {
    calls.unshift(`AssumeRole ${a.roleArn} by ${a.callerRoleArn}`);
    key = a.callerAccessKeyId;
  }
  const exchange = sts.exchanges.find((e) => e.accessKeyId === key);
  assert.ok(exchange, 'the chain starts with credentials the stand-in issued for the token');
  return { calls, exchange };
}

for (const language of ['node', 'python'] as const) {
  const sdkName = language === 'node' ? '@aws-sdk/credential-providers' : 'boto3';

  describe(`role chaining (source-profiles): ${sdkName} (${language})`, () => {
    test('the writer profile: AssumeRoleWithWebIdentity for [default], then AssumeRole with its credentials', async () => {
      const { container, sdk } = await cluster.start(language, 'aws', 'chained');
      const file = readFileSync(container.files.get(CONFIG_FILE)!, 'utf8');
      assert.match(file, new RegExp(`\\[profile writer\\]\nrole_arn = ${WRITER_ROLE}\nsource_profile = default\n`));
      const { calls, exchange } = chainOf(await sdk.credentials('writer'));
      assert.deepEqual(calls, [`AssumeRole ${WRITER_ROLE} by ${ROLE}`]);
      assert.deepEqual([exchange.roleArn, exchange.subject], [ROLE, subject('chained')]);
      assert.equal(exchange.tokenDigest, tokenDigest(container.tokens[0].token));
      const assumed = sts.assumptions.findLast((a) => a.roleArn === WRITER_ROLE)!;
      assert.equal(assumed.host, 'sts.eu-west-1.amazonaws.com');
      assert.match(
        assumed.assumedRoleArn,
        new RegExp(`^arn:aws:sts::${OTHER_AWS_ACCOUNT}:assumed-role/s3-writer/[\\w+=,.@-]{2,64}$`),
      );
      await sdk.stop();
    });

    test('two hops: auditor by writer by [default]', async () => {
      const { sdk } = await cluster.start(language, 'aws', 'chained');
      const { calls } = chainOf(await sdk.credentials('auditor'));
      assert.deepEqual(calls, [`AssumeRole ${WRITER_ROLE} by ${ROLE}`, `AssumeRole ${AUDITOR_ROLE} by ${WRITER_ROLE}`]);
      await sdk.stop();
    });

    test('AssumeRole is judged: a role that does not trust the source, or a source without the permission, is AccessDenied', async () => {
      const { sdk } = await cluster.start(language, 'aws', 'chained');
      for (const [profile, role] of [
        ['closed', CLOSED_ROLE],
        ['unpermitted', UNPERMITTED_ROLE],
      ]) {
        const answer = await sdk.credentials(profile);
        assert.equal(answer.ok, false, profile);
        assert.equal(answer.error?.code, 'AccessDenied');
        assert.match(
          answer.error!.message,
          new RegExp(
            `User: arn:aws:sts::${AWS_ACCOUNT}:assumed-role/s3-reader/\\S+ is not authorized to perform: sts:AssumeRole on resource: ${role}`,
          ),
        );
      }
      await sdk.stop();
    });
  });
}
