// The GCP provider's options: flags, and tenant policy's overrides of them (gcp/index.ts).

export interface GcpOptions {
  defaultTokenExpiration: number;
  /** CLOUDSDK_COMPUTE_REGION for containers that do not set it. */
  region: string | undefined;
  /** Projected token audience when the ServiceAccount names none; default: the dialect's. */
  audience: string | undefined;
  /** Image of the pfnet dialect's gcloud setup init container (pfnet's -gcloud-image). */
  gcloudImage?: string;
  /** File mode of the pfnet dialect's token and credential volumes (pfnet's -token-default-mode). */
  fileMode?: number;
  /** Resources of the gcloud setup init container (pfnet's -setup-container-resources). */
  setupResources?: Record<string, unknown>;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
  /** pfnet dialect: the mode when the ServiceAccount names none and has an email (v0.7.0: gcloud). */
  defaultInjectionMode?: 'gcloud' | 'direct';
  /** pfnet dialect, direct mode: gcloud's variables and config volume too (pfnet's main, PR #152). */
  directGcloud?: boolean;
}
