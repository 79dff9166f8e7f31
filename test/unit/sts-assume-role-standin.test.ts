// The STS stand-in's AssumeRole is as strict as the SDK proofs need it to be: a request signed by
// the AWS SDK for JavaScript's own SigV4 signer (@smithy/signature-v4, installed with
// @aws-sdk/credential-providers) with credentials the stand-in issued is answered; the same
// request with its body changed, another secret, another session token, an unknown key, a
// signature scoped to another region, a bad session name or a chained session over an hour is
// refused with STS's code.
import { createHash, createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SignatureV4 } from '@smithy/signature-v4';
import { createAwsSts } from '../sdk/aws-sts.ts';
import type { ClusterIssuer } from '../sdk/oidc.ts';
import { oidcProviderArn, OTHER_AWS_ACCOUNT, ROLE_ARN as HUB, roleArn } from '../support/identities.ts';

const TARGET = roleArn('target', OTHER_AWS_ACCOUNT);
const HOST = 'sts.eu-west-1.amazonaws.com';
const ISSUER = 'https://oidc.example.com/c';
const SUBJECT = 'system:serviceaccount:apps:app';

// The stand-in's token checks are not under test here: this issuer accepts any token as SUBJECT's.
const issuer: ClusterIssuer = {
  issuer: ISSUER,
  verify: async () => {
    const now = Math.floor(Date.now() / 1000);
    return {
      ok: true,
      payload: { iss: ISSUER, sub: SUBJECT, exp: now + 3600, iat: now },
      audiences: ['sts.amazonaws.com'],
    };
  },
};
const hostPath = 'oidc.example.com/c';
const sts = createAwsSts({
  issuer,
  clientIds: ['sts.amazonaws.com'],
  roles: [
    {
      arn: HUB,
      trustPolicy: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { Federated: oidcProviderArn(hostPath) },
            Action: 'sts:AssumeRoleWithWebIdentity',
            Condition: { StringEquals: { [`${hostPath}:sub`]: SUBJECT, [`${hostPath}:aud`]: 'sts.amazonaws.com' } },
          },
        ],
      },
      permissions: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: TARGET }],
    },
    {
      arn: TARGET,
      trustPolicy: {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: { AWS: HUB }, Action: 'sts:AssumeRole' }],
      },
    },
  ],
});

type Bytes = string | ArrayBuffer | ArrayBufferView;
const bytes = (data: Bytes) =>
  typeof data === 'string'
    ? data
    : ArrayBuffer.isView(data)
      ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
      : new Uint8Array(data);

/** SHA-256 and HMAC from node:crypto, in the form the signer takes. */
class Sha256 {
  #hash;
  constructor(secret?: Bytes) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Bytes) {
    this.#hash.update(bytes(data));
  }
  async digest() {
    return new Uint8Array(this.#hash.digest());
  }
}

const tag = (xml: string, name: string) => new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1] ?? '';
const form = (params: Record<string, string>) => new URLSearchParams({ Version: '2011-06-15', ...params }).toString();

async function call(headers: Record<string, string>, body: string, host = HOST) {
  const answer = await sts.handle({ method: 'POST', host, path: '/', query: new URLSearchParams(), headers, body });
  return { status: answer.status, code: tag(answer.body, 'Code'), body: answer.body };
}

/** Credentials the stand-in issues for the token: the hub role's. */
async function webIdentity() {
  const { body } = await call(
    { host: HOST, 'content-type': 'application/x-www-form-urlencoded' },
    form({ Action: 'AssumeRoleWithWebIdentity', RoleArn: HUB, RoleSessionName: 'pod', WebIdentityToken: 'token' }),
  );
  return {
    accessKeyId: tag(body, 'AccessKeyId'),
    secretAccessKey: tag(body, 'SecretAccessKey'),
    sessionToken: tag(body, 'SessionToken'),
  };
}

async function signed(
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string },
  body: string,
  region = 'eu-west-1',
) {
  const signer = new SignatureV4({ credentials, region, service: 'sts', sha256: Sha256 });
  const request = await signer.sign({
    method: 'POST',
    protocol: 'https:',
    hostname: HOST,
    path: '/',
    query: {},
    headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded' },
    body,
  });
  return request.headers as Record<string, string>;
}

const ASSUME = form({ Action: 'AssumeRole', RoleArn: TARGET, RoleSessionName: 'chained' });

describe('the STS stand-in: AssumeRole', () => {
  test('signed with the credentials it issued: the target role, recorded with the caller', async () => {
    const credentials = await webIdentity();
    const answer = await call(await signed(credentials, ASSUME), ASSUME);
    assert.equal(answer.status, 200, answer.body);
    assert.equal(tag(answer.body, 'Arn'), `arn:aws:sts::${OTHER_AWS_ACCOUNT}:assumed-role/target/chained`);
    const assumed = sts.assumptions.at(-1)!;
    assert.deepEqual(
      [assumed.roleArn, assumed.callerRoleArn, assumed.callerAccessKeyId],
      [TARGET, HUB, credentials.accessKeyId],
    );
  });

  test('every way a signature can be wrong is refused with the code STS answers', async () => {
    const credentials = await webIdentity();
    const other = await webIdentity();
    const cases: [string, Record<string, string>, string, string][] = [
      [
        'the body changed after signing',
        await signed(credentials, ASSUME),
        ASSUME.replace('chained', 'changed'),
        'SignatureDoesNotMatch',
      ],
      [
        'another secret',
        await signed({ ...credentials, secretAccessKey: other.secretAccessKey }, ASSUME),
        ASSUME,
        'SignatureDoesNotMatch',
      ],
      [
        "another session's token",
        await signed({ ...credentials, sessionToken: other.sessionToken }, ASSUME),
        ASSUME,
        'InvalidClientTokenId',
      ],
      [
        'no session token',
        await signed({ ...credentials, sessionToken: undefined }, ASSUME),
        ASSUME,
        'InvalidClientTokenId',
      ],
      [
        'a key it never issued',
        await signed({ ...credentials, accessKeyId: 'ASIANEVERISSUED00000' }, ASSUME),
        ASSUME,
        'InvalidClientTokenId',
      ],
      ['scoped to another region', await signed(credentials, ASSUME, 'us-east-1'), ASSUME, 'SignatureDoesNotMatch'],
      ['unsigned', { host: HOST }, ASSUME, 'MissingAuthenticationToken'],
    ];
    for (const [what, headers, body, code] of cases) {
      const answer = await call(headers, body);
      assert.equal(answer.code, code, what);
      assert.ok(answer.status === 403 || answer.status === 400, what);
    }
  });

  test('RoleArn and RoleSessionName are checked; a chained session lasts at most an hour', async () => {
    const credentials = await webIdentity();
    const cases: [Record<string, string>, RegExp][] = [
      [
        { RoleArn: roleArn('nobody', OTHER_AWS_ACCOUNT), RoleSessionName: 'chained' },
        /is not authorized to perform: sts:AssumeRole on resource: arn:aws:iam::444455556666:role\/nobody/,
      ],
      [{ RoleArn: HUB, RoleSessionName: 'chained' }, /is not authorized to perform: sts:AssumeRole on resource/],
      [
        { RoleArn: TARGET, RoleSessionName: 'x' },
        /at 'roleSessionName' failed to satisfy constraint: Member must have length greater than or equal to 2/,
      ],
      [{ RoleArn: TARGET, RoleSessionName: 'a b' }, /Member must satisfy regular expression pattern/],
      [
        { RoleArn: TARGET, RoleSessionName: 'chained', DurationSeconds: '7200' },
        /exceeds the 1 hour session limit for roles assumed by role chaining/,
      ],
      [{ RoleSessionName: 'chained' }, /must contain the parameter RoleArn/],
    ];
    for (const [params, message] of cases) {
      const body = form({ Action: 'AssumeRole', ...params });
      const answer = await call(await signed(credentials, body), body);
      assert.match(tag(answer.body, 'Message'), message, JSON.stringify(params));
    }
  });
});
