// STS AssumeRole, judged as AWS does for role chaining: the request is SigV4-signed with
// credentials this stand-in issued (access key id, session token and the secret it handed out),
// the caller's role must be named by the target role's trust policy and allowed by its own
// permissions to call sts:AssumeRole on the target, and a chained session lasts at most an hour.
import { randomBytes, randomUUID } from 'node:crypto';
import { readAuthorization, signatureMatches } from './sigv4.ts';
import type { StandInRequest, StandInResponse } from './standin-server.ts';

/** Credentials the stand-in issued, by access key id. */
export interface Issued {
  secretAccessKey: string;
  sessionToken: string;
  /** The role they are a session of, and its assumed-role ARN. */
  roleArn: string;
  assumedRoleArn: string;
  expiresAt: number;
}

export interface PolicyStatement {
  Effect: 'Allow' | 'Deny';
  Principal?: { Federated?: string | string[]; AWS?: string | string[] };
  Action?: string | string[];
  Resource?: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

/** One AssumeRole answered: the caller's role and credentials, and the role assumed. */
export interface AwsAssumption {
  host: string;
  roleArn: string;
  roleSessionName: string;
  assumedRoleArn: string;
  callerRoleArn: string;
  callerAccessKeyId: string;
  accessKeyId: string;
}

export interface AssumeRoleContext {
  issued: Map<string, Issued>;
  roles: readonly { arn: string; trustPolicy: { Statement: PolicyStatement[] }; permissions?: PolicyStatement[] }[];
  now: () => Date;
  fail: (status: number, code: string, message: string) => StandInResponse;
  /** The checks every STS action makes of its parameters (RoleSessionName, DurationSeconds). */
  sessionProblem: (params: URLSearchParams) => StandInResponse | undefined;
  issue: (roleArn: string, sessionName: string, duration: number) => { accessKeyId: string; issued: Issued };
}

const list = (v: string | string[] | undefined): string[] => (v === undefined ? [] : [v].flat());
// SigV4 allows 15 minutes between the signature's date and the service's clock.
const MAX_SKEW_MS = 15 * 60 * 1000;
// AWS: "role chaining limits your AWS CLI or AWS API role session to a maximum of one hour".
const CHAINED_MAX_DURATION = 3600;

/**
 * Whether `policy` lets `caller` (a role ARN) assume the role: a matching Deny wins, else an
 * Allow must name sts:AssumeRole and the caller role itself as AWS principal. Stricter than IAM:
 * no account root, no wildcard, and no condition holds.
 */
export function trustPolicyAllowsRole(policy: { Statement: PolicyStatement[] }, caller: string): boolean {
  const matches = (st: PolicyStatement) =>
    list(st.Action).includes('sts:AssumeRole') && list(st.Principal?.AWS).includes(caller) && !st.Condition;
  if (policy.Statement.some((st) => st.Effect === 'Deny' && matches(st))) return false;
  return policy.Statement.some((st) => st.Effect === 'Allow' && matches(st));
}

/** Whether the caller role's own permissions allow sts:AssumeRole on `target` (named exactly). */
export function permissionsAllow(permissions: readonly PolicyStatement[] | undefined, target: string): boolean {
  const matches = (st: PolicyStatement) =>
    list(st.Action).includes('sts:AssumeRole') && list(st.Resource).includes(target) && !st.Condition;
  const statements = permissions ?? [];
  if (statements.some((st) => st.Effect === 'Deny' && matches(st))) return false;
  return statements.some((st) => st.Effect === 'Allow' && matches(st));
}

/** The region a host's signature must be scoped to: the global endpoint signs for us-east-1. */
const regionOfHost = (host: string) => /^sts\.([a-z0-9-]+)\.amazonaws\.com$/.exec(host)?.[1] ?? 'us-east-1';

/** The caller, authenticated by its signature, or the error STS answers. */
function caller(
  req: StandInRequest,
  ctx: AssumeRoleContext,
): { accessKeyId: string; issued: Issued } | StandInResponse {
  if (!req.headers.authorization)
    return ctx.fail(403, 'MissingAuthenticationToken', 'Request is missing Authentication Token');
  const auth = readAuthorization(req);
  if (typeof auth === 'string') return ctx.fail(400, 'IncompleteSignature', auth);
  const { accessKeyId, region, amzDate } = auth.signedBy;
  const issued = ctx.issued.get(accessKeyId);
  // An unknown key and a session token of another session look the same, as in AWS.
  if (
    !issued ||
    req.headers['x-amz-security-token'] !== issued.sessionToken ||
    !auth.signedHeaders.includes('x-amz-security-token')
  )
    return ctx.fail(403, 'InvalidClientTokenId', 'The security token included in the request is invalid.');
  if (region !== regionOfHost(req.host))
    return ctx.fail(403, 'SignatureDoesNotMatch', `Credential should be scoped to a valid region, not '${region}'.`);
  const signedAt = Date.parse(amzDate.replace(/^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/, '$1-$2-$3T$4:$5:$6Z'));
  if (Math.abs(ctx.now().getTime() - signedAt) > MAX_SKEW_MS)
    return ctx.fail(
      403,
      'SignatureDoesNotMatch',
      `Signature expired: ${amzDate} is now earlier or later than 15 min. from the service's time.`,
    );
  if (!signatureMatches(req, auth, issued.secretAccessKey))
    return ctx.fail(
      403,
      'SignatureDoesNotMatch',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    );
  if (ctx.now().getTime() >= issued.expiresAt)
    return ctx.fail(403, 'ExpiredToken', 'The security token included in the request is expired');
  return { accessKeyId, issued };
}

export function assumeRole(
  req: StandInRequest,
  params: URLSearchParams,
  ctx: AssumeRoleContext,
  assumptions: AwsAssumption[],
): StandInResponse {
  const from = caller(req, ctx);
  if ('status' in from) return from;
  const roleArn = params.get('RoleArn');
  for (const [name, value] of [
    ['RoleArn', roleArn],
    ['RoleSessionName', params.get('RoleSessionName')],
  ] as const)
    if (!value) return ctx.fail(400, 'MissingParameter', `The request must contain the parameter ${name}`);
  const problem = ctx.sessionProblem(params);
  if (problem) return problem;
  const duration = Number(params.get('DurationSeconds') ?? 3600);
  if (duration > CHAINED_MAX_DURATION)
    return ctx.fail(
      400,
      'ValidationError',
      'The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.',
    );
  const role = ctx.roles.find((r) => r.arn === roleArn);
  const callerRole = ctx.roles.find((r) => r.arn === from.issued.roleArn);
  // A missing role, an untrusting one and a caller without the permission look the same, as in AWS.
  if (
    !role ||
    !trustPolicyAllowsRole(role.trustPolicy, from.issued.roleArn) ||
    !permissionsAllow(callerRole?.permissions, roleArn!)
  )
    return ctx.fail(
      403,
      'AccessDenied',
      `User: ${from.issued.assumedRoleArn} is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`,
    );
  const sessionName = params.get('RoleSessionName')!;
  const { accessKeyId, issued } = ctx.issue(role.arn, sessionName, duration);
  assumptions.push({
    host: req.host,
    roleArn: role.arn,
    roleSessionName: sessionName,
    assumedRoleArn: issued.assumedRoleArn,
    callerRoleArn: from.issued.roleArn,
    callerAccessKeyId: from.accessKeyId,
    accessKeyId,
  });
  return {
    status: 200,
    headers: { 'content-type': 'text/xml', 'x-amzn-requestid': randomUUID() },
    body: `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser>
      <AssumedRoleId>AROA${randomBytes(8).toString('hex').toUpperCase()}:${esc(sessionName)}</AssumedRoleId>
      <Arn>${esc(issued.assumedRoleArn)}</Arn>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>${accessKeyId}</AccessKeyId>
      <SecretAccessKey>${issued.secretAccessKey}</SecretAccessKey>
      <SessionToken>${issued.sessionToken}</SessionToken>
      <Expiration>${new Date(issued.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z')}</Expiration>
    </Credentials>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>${randomUUID()}</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>
`,
  };
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
