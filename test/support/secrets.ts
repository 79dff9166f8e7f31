// Builders for GEP-26 Secrets (golden, preview and e2e tests); support/token-requestor.ts starts
// the token requestor for the e2e tests.
import fastJsonPatch from 'fast-json-patch';
import type { Secret } from '../../src/kube/types.ts';
import type { PatchOperation } from '../../src/mutate/patch.ts';
import { CLIENT, GCP_AUDIENCE, GCP_EMAIL, GCP_PROJECT, ROLE_ARN, SUBSCRIPTION, TENANT } from './identities.ts';

export const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');
export const unb64 = (value: string | undefined): string | undefined =>
  value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');

export const IMPERSONATION_URL = `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${GCP_EMAIL}:generateAccessToken`;

export const awsConfig = { roleARN: ROLE_ARN };
export const azureConfig = { clientID: CLIENT, tenantID: TENANT, subscriptionID: SUBSCRIPTION };
export const gcpCredentials = {
  universe_domain: 'googleapis.com',
  type: 'external_account',
  audience: GCP_AUDIENCE,
  subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
  token_url: 'https://sts.googleapis.com/v1/token',
  service_account_impersonation_url: IMPERSONATION_URL,
};
export const gcpConfig = { projectID: GCP_PROJECT, credentialsConfig: gcpCredentials };

export interface SecretOptions {
  name?: string;
  namespace?: string;
  /** The project's label value (default: the provider); null: none. */
  provider?: string | null;
  /** Gardener's two labels with this provider. */
  gardener?: string;
  labels?: Record<string, string>;
  /** The service-account annotation; null: none. Default: "app". */
  serviceAccount?: string | null;
  annotations?: Record<string, string>;
  /** The config: an object becomes JSON, a string is taken as is; null: no config key. */
  config?: unknown;
  /** Other data keys, as text. */
  data?: Record<string, string>;
}

export function labelledSecret(provider: string, options: SecretOptions = {}): Secret {
  const labels: Record<string, string> = { ...options.labels };
  const own = options.provider === undefined ? provider : options.provider;
  if (own !== null) labels['workload-identity-webhook.io/provider'] = own;
  if (options.gardener) {
    labels['security.gardener.cloud/purpose'] = 'workload-identity-token-requestor';
    labels['workloadidentity.security.gardener.cloud/provider'] = options.gardener;
  }
  const annotations: Record<string, string> = { ...options.annotations };
  const sa = options.serviceAccount === undefined ? (own !== null ? 'app' : null) : options.serviceAccount;
  if (sa !== null) annotations['workload-identity-webhook.io/service-account'] = sa;
  const data: Record<string, string> = {};
  const defaults: Record<string, unknown> = { aws: awsConfig, azure: azureConfig, gcp: gcpConfig };
  const config = options.config === undefined ? (defaults[provider] ?? {}) : options.config;
  if (config !== null) data.config = b64(typeof config === 'string' ? config : JSON.stringify(config));
  for (const [k, v] of Object.entries(options.data ?? {})) data[k] = b64(v);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: options.name ?? `${provider}-credentials`,
      namespace: options.namespace ?? 'team-a',
      labels,
      ...(Object.keys(annotations).length ? { annotations } : {}),
    },
    type: 'Opaque',
    data,
  };
}

/** Applies a patch the way the API server does: to a copy, validating every operation. */
export function applySecretPatch(secret: Secret, patch: PatchOperation[]): Secret {
  return fastJsonPatch.applyPatch(structuredClone(secret), patch as fastJsonPatch.Operation[], true, false).newDocument;
}

/** The Secret's data decoded to text. */
export function textData(secret: { data?: Record<string, string> | null } | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(secret?.data ?? {}).map(([k, v]) => [k, unb64(v)!]));
}

/** A JWT-shaped token with chosen claims and no valid signature: what a stale or foreign token looks like. */
export function fakeJwt(claims: Record<string, unknown>): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256', kid: 'fake' })}.${part(claims)}.${Buffer.from('not-a-signature').toString('base64url')}`;
}
