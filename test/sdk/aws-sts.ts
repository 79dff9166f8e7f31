// AWS STS AssumeRoleWithWebIdentity, judged as AWS does: the token's issuer must be an IAM OIDC
// identity provider of the role's account, its audience one of that provider's client IDs, its
// signature and expiry valid, and the role's trust policy must name its subject. AssumeRole (role
// chaining) with the credentials it issued, SigV4-signed: aws-sts-assume-role.ts. Answers are the
// awsQuery XML documents of the real service, errors included.
import { randomBytes, randomUUID } from 'node:crypto';
import type { ClusterIssuer } from './oidc.ts';
import { tokenDigest } from './oidc.ts';
import type { StandInResponse, StandInService } from './standin-server.ts';
import { oidcProviderArn } from '../support/identities.ts';
import { assumeRole, type AwsAssumption, type Issued, type PolicyStatement } from './aws-sts-assume-role.ts';

export type { AwsAssumption };

export const STS_HOSTS = ['sts.amazonaws.com', 'sts.us-east-1.amazonaws.com', 'sts.eu-west-1.amazonaws.com'] as const;

export interface AwsRole {
  arn: string;
  /** The role's trust policy document, evaluated as IAM does for AssumeRoleWithWebIdentity and AssumeRole. */
  trustPolicy: TrustPolicy;
  /** The statements of its permission policies, read for sts:AssumeRole on a chained role. */
  permissions?: PolicyStatement[];
}

export interface TrustPolicy {
  Version: string;
  Statement: TrustStatement[];
}

type TrustStatement = PolicyStatement;

/**
 * A role's trust policy as a test writes it: these subjects' tokens from the issuer through the
 * account's OIDC provider, with the default audience, and these roles by AssumeRole (chaining).
 */
export function webIdentityTrust(
  issuer: string,
  account: string,
  subjects: string[],
  roles: string[] = [],
): TrustPolicy {
  const hostPath = issuer.replace('https://', '');
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Allow',
        Principal: { Federated: oidcProviderArn(hostPath, account) },
        Action: 'sts:AssumeRoleWithWebIdentity',
        Condition: { StringEquals: { [`${hostPath}:sub`]: subjects, [`${hostPath}:aud`]: 'sts.amazonaws.com' } },
      },
      ...roles.map((arn) => ({ Effect: 'Allow' as const, Principal: { AWS: arn }, Action: 'sts:AssumeRole' })),
    ],
  };
}

/**
 * Whether a trust policy lets this web identity assume the role: a Deny statement that matches
 * wins, else an Allow statement must match. A statement matches when it names the action, the
 * account's OIDC provider as Federated principal, and every condition holds. Stricter than IAM:
 * only StringEquals on `<provider>:sub` and `<provider>:aud` is understood (any other operator or
 * key never holds), and an Allow must constrain both, so no policy of a test can trust everyone.
 */
export function trustPolicyAllows(
  policy: TrustPolicy,
  providerArn: string,
  issuerHostPath: string,
  claims: { sub: string; aud: string },
): boolean {
  const list = (v: string | string[] | undefined): string[] => (v === undefined ? [] : [v].flat());
  const matches = (st: TrustStatement): boolean => {
    if (!list(st.Action).includes('sts:AssumeRoleWithWebIdentity')) return false;
    if (!list(st.Principal?.Federated).includes(providerArn)) return false;
    const conditions = Object.entries(st.Condition ?? {});
    if (conditions.some(([operator]) => operator !== 'StringEquals')) return false;
    const keys = Object.entries(st.Condition?.StringEquals ?? {});
    const known: Record<string, string> = {
      [`${issuerHostPath}:sub`]: claims.sub,
      [`${issuerHostPath}:aud`]: claims.aud,
    };
    return keys.every(([key, values]) => key in known && list(values).includes(known[key]));
  };
  const constrainsBoth = (st: TrustStatement): boolean =>
    [`${issuerHostPath}:sub`, `${issuerHostPath}:aud`].every((k) => st.Condition?.StringEquals?.[k] !== undefined);
  const statements = policy.Statement ?? [];
  if (statements.some((st) => st.Effect === 'Deny' && matches(st))) return false;
  return statements.some((st) => st.Effect === 'Allow' && constrainsBoth(st) && matches(st));
}

export interface AwsStsOptions {
  issuer: ClusterIssuer;
  /** Client IDs (audiences) of the account's IAM OIDC provider for the cluster's issuer. */
  clientIds: string[];
  roles: AwsRole[];
}

/** One successful exchange, as the stand-in saw and answered it. */
export interface AwsExchange {
  host: string;
  roleArn: string;
  roleSessionName: string;
  /** The assumed-role ARN answered: arn:<partition>:sts::<account>:assumed-role/<role>/<session>. */
  assumedRoleArn: string;
  subject: string;
  audience: string;
  tokenDigest: string;
  accessKeyId: string;
}

export interface AwsSts extends StandInService {
  exchanges: AwsExchange[];
  /** Every AssumeRole answered (role chaining). */
  assumptions: AwsAssumption[];
  /** Every answered error: code and message. */
  errors: { code: string; message: string; tokenDigest?: string }[];
  /** Seconds added to the clock the stand-in judges token expiry by. */
  clockOffsetSeconds: number;
}

const NS = 'https://sts.amazonaws.com/doc/2011-06-15/';
// STS's RoleSessionName: 2 to 64 characters of [\w+=,.@-]; each rule answered with STS's message.
const SESSION_NAME_CHARACTERS = /^[\w+=,.@-]*$/;

export function createAwsSts(options: AwsStsOptions): AwsSts {
  const issuerHostPath = options.issuer.issuer.replace(/^https:\/\//, '');
  const sts: AwsSts = {
    hosts: STS_HOSTS,
    exchanges: [],
    assumptions: [],
    errors: [],
    clockOffsetSeconds: 0,
    async handle(req) {
      const fail = (status: number, code: string, message: string, digest?: string): StandInResponse => {
        sts.errors.push({ code, message, tokenDigest: digest });
        return errorResponse(status, code, message);
      };
      if (req.method !== 'POST' || req.path !== '/') return fail(404, 'UnknownOperation', `${req.method} ${req.path}`);
      const params = new URLSearchParams(req.body);
      const clock = () => new Date(Date.now() + sts.clockOffsetSeconds * 1000);
      if (params.get('Action') === 'AssumeRole' && params.get('Version') === '2011-06-15')
        return assumeRole(
          req,
          params,
          { issued, roles: options.roles, now: clock, fail, sessionProblem: (p) => sessionProblem(p, fail), issue },
          sts.assumptions,
        );
      if (params.get('Action') !== 'AssumeRoleWithWebIdentity') {
        return fail(
          400,
          'InvalidAction',
          `Could not find operation ${params.get('Action')} for version ${params.get('Version')}`,
        );
      }
      if (params.get('Version') !== '2011-06-15')
        return fail(400, 'InvalidParameterValue', `Unsupported version ${params.get('Version')}`);
      const roleArn = params.get('RoleArn');
      const sessionName = params.get('RoleSessionName');
      const token = params.get('WebIdentityToken');
      for (const [name, value] of [
        ['RoleArn', roleArn],
        ['RoleSessionName', sessionName],
        ['WebIdentityToken', token],
      ] as const) {
        if (!value) return fail(400, 'MissingParameter', `The request must contain the parameter ${name}`);
      }
      const invalid = sessionProblem(params, fail);
      if (invalid) return invalid;
      const digest = tokenDigest(token!);
      const now = new Date(Date.now() + sts.clockOffsetSeconds * 1000);
      const verified = await options.issuer.verify(token!, now);
      if (!verified.ok) {
        switch (verified.reason) {
          case 'unknown-issuer':
            return fail(
              400,
              'InvalidIdentityToken',
              `No OpenIDConnect provider found in your account for ${verified.claims?.iss}`,
              digest,
            );
          case 'expired':
            // The real message, missing space included.
            return fail(
              400,
              'ExpiredTokenException',
              `Token expired: current date/time ${Math.floor(now.getTime() / 1000)} must be before the expiration date/time${verified.claims?.exp}`,
              digest,
            );
          default:
            return fail(
              400,
              'InvalidIdentityToken',
              `The web identity token that was passed could not be validated by AWS. Get a new identity token from the identity provider and then retry the request. (${verified.reason})`,
              digest,
            );
        }
      }
      const { payload, audiences } = verified;
      const audience = audiences.find((a) => options.clientIds.includes(a));
      if (!audience) return fail(400, 'InvalidIdentityToken', 'Incorrect token audience', digest);
      const role = options.roles.find((r) => r.arn === roleArn);
      const [, rolePartition, , , roleAccount] = roleArn!.split(':');
      const providerArn = `arn:${rolePartition}:iam::${roleAccount}:oidc-provider/${issuerHostPath}`;
      // A missing role and an untrusting one look the same from outside, as in AWS.
      if (
        !role ||
        !trustPolicyAllows(role.trustPolicy, providerArn, issuerHostPath, { sub: payload.sub, aud: audience })
      ) {
        return fail(403, 'AccessDenied', 'Not authorized to perform sts:AssumeRoleWithWebIdentity', digest);
      }
      const duration = Number(params.get('DurationSeconds') ?? 3600);
      const { accessKeyId, issued: credentials } = issue(role.arn, sessionName!, duration);
      const { assumedRoleArn } = credentials;
      const [, partition, , , account] = role.arn.split(':');
      sts.exchanges.push({
        host: req.host,
        roleArn: role.arn,
        roleSessionName: sessionName!,
        assumedRoleArn,
        subject: payload.sub,
        audience,
        tokenDigest: digest,
        accessKeyId,
      });
      const expiration = new Date(credentials.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z');
      return xml(
        200,
        `<AssumeRoleWithWebIdentityResponse xmlns="${NS}">
  <AssumeRoleWithWebIdentityResult>
    <Audience>${esc(audience)}</Audience>
    <AssumedRoleUser>
      <AssumedRoleId>AROA${randomId(17)}:${esc(sessionName!)}</AssumedRoleId>
      <Arn>${esc(assumedRoleArn)}</Arn>
    </AssumedRoleUser>
    <Provider>arn:${partition}:iam::${account}:oidc-provider/${esc(issuerHostPath)}</Provider>
    <Credentials>
      <AccessKeyId>${accessKeyId}</AccessKeyId>
      <SecretAccessKey>${credentials.secretAccessKey}</SecretAccessKey>
      <SessionToken>${credentials.sessionToken}</SessionToken>
      <Expiration>${expiration}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>${esc(payload.sub)}</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>${randomUUID()}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
`,
      );
    },
  };
  /** Credentials for a session of `roleArn`, remembered so that AssumeRole can check a signature made with them. */
  const issued = new Map<string, Issued>();
  function issue(roleArn: string, sessionName: string, duration: number) {
    const accessKeyId = `ASIA${randomId(16)}`;
    const [, partition, , , account, resource] = roleArn.split(':');
    const credentials: Issued = {
      secretAccessKey: randomBytes(30).toString('base64'),
      sessionToken: randomBytes(180).toString('base64'),
      roleArn,
      assumedRoleArn: `arn:${partition}:sts::${account}:assumed-role/${resource.split('/').pop()}/${sessionName}`,
      expiresAt: Date.now() + duration * 1000,
    };
    issued.set(accessKeyId, credentials);
    return { accessKeyId, issued: credentials };
  }
  return sts;
}

/** RoleSessionName and DurationSeconds as STS checks them for every AssumeRole action, each with its message. */
function sessionProblem(
  params: URLSearchParams,
  fail: (status: number, code: string, message: string) => StandInResponse,
): StandInResponse | undefined {
  const sessionName = params.get('RoleSessionName') ?? '';
  if (sessionName.length < 2 || sessionName.length > 64) {
    const [op, bound] = sessionName.length < 2 ? ['greater', 2] : ['less', 64];
    return fail(
      400,
      'ValidationError',
      `1 validation error detected: Value '${sessionName}' at 'roleSessionName' failed to satisfy constraint: Member must have length ${op} than or equal to ${bound}`,
    );
  }
  if (!SESSION_NAME_CHARACTERS.test(sessionName)) {
    return fail(
      400,
      'ValidationError',
      `1 validation error detected: Value '${sessionName}' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*`,
    );
  }
  const duration = Number(params.get('DurationSeconds') ?? 3600);
  if (!Number.isInteger(duration) || duration < 900 || duration > 43200) {
    return fail(
      400,
      'ValidationError',
      `1 validation error detected: Value '${params.get('DurationSeconds')}' at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 900`,
    );
  }
  return undefined;
}

function errorResponse(status: number, code: string, message: string): StandInResponse {
  return xml(
    status,
    `<ErrorResponse xmlns="${NS}">
  <Error>
    <Type>Sender</Type>
    <Code>${esc(code)}</Code>
    <Message>${esc(message)}</Message>
  </Error>
  <RequestId>${randomUUID()}</RequestId>
</ErrorResponse>
`,
  );
}

function xml(status: number, body: string): StandInResponse {
  return { status, headers: { 'content-type': 'text/xml', 'x-amzn-requestid': randomUUID() }, body };
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
function randomId(length: number): string {
  return [...randomBytes(length)].map((b) => ALNUM[b % ALNUM.length]).join('');
}
