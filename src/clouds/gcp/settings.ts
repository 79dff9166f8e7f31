// GCP's flags and their environment twins (WIW_GCP_...), part of the webhook's settings.
import { httpsUrlList, integer, optionalString, type Setting } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';

export const GCP_SETTINGS = {
  gcpDefaultRegion: { flag: 'gcp-default-region', description: 'CLOUDSDK_COMPUTE_REGION for containers that do not set it', parse: optionalString, default: undefined },
  gcpAudience: { flag: 'gcp-audience', description: 'Token audience when the ServiceAccount names none (default: //iam.googleapis.com/<provider>)', parse: optionalString, default: undefined },
  gcpTokenExpiration: { flag: 'gcp-token-expiration', description: 'Token expiry in seconds when no annotation sets one', parse: integer(CLOUDS.gcp.tokenBounds.min, CLOUDS.gcp.tokenBounds.max), default: 86400 },
  gcpAllowedTokenUrls: { flag: 'gcp-allowed-token-urls', description: 'token_url values a labelled Secret\'s GCP credentialsConfig may use (comma-separated https URLs)', parse: httpsUrlList, default: ['https://sts.googleapis.com/v1/token'] },
} satisfies Record<string, Setting<unknown>>;
