// AWS STS AssumeRoleWithWebIdentity, judged as AWS does: the token's issuer must be an IAM OIDC
// identity provider of the role's account, its audience one of that provider's client IDs, its
// signature and expiry valid, and the role's trust policy must name its subject. Answers are the
// awsQuery XML documents of the real service, errors included.
import { randomBytes, randomUUID } from 'node:crypto';
import type { ClusterIssuer } from './oidc.ts';
import { tokenDigest } from './oidc.ts';
import type { StandInResponse, StandInService } from './standin-server.ts';

export const STS_HOSTS = [
  'sts.amazonaws.com',
  'sts.us-east-1.amazonaws.com',
  'sts.eu-west-1.amazonaws.com',
] as const;

export interface AwsRole {
  arn: string;
  /** Trust policy: `<provider>:aud` StringEquals. */
  audience: string;
  /** Trust policy: `<provider>:sub` StringEquals, any of these. */
  subjects: string[];
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
  subject: string;
  audience: string;
  tokenDigest: string;
  accessKeyId: string;
}

export interface AwsSts extends StandInService {
  exchanges: AwsExchange[];
  /** Every answered error: code and message. */
  errors: { code: string; message: string; tokenDigest?: string }[];
  /** Seconds added to the clock the stand-in judges token expiry by. */
  clockOffsetSeconds: number;
}

const NS = 'https://sts.amazonaws.com/doc/2011-06-15/';
const SESSION_NAME = /^[\w+=,.@-]{2,64}$/;

export function createAwsSts(options: AwsStsOptions): AwsSts {
  const issuerHostPath = options.issuer.issuer.replace(/^https:\/\//, '');
  const sts: AwsSts = {
    hosts: STS_HOSTS,
    exchanges: [],
    errors: [],
    clockOffsetSeconds: 0,
    async handle(req) {
      const fail = (status: number, code: string, message: string, digest?: string): StandInResponse => {
        sts.errors.push({ code, message, tokenDigest: digest });
        return errorResponse(status, code, message);
      };
      if (req.method !== 'POST' || req.path !== '/') return fail(404, 'UnknownOperation', `${req.method} ${req.path}`);
      const params = new URLSearchParams(req.body);
      if (params.get('Action') !== 'AssumeRoleWithWebIdentity') {
        return fail(400, 'InvalidAction', `Could not find operation ${params.get('Action')} for version ${params.get('Version')}`);
      }
      if (params.get('Version') !== '2011-06-15') return fail(400, 'InvalidParameterValue', `Unsupported version ${params.get('Version')}`);
      const roleArn = params.get('RoleArn');
      const sessionName = params.get('RoleSessionName');
      const token = params.get('WebIdentityToken');
      for (const [name, value] of [['RoleArn', roleArn], ['RoleSessionName', sessionName], ['WebIdentityToken', token]] as const) {
        if (!value) return fail(400, 'MissingParameter', `The request must contain the parameter ${name}`);
      }
      if (!SESSION_NAME.test(sessionName!)) {
        return fail(400, 'ValidationError', `1 validation error detected: Value '${sessionName}' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*`);
      }
      const digest = tokenDigest(token!);
      const now = new Date(Date.now() + sts.clockOffsetSeconds * 1000);
      const verified = await options.issuer.verify(token!, now);
      if (!verified.ok) {
        switch (verified.reason) {
          case 'unknown-issuer':
            return fail(400, 'InvalidIdentityToken', `No OpenIDConnect provider found in your account for ${verified.claims?.iss}`, digest);
          case 'expired':
            // The real message, missing space included.
            return fail(400, 'ExpiredTokenException', `Token expired: current date/time ${Math.floor(now.getTime() / 1000)} must be before the expiration date/time${verified.claims?.exp}`, digest);
          default:
            return fail(400, 'InvalidIdentityToken', `The web identity token that was passed could not be validated by AWS. Get a new identity token from the identity provider and then retry the request. (${verified.reason})`, digest);
        }
      }
      const { payload, audiences } = verified;
      const audience = audiences.find((a) => options.clientIds.includes(a));
      if (!audience) return fail(400, 'InvalidIdentityToken', 'Incorrect token audience', digest);
      const role = options.roles.find((r) => r.arn === roleArn);
      // A missing role and an untrusting one look the same from outside, as in AWS.
      if (!role || role.audience !== audience || !role.subjects.includes(payload.sub)) {
        return fail(403, 'AccessDenied', 'Not authorized to perform sts:AssumeRoleWithWebIdentity', digest);
      }
      const duration = Number(params.get('DurationSeconds') ?? 3600);
      if (!Number.isInteger(duration) || duration < 900 || duration > 43200) {
        return fail(400, 'ValidationError', `1 validation error detected: Value '${params.get('DurationSeconds')}' at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 900`);
      }

      const accessKeyId = `ASIA${randomId(16)}`;
      sts.exchanges.push({ host: req.host, roleArn: role.arn, roleSessionName: sessionName!, subject: payload.sub, audience, tokenDigest: digest, accessKeyId });
      const [, partition, , , account, resource] = role.arn.split(':');
      const roleName = resource.split('/').pop();
      const expiration = new Date(Date.now() + duration * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      return xml(200, `<AssumeRoleWithWebIdentityResponse xmlns="${NS}">
  <AssumeRoleWithWebIdentityResult>
    <Audience>${esc(audience)}</Audience>
    <AssumedRoleUser>
      <AssumedRoleId>AROA${randomId(17)}:${esc(sessionName!)}</AssumedRoleId>
      <Arn>arn:${partition}:sts::${account}:assumed-role/${esc(roleName!)}/${esc(sessionName!)}</Arn>
    </AssumedRoleUser>
    <Provider>arn:${partition}:iam::${account}:oidc-provider/${esc(issuerHostPath)}</Provider>
    <Credentials>
      <AccessKeyId>${accessKeyId}</AccessKeyId>
      <SecretAccessKey>${randomBytes(30).toString('base64')}</SecretAccessKey>
      <SessionToken>${randomBytes(180).toString('base64')}</SessionToken>
      <Expiration>${expiration}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>${esc(payload.sub)}</SubjectFromWebIdentityToken>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>${randomUUID()}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
`);
    },
  };
  return sts;
}

function errorResponse(status: number, code: string, message: string): StandInResponse {
  return xml(status, `<ErrorResponse xmlns="${NS}">
  <Error>
    <Type>Sender</Type>
    <Code>${esc(code)}</Code>
    <Message>${esc(message)}</Message>
  </Error>
  <RequestId>${randomUUID()}</RequestId>
</ErrorResponse>
`);
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
