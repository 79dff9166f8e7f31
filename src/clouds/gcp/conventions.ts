// The names a Pod rendered for GCP keeps, as both dialects (pfnet's and Flux's) write them: the
// token volume and its files, the annotations read, and the variables that carry the identity.
import type { EnvVar } from '../../kube/types.ts';
import { kubeletLiteral } from '../../shell.ts';

export const GCP_VOLUME_NAME = 'gcp-iam-token';
export const GCP_MOUNT_PATH = '/var/run/secrets/sts.googleapis.com/serviceaccount';
export const GCP_TOKEN_FILE = 'token';
export const GCP_CREDENTIALS_FILE = 'federation.json';
export const GCP_CREDENTIALS_ANNOTATION = 'cloud.google.com/external-credentials-json';

/** The annotations both dialects read: the provider and email under either dialect's key, pfnet's key first. */
export const GCP_KEYS = {
  provider: ['cloud.google.com/workload-identity-provider', 'gcp.auth.fluxcd.io/workload-identity-provider'],
  email: ['cloud.google.com/service-account-email', 'iam.gke.io/gcp-service-account'],
  audience: 'cloud.google.com/audience',
  expiration: 'cloud.google.com/token-expiration',
  injectionMode: 'cloud.google.com/injection-mode',
  skipContainers: 'cloud.google.com/skip-containers',
  includeContainers: 'cloud.google.com/include-containers',
} as const;
export const RUN_AS_USER_ANNOTATION = 'cloud.google.com/gcloud-run-as-user';

/** A variable whose value comes from an annotation, a flag or tenant policy: a kubelet literal. */
export const envVar = (name: string, value: string): EnvVar => ({ name, value: kubeletLiteral(value) });

/** The variables that carry the identity: a container's own value of one means it is not used. */
export const GCP_CREDENTIAL_ENV: ReadonlySet<string> = new Set([
  'GOOGLE_APPLICATION_CREDENTIALS',
  'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE',
  'CLOUDSDK_CONFIG',
]);
