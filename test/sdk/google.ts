// Google's Security Token Service (RFC 8693 token exchange for a workload identity pool
// provider), IAM Credentials generateAccessToken (service account impersonation) and the one
// Resource Manager call google-auth makes to find the project (and its regional access boundary
// look-up). The external token is judged as
// the provider judges it: issuer, signature by the issuer's published keys, expiry, audience
// among the provider's allowed audiences. Impersonation needs the pool principal to hold
// roles/iam.workloadIdentityUser on the service account. Errors are Google's: OAuth-style JSON
// from STS, the google.rpc error JSON from the APIs.
import { randomBytes } from 'node:crypto';
import type { ClusterIssuer } from './oidc.ts';
import { tokenDigest } from './oidc.ts';
import type { StandInRequest, StandInResponse, StandInService } from './standin-server.ts';

export const GOOGLE_HOSTS = [
  'sts.googleapis.com',
  'iamcredentials.googleapis.com',
  'cloudresourcemanager.googleapis.com',
] as const;

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const SUBJECT_TOKEN_TYPES = ['urn:ietf:params:oauth:token-type:jwt', 'urn:ietf:params:oauth:token-type:id_token'];
const PROVIDER =
  /^\/\/iam\.googleapis\.com\/(projects\/(\d+)\/locations\/global\/workloadIdentityPools\/([^/]+)\/providers\/[^/]+)$/;

export interface WorkloadIdentityProvider {
  /** projects/N/locations/global/workloadIdentityPools/P/providers/X */
  name: string;
  issuer: string;
  /** Default: the provider's own resource name, with `https:` or `//` in front. */
  allowedAudiences?: string[];
  /**
   * Default: google.subject=assertion.sub. Only `google.subject` mapped from one claim
   * (`assertion.<claim>`) is understood; anything else is refused, as an invalid mapping.
   */
  attributeMapping?: Record<string, string>;
}

export interface GoogleServiceAccount {
  email: string;
  /** Principals granted roles/iam.workloadIdentityUser on it. */
  workloadIdentityUsers: string[];
}

export interface StsExchange {
  provider: string;
  principal: string;
  subject: string;
  audience: string;
  tokenDigest: string;
  accessToken: string;
}

export interface Impersonation {
  email: string;
  principal: string;
  accessToken: string;
  lifetimeSeconds: number;
}

export interface GoogleCloud extends StandInService {
  exchanges: StsExchange[];
  impersonations: Impersonation[];
  /** Project look-ups (Resource Manager) by the token they carried. */
  projectLookups: { project: string; accessToken: string }[];
  errors: { service: string; status: number; message: string; tokenDigest?: string }[];
  clockOffsetSeconds: number;
}

export function createGoogleCloud(options: {
  issuer: ClusterIssuer;
  providers: WorkloadIdentityProvider[];
  serviceAccounts: GoogleServiceAccount[];
  /** Project number -> project id, for Resource Manager. */
  projects: Record<string, string>;
}): GoogleCloud {
  const federated = new Map<string, StsExchange & { expires: number }>();
  const impersonated = new Map<string, Impersonation & { expires: number }>();

  const cloud: GoogleCloud = {
    hosts: GOOGLE_HOSTS,
    exchanges: [],
    impersonations: [],
    projectLookups: [],
    errors: [],
    clockOffsetSeconds: 0,
    async handle(req) {
      if (req.host === 'sts.googleapis.com' && req.method === 'POST' && req.path === '/v1/token') return stsToken(req);
      const impersonation = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/.exec(req.path);
      if (req.host === 'iamcredentials.googleapis.com' && req.method === 'POST' && impersonation) {
        return generateAccessToken(req, decodeURIComponent(impersonation[1]));
      }
      if (
        req.host === 'iamcredentials.googleapis.com' &&
        req.method === 'GET' &&
        req.path.endsWith('/allowedLocations')
      ) {
        return allowedLocations(req);
      }
      const project = /^\/v1\/projects\/([^/]+)$/.exec(req.path);
      if (req.host === 'cloudresourcemanager.googleapis.com' && req.method === 'GET' && project)
        return getProject(req, project[1]);
      return apiError('api', 404, 'NOT_FOUND', `The requested URL ${req.path} was not found on this server.`);
    },
  };

  const now = (): number => Date.now() + cloud.clockOffsetSeconds * 1000;

  function oauthError(status: number, error: string, description: string, digest?: string): StandInResponse {
    cloud.errors.push({ service: 'sts', status, message: `${error}: ${description}`, tokenDigest: digest });
    return json(status, { error, error_description: description });
  }

  function apiError(
    service: string,
    code: number,
    status: string,
    message: string,
    details?: unknown[],
  ): StandInResponse {
    cloud.errors.push({ service, status: code, message: `${status}: ${message}` });
    return json(code, { error: { code, message, status, ...(details && { details }) } });
  }

  async function stsToken(req: StandInRequest): Promise<StandInResponse> {
    const form = new URLSearchParams(req.body);
    if (form.get('grant_type') !== TOKEN_EXCHANGE) {
      return oauthError(400, 'unsupported_grant_type', `Unsupported grant type: ${form.get('grant_type')}`);
    }
    const audienceParam = form.get('audience') ?? '';
    const providerMatch = PROVIDER.exec(audienceParam);
    if (!providerMatch) {
      return oauthError(
        400,
        'invalid_request',
        'Invalid value for "audience". This value should be the full resource name of the Identity Provider. See https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token for the list of possible formats.',
      );
    }
    const provider = options.providers.find((p) => p.name === providerMatch[1]);
    if (!provider) {
      return oauthError(
        400,
        'invalid_target',
        'The target service indicated by the "audience" parameters is invalid. This might either be because the pool or provider is disabled or deleted or because it doesn\'t exist.',
      );
    }
    if (!SUBJECT_TOKEN_TYPES.includes(form.get('subject_token_type') ?? '')) {
      return oauthError(
        400,
        'invalid_request',
        `Invalid value for "subject_token_type": ${form.get('subject_token_type')}`,
      );
    }
    if (form.get('requested_token_type') !== ACCESS_TOKEN_TYPE) {
      return oauthError(
        400,
        'invalid_request',
        `Invalid value for "requested_token_type": ${form.get('requested_token_type')}`,
      );
    }
    const subjectToken = form.get('subject_token') ?? '';
    const digest = tokenDigest(subjectToken);
    const at = new Date(now());
    const verified = await options.issuer.verify(subjectToken, at);
    if (!verified.ok) {
      const claims = verified.claims ?? {};
      switch (verified.reason) {
        case 'unknown-issuer':
          return oauthError(
            400,
            'invalid_grant',
            `The issuer in ID Token ${claims.iss} does not match the expected ones: ${provider.issuer}.`,
            digest,
          );
        case 'expired':
          return oauthError(
            400,
            'invalid_grant',
            `ID Token expired at ${claims.exp}; current time is ${Math.floor(at.getTime() / 1000)}.`,
            digest,
          );
        case 'malformed':
          return oauthError(400, 'invalid_grant', 'Unable to parse the ID Token.', digest);
        default:
          return oauthError(400, 'invalid_grant', 'Invalid ID Token signature.', digest);
      }
    }
    const { payload, audiences } = verified;
    if (payload.iss !== provider.issuer) {
      return oauthError(
        400,
        'invalid_grant',
        `The issuer in ID Token ${payload.iss} does not match the expected ones: ${provider.issuer}.`,
        digest,
      );
    }
    const allowed = provider.allowedAudiences ?? [
      `//iam.googleapis.com/${provider.name}`,
      `https://iam.googleapis.com/${provider.name}`,
    ];
    const audience = audiences.find((a) => allowed.includes(a));
    if (!audience) {
      return oauthError(
        400,
        'invalid_grant',
        `The audience in ID Token [${audiences.join(', ')}] does not match the expected audience.`,
        digest,
      );
    }
    // The provider's attribute mapping names the principal: google.subject from one claim.
    const mapping = provider.attributeMapping ?? { 'google.subject': 'assertion.sub' };
    const claim = /^assertion\.([A-Za-z_][\w]*)$/.exec(mapping['google.subject'] ?? '')?.[1];
    const unsupported = Object.keys(mapping).filter((k) => k !== 'google.subject');
    if (!claim || unsupported.length > 0) {
      return oauthError(
        400,
        'invalid_request',
        `The attribute mapping ${JSON.stringify(mapping)} is not supported by this stand-in: map google.subject=assertion.<claim>.`,
        digest,
      );
    }
    const mapped = (payload as Record<string, unknown>)[claim];
    if (typeof mapped !== 'string' || mapped === '') {
      return oauthError(
        400,
        'invalid_grant',
        `The mapped attribute 'google.subject' must not be empty (assertion.${claim}).`,
        digest,
      );
    }
    const principal = `principal://iam.googleapis.com/projects/${providerMatch[2]}/locations/global/workloadIdentityPools/${providerMatch[3]}/subject/${mapped}`;
    const accessToken = `ya29.d.${randomBytes(96).toString('base64url')}`;
    const exchange = {
      provider: provider.name,
      principal,
      subject: payload.sub,
      audience,
      tokenDigest: digest,
      accessToken,
    };
    cloud.exchanges.push(exchange);
    federated.set(accessToken, { ...exchange, expires: now() + 3599_000 });
    return json(200, {
      access_token: accessToken,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: 'Bearer',
      expires_in: 3599,
    });
  }

  function bearer(req: StandInRequest): string | undefined {
    return /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  }

  function unauthenticated(service: string): StandInResponse {
    return apiError(
      service,
      401,
      'UNAUTHENTICATED',
      'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
    );
  }

  function generateAccessToken(req: StandInRequest, email: string): StandInResponse {
    const caller = federated.get(bearer(req) ?? '');
    if (!caller || caller.expires < now()) return unauthenticated('iamcredentials');
    let body: { scope?: string[]; lifetime?: string };
    try {
      body = JSON.parse(req.body || '{}');
    } catch {
      return apiError('iamcredentials', 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
    }
    if (!Array.isArray(body.scope) || body.scope.length === 0) {
      return apiError('iamcredentials', 400, 'INVALID_ARGUMENT', 'Scope required.');
    }
    const lifetime = body.lifetime === undefined ? 3600 : Number(/^(\d+)s$/.exec(body.lifetime)?.[1] ?? NaN);
    if (!(lifetime >= 1 && lifetime <= 3600)) {
      return apiError(
        'iamcredentials',
        400,
        'INVALID_ARGUMENT',
        `The lifetime value "${body.lifetime}" is invalid: it must be between 1s and 3600s.`,
      );
    }
    const account = options.serviceAccounts.find((s) => s.email === email);
    if (!account?.workloadIdentityUsers.includes(caller.principal)) {
      return apiError(
        'iamcredentials',
        403,
        'PERMISSION_DENIED',
        "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).",
        [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'IAM_PERMISSION_DENIED',
            domain: 'iam.googleapis.com',
            metadata: { permission: 'iam.serviceAccounts.getAccessToken' },
          },
        ],
      );
    }
    const accessToken = `ya29.c.${randomBytes(96).toString('base64url')}`;
    const record = { email, principal: caller.principal, accessToken, lifetimeSeconds: lifetime };
    cloud.impersonations.push(record);
    const expires = now() + lifetime * 1000;
    impersonated.set(accessToken, { ...record, expires });
    return json(200, { accessToken, expireTime: new Date(expires).toISOString().replace(/\.\d{3}Z$/, 'Z') });
  }

  /** Regional access boundary look-up (google-auth, in the background): no boundary. */
  function allowedLocations(req: StandInRequest): StandInResponse {
    const token = bearer(req) ?? '';
    const holder = federated.get(token) ?? impersonated.get(token);
    if (!holder || holder.expires < now()) return unauthenticated('iamcredentials');
    return json(200, { locations: [], encodedLocations: '0x0' });
  }

  function getProject(req: StandInRequest, number: string): StandInResponse {
    const token = bearer(req) ?? '';
    const holder = federated.get(token) ?? impersonated.get(token);
    if (!holder || holder.expires < now()) return unauthenticated('cloudresourcemanager');
    const projectId = options.projects[number];
    if (!projectId) {
      return apiError('cloudresourcemanager', 403, 'PERMISSION_DENIED', 'The caller does not have permission');
    }
    cloud.projectLookups.push({ project: number, accessToken: token });
    return json(200, {
      projectNumber: number,
      projectId,
      lifecycleState: 'ACTIVE',
      name: projectId,
      createTime: '2024-01-01T00:00:00.000Z',
    });
  }

  return cloud;
}

function json(status: number, body: unknown): StandInResponse {
  return { status, headers: { 'content-type': 'application/json; charset=UTF-8' }, body: JSON.stringify(body) };
}
