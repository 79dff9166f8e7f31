import { CLOUDS } from '../registry.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar } from '../../kube/types.ts';
import { boundExpiration, parseSeconds, splitNames, tokenVolume, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';

/**
 * Workload Identity Federation outside GKE, in the two dialects users already write:
 * pfnet-research/gcp-workload-identity-federation-webhook (`cloud.google.com/...`) and
 * Flux (`gcp.auth.fluxcd.io/workload-identity-provider` with GKE's `iam.gke.io/gcp-service-account`).
 *
 * The credential file is delivered as the peer's "direct" mode does, but inside the token's own
 * projected volume: a Pod annotation projected by the downward API. No init container, no extra
 * object to create or clean up.
 */
export const GCP_VOLUME_NAME = 'gcp-iam-token';
export const GCP_MOUNT_PATH = '/var/run/secrets/sts.googleapis.com/serviceaccount';
export const GCP_TOKEN_FILE = 'token';
export const GCP_CREDENTIALS_FILE = 'federation.json';
export const GCP_CREDENTIALS_ANNOTATION = 'cloud.google.com/external-credentials-json';

const KEYS = {
  provider: ['cloud.google.com/workload-identity-provider', 'gcp.auth.fluxcd.io/workload-identity-provider'],
  email: ['cloud.google.com/service-account-email', 'iam.gke.io/gcp-service-account'],
  audience: 'cloud.google.com/audience',
  expiration: 'cloud.google.com/token-expiration',
  injectionMode: 'cloud.google.com/injection-mode',
  skipContainers: 'cloud.google.com/skip-containers',
} as const;

const PROVIDER_PATTERN = /^projects\/(\d{1,20})\/locations\/global\/workloadIdentityPools\/([a-z0-9-]{4,32})\/providers\/([a-z0-9-]{4,32})$/;
const PROVIDER_FORM = 'projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>';
const EMAIL_PATTERN = /^[a-zA-Z0-9._%+-]+@([a-zA-Z0-9.-]+)$/;
const SA_DOMAIN = /^([a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com$/;

export interface GcpOptions {
  defaultTokenExpiration: number;
  /** CLOUDSDK_COMPUTE_REGION for containers that do not set it. */
  region: string | undefined;
  /** Projected token audience when the ServiceAccount names none; default: the provider's audience. */
  audience: string | undefined;
}

export interface WorkloadIdentityProvider {
  /** `projects/N/locations/global/workloadIdentityPools/P/providers/X` */
  name: string;
  projectNumber: string;
  pool: string;
  provider: string;
}

export function parseWorkloadIdentityProvider(value: string, where: string): WorkloadIdentityProvider | Denial {
  // The audience form (//iam.googleapis.com/projects/...) is accepted too: users paste it.
  const name = value.trim().replace(/^(?:https:)?\/\/iam\.googleapis\.com\//, '');
  const match = PROVIDER_PATTERN.exec(name);
  if (!match) return denial('InvalidWorkloadIdentityProvider', `${where}="${value}" is not a workload identity provider; expected ${PROVIDER_FORM}`);
  return { name, projectNumber: match[1], pool: match[2], provider: match[3] };
}

/** The project of a Google service account email (`name@PROJECT.iam.gserviceaccount.com`), if any. */
export function projectOfEmail(email: string): string | undefined {
  const domain = EMAIL_PATTERN.exec(email)?.[1];
  return domain ? SA_DOMAIN.exec(domain)?.[1] : undefined;
}

export interface ExternalAccountInput {
  provider: WorkloadIdentityProvider;
  /** Google service account to impersonate; undefined for direct resource access. */
  serviceAccountEmail: string | undefined;
  tokenFile: string;
}

/**
 * The `external_account` file exactly as `gcloud iam workload-identity-pools create-cred-config`
 * writes it, key order included.
 */
export function externalAccountConfig({ provider, serviceAccountEmail, tokenFile }: ExternalAccountInput): Record<string, unknown> {
  const config: Record<string, unknown> = {
    universe_domain: 'googleapis.com',
    type: 'external_account',
    audience: `//iam.googleapis.com/${provider.name}`,
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: 'https://sts.googleapis.com/v1/token',
  };
  if (serviceAccountEmail) {
    config.service_account_impersonation_url =
      `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${serviceAccountEmail}:generateAccessToken`;
  }
  config.credential_source = { file: tokenFile, format: { type: 'text' } };
  if (!serviceAccountEmail) config.token_info_url = 'https://sts.googleapis.com/v1/introspect';
  return config;
}

/** Reads one of two dialect keys; both set to different values is a conflict, not a guess. */
function dialectValue(
  annotations: Readonly<Record<string, string>>,
  keys: readonly [string, string],
  saName: string,
): [key: string, value: string] | Denial | undefined {
  const a = annotations[keys[0]]?.trim();
  const b = annotations[keys[1]]?.trim();
  if (a && b && a !== b) {
    return denial('ConflictingAnnotations', `${saName} sets both ${keys[0]}="${a}" and ${keys[1]}="${b}"; keep one`);
  }
  if (a) return [keys[0], a];
  if (b) return [keys[1], b];
  return undefined;
}

export function createGcpProvider(options: GcpOptions): PodProvider {
  return {
    name: 'gcp',
    annotationPrefixes: ['cloud.google.com/', 'gcp.auth.fluxcd.io/', 'iam.gke.io/'],
    resolvePod({ pod, serviceAccount, windows }: PodContext): Injection | Denial | undefined {
      if (!serviceAccount) return undefined;
      const sa = serviceAccount.annotations;
      const saName = `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`;
      const providerEntry = dialectValue(sa, KEYS.provider, saName);
      if (providerEntry === undefined) return undefined;
      if (isDenial(providerEntry)) return providerEntry;
      const provider = parseWorkloadIdentityProvider(providerEntry[1], `${saName} annotation ${providerEntry[0]}`);
      if (isDenial(provider)) return provider;

      const emailEntry = dialectValue(sa, KEYS.email, saName);
      if (emailEntry !== undefined && isDenial(emailEntry)) return emailEntry;
      const email = emailEntry?.[1];
      if (email !== undefined && !EMAIL_PATTERN.test(email)) {
        return denial('InvalidServiceAccountEmail', `${saName} annotation ${emailEntry![0]}="${email}" is not a Google service account email; expected NAME@PROJECT.iam.gserviceaccount.com`);
      }

      const audience = sa[KEYS.audience]?.trim() || options.audience || `//iam.googleapis.com/${provider.name}`;

      const mode = sa[KEYS.injectionMode]?.trim();
      if (mode !== undefined && mode !== '' && mode !== 'direct' && mode !== 'gcloud') {
        return denial('InvalidAnnotation', `${saName} annotation ${KEYS.injectionMode}="${mode}" must be "direct" or "gcloud"`);
      }

      let expiration = options.defaultTokenExpiration;
      const podExpiration = pod.metadata?.annotations?.[KEYS.expiration];
      const rawExpiration = podExpiration ?? sa[KEYS.expiration];
      if (rawExpiration !== undefined) {
        const parsed = parseSeconds(rawExpiration, KEYS.expiration, podExpiration !== undefined ? 'Pod' : saName);
        if (typeof parsed !== 'number') return parsed;
        expiration = parsed;
      }
      const bounded = boundExpiration(expiration, CLOUDS.gcp.tokenBounds, KEYS.expiration, saName);
      if (isDenial(bounded)) return bounded;
      expiration = bounded;

      const path = (p: string) => (windows ? windowsPath(p) : p);
      const tokenFile = path(`${GCP_MOUNT_PATH}/${GCP_TOKEN_FILE}`);
      const credentialsFile = path(`${GCP_MOUNT_PATH}/${GCP_CREDENTIALS_FILE}`);
      const credentials = JSON.stringify(externalAccountConfig({ provider, serviceAccountEmail: email, tokenFile }));

      const envGroups: EnvVar[][] = [[{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: credentialsFile }]];
      // gcloud reads its own setting, not GOOGLE_APPLICATION_CREDENTIALS; the peer's "gcloud"
      // mode logged it in with an init container, this gives the same result without one.
      if (mode === 'gcloud') envGroups.push([{ name: 'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE', value: credentialsFile }]);
      const project = email ? projectOfEmail(email) : undefined;
      if (project) {
        envGroups.push([{ name: 'CLOUDSDK_CORE_PROJECT', value: project }]);
        // The Google client libraries read this one; without it they probe the metadata
        // server (seconds of retries off GCE) before asking Resource Manager.
        envGroups.push([{ name: 'GOOGLE_CLOUD_PROJECT', value: project }]);
      }
      if (options.region) envGroups.push([{ name: 'CLOUDSDK_COMPUTE_REGION', value: options.region }]);

      const identity: Record<string, string> = {
        workloadIdentityProvider: provider.name,
        projectNumber: provider.projectNumber,
        pool: provider.pool,
        audience,
      };
      if (email) identity.serviceAccountEmail = email;

      return {
        provider: 'gcp',
        volume: tokenVolume(GCP_VOLUME_NAME, audience, expiration, GCP_TOKEN_FILE, [
          {
            path: GCP_CREDENTIALS_FILE,
            fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${GCP_CREDENTIALS_ANNOTATION}']` },
          },
        ]),
        mountPath: GCP_MOUNT_PATH,
        envGroups,
        annotations: { [GCP_CREDENTIALS_ANNOTATION]: credentials },
        skipContainers: splitNames(pod.metadata?.annotations?.[KEYS.skipContainers], ','),
        identity,
      };
    },
  };
}

