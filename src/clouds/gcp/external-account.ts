// Google's names as the annotations write them (a workload identity provider, a Google service
// account's email) and the `external_account` credential file they make: read by the Pod
// rendering, the Secret derivation, tenant policy and the trust commands alike.
import { denial, type Denial } from '../../errors.ts';
import { PROJECT_ID_PART } from './facts.ts';

export const PROVIDER_PATTERN =
  /^projects\/(\d{1,20})\/locations\/global\/workloadIdentityPools\/([a-z0-9-]{4,32})\/providers\/([a-z0-9-]{4,32})$/;
export const PROVIDER_FORM =
  'projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>';
export const EMAIL_PATTERN = /^[a-zA-Z0-9._%+-]+@([a-zA-Z0-9.-]+)$/;
const SA_DOMAIN = new RegExp(`^(${PROJECT_ID_PART})\\.iam\\.gserviceaccount\\.com$`);

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
  if (!match)
    return denial(
      'InvalidWorkloadIdentityProvider',
      `${where}="${value}" is not a workload identity provider; expected ${PROVIDER_FORM}`,
    );
  return { name, projectNumber: match[1], pool: match[2], provider: match[3] };
}

/** The project of a Google service account email (`name@PROJECT.iam.gserviceaccount.com`), if any. */
export function projectOfEmail(email: string): string | undefined {
  const domain = EMAIL_PATTERN.exec(email)?.[1];
  return domain ? SA_DOMAIN.exec(domain)?.[1] : undefined;
}

interface ExternalAccountInput {
  provider: WorkloadIdentityProvider;
  /** Google service account to impersonate; undefined for direct resource access. */
  serviceAccountEmail: string | undefined;
  tokenFile: string;
}

/**
 * The `external_account` file exactly as `gcloud iam workload-identity-pools create-cred-config`
 * writes it, key order included.
 */
export function externalAccountConfig({
  provider,
  serviceAccountEmail,
  tokenFile,
}: ExternalAccountInput): Record<string, unknown> {
  const config: Record<string, unknown> = {
    universe_domain: 'googleapis.com',
    type: 'external_account',
    audience: `//iam.googleapis.com/${provider.name}`,
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: 'https://sts.googleapis.com/v1/token',
  };
  if (serviceAccountEmail) {
    config.service_account_impersonation_url = `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${serviceAccountEmail}:generateAccessToken`;
  }
  config.credential_source = { file: tokenFile, format: { type: 'text' } };
  if (!serviceAccountEmail) config.token_info_url = 'https://sts.googleapis.com/v1/introspect';
  return config;
}
