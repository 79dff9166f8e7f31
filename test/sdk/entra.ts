// Microsoft Entra ID's token endpoint for the client-credentials grant with a federated client
// assertion, and the discovery documents MSAL reads first (instance discovery and the tenant's
// OpenID configuration). The assertion is judged as Entra judges it against the application's
// federated identity credentials: issuer, subject and audience must match one exactly, the
// signature must verify with the issuer's published keys, and it must be within its validity.
// Errors are Entra's JSON with AADSTS codes.
import { randomBytes, randomUUID } from 'node:crypto';
import type { ClusterIssuer } from './oidc.ts';
import { tokenDigest } from './oidc.ts';
import type { StandInRequest, StandInResponse, StandInService } from './standin-server.ts';

export const ENTRA_HOSTS = ['login.microsoftonline.com'] as const;
const AUTHORITY = 'https://login.microsoftonline.com';

export interface FederatedCredential {
  issuer: string;
  subject: string;
  audiences: string[];
}

export interface EntraApplication {
  tenantId: string;
  clientId: string;
  federatedCredentials: FederatedCredential[];
}

export interface EntraExchange {
  tenantId: string;
  clientId: string;
  scope: string;
  subject: string;
  audience: string;
  tokenDigest: string;
  accessToken: string;
}

export interface Entra extends StandInService {
  exchanges: EntraExchange[];
  errors: { code: number; description: string; tokenDigest?: string }[];
  clockOffsetSeconds: number;
}

const CLIENT_CREDENTIALS = 'client_credentials';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export function createEntra(options: { issuer: ClusterIssuer; applications: EntraApplication[] }): Entra {
  // Read at each request: a test may add applications (and their credentials) later.
  const tenants = { has: (tenant: string) => options.applications.some((a) => a.tenantId === tenant) };

  const entra: Entra = {
    hosts: ENTRA_HOSTS,
    exchanges: [],
    errors: [],
    clockOffsetSeconds: 0,
    async handle(req) {
      const fail = (
        status: number,
        error: string,
        code: number,
        description: string,
        digest?: string,
      ): StandInResponse => {
        entra.errors.push({ code, description, tokenDigest: digest });
        return aadError(status, error, code, description);
      };
      const parts = req.path.split('/').filter(Boolean);
      // GET /common/discovery/instance?api-version=1.1&authorization_endpoint=...
      if (req.method === 'GET' && parts.length === 3 && parts[1] === 'discovery' && parts[2] === 'instance') {
        return instanceDiscovery(req);
      }
      const tenant = parts[0];
      if (tenant && !tenants.has(tenant) && !['common', 'organizations'].includes(tenant)) {
        return fail(
          400,
          'invalid_request',
          90002,
          `Tenant '${tenant}' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.`,
        );
      }
      // GET /{tenant}/v2.0/.well-known/openid-configuration
      if (req.method === 'GET' && parts.slice(1).join('/') === 'v2.0/.well-known/openid-configuration') {
        return json(200, openIdConfiguration(tenant));
      }
      // POST /{tenant}/oauth2/v2.0/token
      if (req.method === 'POST' && parts.slice(1).join('/') === 'oauth2/v2.0/token') {
        return token(tenant, new URLSearchParams(req.body), fail);
      }
      return fail(
        404,
        'invalid_request',
        900561,
        `The endpoint only accepts POST requests. Received a ${req.method} request.`,
      );
    },
  };

  async function token(
    tenantId: string,
    form: URLSearchParams,
    fail: (status: number, error: string, code: number, description: string, digest?: string) => StandInResponse,
  ): Promise<StandInResponse> {
    if (form.get('grant_type') !== CLIENT_CREDENTIALS) {
      return fail(
        400,
        'unsupported_grant_type',
        70003,
        `The app requested an unsupported grant type '${form.get('grant_type')}'.`,
      );
    }
    const clientId = form.get('client_id') ?? '';
    const app = options.applications.find((a) => a.tenantId === tenantId && a.clientId === clientId);
    if (!app) {
      return fail(
        400,
        'unauthorized_client',
        700016,
        `Application with identifier '${clientId}' was not found in the directory '${tenantId}'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant.`,
      );
    }
    const scope = form.get('scope') ?? '';
    if (!scope.split(' ').every((s) => s.endsWith('/.default'))) {
      return fail(
        400,
        'invalid_scope',
        1002012,
        `The provided value for scope ${scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`,
      );
    }
    if (form.get('client_assertion_type') !== JWT_BEARER) {
      return fail(
        401,
        'invalid_client',
        7000218,
        "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
      );
    }
    const assertion = form.get('client_assertion') ?? '';
    const digest = tokenDigest(assertion);
    const now = new Date(Date.now() + entra.clockOffsetSeconds * 1000);
    const verified = await options.issuer.verify(assertion, now);
    if (!verified.ok) {
      const claims = verified.claims ?? {};
      switch (verified.reason) {
        case 'malformed':
          return fail(401, 'invalid_client', 50027, 'JWT token is invalid or malformed.', digest);
        case 'unknown-issuer':
          return fail(
            400,
            'invalid_request',
            70021,
            noMatch(String(claims.iss), String(claims.sub), String(claims.aud)),
            digest,
          );
        case 'expired':
        case 'not-yet-valid':
          return fail(
            401,
            'invalid_client',
            700024,
            `Client assertion is not within its valid time range. Current time: ${iso(now)}, assertion valid from ${iso(new Date(Number(claims.nbf ?? claims.iat) * 1000))}, expiry time of assertion ${iso(new Date(Number(claims.exp) * 1000))}. Review the documentation at https://learn.microsoft.com/entra/identity-platform/certificate-credentials .`,
            digest,
          );
        default:
          return fail(401, 'invalid_client', 50013, 'Assertion failed signature validation.', digest);
      }
    }
    const { payload, audiences } = verified;
    const byIssuer = app.federatedCredentials.filter((f) => f.issuer === payload.iss);
    if (byIssuer.length === 0)
      return fail(400, 'invalid_request', 70021, noMatch(payload.iss, payload.sub, audiences.join(',')), digest);
    const bySubject = byIssuer.filter((f) => f.subject === payload.sub);
    if (bySubject.length === 0) {
      return fail(
        401,
        'invalid_client',
        700213,
        `No matching federated identity record found for presented assertion subject '${payload.sub}'. Check your federated identity credential Subject, Audience and Issuer against the presented assertion. https://learn.microsoft.com/entra/workload-id/workload-identity-federation`,
        digest,
      );
    }
    const match = bySubject.find((f) => f.audiences.some((a) => audiences.includes(a)));
    if (!match) {
      return fail(
        401,
        'invalid_client',
        700212,
        `No matching federated identity record found for presented assertion audience '${audiences.join(',')}'. Please note that the matching is done using a case-sensitive comparison. Check your federated identity credential Subject, Audience and Issuer against the presented assertion. https://learn.microsoft.com/entra/workload-id/workload-identity-federation`,
        digest,
      );
    }
    const audience = match.audiences.find((a) => audiences.includes(a))!;
    const accessToken = accessTokenFor(tenantId, clientId, scope);
    entra.exchanges.push({
      tenantId,
      clientId,
      scope,
      subject: payload.sub,
      audience,
      tokenDigest: digest,
      accessToken,
    });
    return json(200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: accessToken });
  }

  return entra;
}

function noMatch(issuer: string, subject: string, audience: string): string {
  return `No matching federated identity record found for presented assertion. Assertion Issuer: '${issuer}'. Assertion Subject: '${subject}'. Assertion Audience: '${audience}'. https://learn.microsoft.com/entra/workload-id/workload-identity-federation`;
}

function instanceDiscovery(req: StandInRequest): StandInResponse {
  const endpoint = req.query.get('authorization_endpoint') ?? `${AUTHORITY}/common/oauth2/v2.0/authorize`;
  const tenant = new URL(endpoint).pathname.split('/').filter(Boolean)[0] ?? 'common';
  return json(200, {
    tenant_discovery_endpoint: `${AUTHORITY}/${tenant}/v2.0/.well-known/openid-configuration`,
    'api-version': '1.1',
    metadata: [
      {
        preferred_network: 'login.microsoftonline.com',
        preferred_cache: 'login.windows.net',
        aliases: ['login.microsoftonline.com', 'login.windows.net', 'login.microsoft.com', 'sts.windows.net'],
      },
    ],
  });
}

function openIdConfiguration(tenant: string): Record<string, unknown> {
  const base = `${AUTHORITY}/${tenant}`;
  return {
    token_endpoint: `${base}/oauth2/v2.0/token`,
    token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
    jwks_uri: `${base}/discovery/v2.0/keys`,
    response_modes_supported: ['query', 'fragment', 'form_post'],
    subject_types_supported: ['pairwise'],
    id_token_signing_alg_values_supported: ['RS256'],
    response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
    scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
    issuer: `${base}/v2.0`,
    request_uri_parameter_supported: false,
    userinfo_endpoint: 'https://graph.microsoft.com/oidc/userinfo',
    authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
    device_authorization_endpoint: `${base}/oauth2/v2.0/devicecode`,
    http_logout_supported: true,
    frontchannel_logout_supported: true,
    end_session_endpoint: `${base}/oauth2/v2.0/logout`,
    claims_supported: [
      'sub',
      'iss',
      'cloud_instance_name',
      'cloud_instance_host_name',
      'cloud_graph_host_name',
      'msgraph_host',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'acr',
      'nonce',
      'preferred_username',
      'name',
      'tid',
      'ver',
      'at_hash',
      'c_hash',
      'email',
    ],
    kerberos_endpoint: `${base}/kerberos`,
    tenant_region_scope: 'EU',
    cloud_instance_name: 'microsoftonline.com',
    cloud_graph_host_name: 'graph.windows.net',
    msgraph_host: 'graph.microsoft.com',
    rbac_url: 'https://pas.windows.net',
  };
}

/** Shaped like Entra's access tokens (a JWT); its signature is not meant to verify. */
function accessTokenFor(tenantId: string, clientId: string, scope: string): string {
  const now = Math.floor(Date.now() / 1000);
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const header = { typ: 'JWT', alg: 'RS256', kid: 'stand-in' };
  const claims = {
    aud: scope.replace(/\/\.default$/, ''),
    iss: `https://sts.windows.net/${tenantId}/`,
    iat: now,
    nbf: now,
    exp: now + 3599,
    appid: clientId,
    idtyp: 'app',
    oid: randomUUID(),
    sub: randomUUID(),
    tid: tenantId,
    ver: '1.0',
    uti: randomBytes(16).toString('base64url'),
  };
  return `${b64(header)}.${b64(claims)}.${randomBytes(256).toString('base64url')}`;
}

function aadError(status: number, error: string, code: number, description: string): StandInResponse {
  const now = new Date();
  const timestamp = now
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d{3}Z$/, 'Z');
  const traceId = randomUUID();
  const correlationId = randomUUID();
  return json(status, {
    error,
    error_description: `AADSTS${code}: ${description} Trace ID: ${traceId} Correlation ID: ${correlationId} Timestamp: ${timestamp}`,
    error_codes: [code],
    timestamp,
    trace_id: traceId,
    correlation_id: correlationId,
    error_uri: `https://login.microsoftonline.com/error?code=${code}`,
  });
}

function iso(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$10000Z');
}

function json(status: number, body: unknown): StandInResponse {
  return { status, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(body) };
}
