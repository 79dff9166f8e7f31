// GCP facts read by its flags, its Pod provider and tenant policy.
import { API_SERVER_TOKEN_BOUNDS, type CloudFacts } from '../facts.ts';

const GCP_REGION_PATTERN = /^[a-z]+(-[a-z]+)+\d+$/;

/**
 * What a token audience holds: a URL or a name (sts.googleapis.com, //iam.googleapis.com/projects/...,
 * https://...), without a character a shell, a quote or a space would give a meaning; the set
 * `trust` prints (src/trust/report.ts).
 */
export const AUDIENCE = {
  pattern: /^[A-Za-z0-9._~:/@%+=,-]+$/,
  what: 'only letters, digits and "-._~:/@%+=," (a URL or a name such as sts.googleapis.com)',
} as const;

/** A project id (6 to 30 of a-z, 0-9 and "-", starting with a letter), as part of a pattern. */
export const PROJECT_ID_PART = '[a-z][a-z0-9-]{4,28}[a-z0-9]';

export const GCP_FACTS = {
  title: 'GCP',
  // Google's STS wants an hour at least; shorter annotations are raised, as GKE does.
  tokenBounds: { min: 3600, max: API_SERVER_TOKEN_BOUNDS.max, belowMinimum: 'raise' },
  region: { pattern: GCP_REGION_PATTERN, what: 'a Google Cloud region', example: 'europe-west1' },
} as const satisfies CloudFacts;

/** pfnet-research/gcp-workload-identity-federation-webhook's names and defaults (webhooks/constants.go). */
export const PFNET = {
  audience: 'sts.googleapis.com',
  /** -gcp-default-region's default: pfnet injects CLOUDSDK_COMPUTE_REGION="" unless the flag is set. */
  region: '',
  gcloudImage: 'gcr.io/google.com/cloudsdktool/google-cloud-cli:stable',
  fileMode: 0o440,
  setupContainer: 'gcloud-setup',
  configVolume: 'gcloud-config',
  configMountPath: '/var/run/secrets/gcloud/config',
  directVolume: 'external-credential-config',
  directMountPath: '/var/run/secrets/workload-identity',
} as const;

/**
 * Limits of a workload identity pool provider, from the IAM API's reference of
 * projects.locations.workloadIdentityPools.providers
 * (https://cloud.google.com/iam/docs/reference/rest/v1/projects.locations.workloadIdentityPools.providers):
 * at most 10 allowed audiences (oidc.allowedAudiences), a mapped google.subject of at most 127
 * bytes (attributeMapping), an attribute condition of at most 4,096 characters
 * (attributeCondition; `trust` sets none).
 */
export const GCP_PROVIDER_LIMITS = { allowedAudiences: 10, subjectBytes: 127, attributeCondition: 4096 } as const;
