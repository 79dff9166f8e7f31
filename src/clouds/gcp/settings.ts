// GCP's flags and their environment twins (WIW_GCP_...), part of the webhook's settings.
import { ConfigError } from '../../errors.ts';
import { bool, httpsUrlList, imageReference, integer, oneOf, type Setting } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';
import { AUDIENCE, GCP_FACTS, PFNET } from './facts.ts';

/** An octal file mode such as 0440 (a leading 0 optional), as pfnet's flag takes it. */
function fileMode(raw: string, flag: string): number {
  if (!/^0?[0-7]{3}$/.test(raw.trim()))
    throw new ConfigError(`--${flag}="${raw}" is not an octal file mode (for example 0440)`);
  return parseInt(raw.trim(), 8);
}

/** --gcp-default-region: empty (pfnet's default: CLOUDSDK_COMPUTE_REGION="") or a region name. */
function region(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  const { pattern, what, example } = GCP_FACTS.region;
  if (!pattern.test(raw)) throw new ConfigError(`--${flag}="${raw}" is not ${what} (for example ${example})`);
  return raw;
}

function audience(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!AUDIENCE.pattern.test(raw)) throw new ConfigError(`--${flag}="${raw}" is not an audience: ${AUDIENCE.what}`);
  return raw;
}

function resources(raw: string, flag: string): Record<string, unknown> | undefined {
  if (raw.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {}
  const ok =
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.entries(value).every(
      ([k, v]) =>
        ['requests', 'limits'].includes(k) &&
        typeof v === 'object' &&
        v !== null &&
        Object.values(v).every((q) => typeof q === 'string'),
    );
  if (!ok)
    throw new ConfigError(`--${flag} must be JSON such as {"requests":{"cpu":"100m"},"limits":{"memory":"256Mi"}}`);
  return value as Record<string, unknown>;
}

export const GCP_SETTINGS = {
  gcpDefaultRegion: {
    flag: 'gcp-default-region',
    description: 'CLOUDSDK_COMPUTE_REGION for containers that do not set it',
    parse: region,
    default: undefined,
  },
  gcpAudience: {
    flag: 'gcp-audience',
    description:
      "Token audience when the ServiceAccount names none (default: the dialect's: sts.googleapis.com for pfnet's annotations, //iam.googleapis.com/<provider> for Flux's)",
    parse: audience,
    default: undefined,
  },
  gcpTokenExpiration: {
    flag: 'gcp-token-expiration',
    description: 'Token expiry in seconds when no annotation sets one',
    parse: integer(CLOUDS.gcp.tokenBounds.min, CLOUDS.gcp.tokenBounds.max),
    default: 86400,
  },
  gcpGcloudImage: {
    flag: 'gcp-gcloud-image',
    description:
      "Image of the gcloud setup init container of ServiceAccounts in the pfnet dialect (cloud.google.com/*) in gcloud mode (pfnet's -gcloud-image); the default is pfnet's floating tag `stable`: pin one with IMAGE:TAG@sha256:DIGEST",
    parse: imageReference,
    default: PFNET.gcloudImage,
  },
  gcpFileMode: {
    flag: 'gcp-file-mode',
    description:
      "File mode of the token and credential volumes of ServiceAccounts in the pfnet dialect, octal (pfnet's -token-default-mode)",
    parse: fileMode,
    default: PFNET.fileMode,
    defaultText: `0${PFNET.fileMode.toString(8)}`,
  },
  gcpSetupContainerResources: {
    flag: 'gcp-setup-container-resources',
    description:
      'Resources of the gcloud setup init container, as JSON (pfnet\'s -setup-container-resources), for example {"requests":{"cpu":"100m"}}',
    parse: resources,
    default: undefined as Record<string, unknown> | undefined,
  },
  gcpDefaultInjectionMode: {
    flag: 'gcp-default-injection-mode',
    description:
      "Injection mode of ServiceAccounts in the pfnet dialect that name no cloud.google.com/injection-mode and have a service account email: gcloud (pfnet v0.7.0) or direct (pfnet's main, its --default-injection-mode)",
    parse: oneOf(['gcloud', 'direct'] as const),
    default: 'gcloud' as 'gcloud' | 'direct',
  },
  gcpDirectGcloud: {
    flag: 'gcp-direct-gcloud',
    description:
      "pfnet dialect, direct mode: also set CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE and CLOUDSDK_CONFIG with a writable gcloud-config volume, so gcloud works without the setup init container (pfnet's main, its PR #152)",
    parse: bool,
    default: false,
    boolean: true,
  },
  gcpAllowedTokenUrls: {
    flag: 'gcp-allowed-token-urls',
    description: "token_url values a labelled Secret's GCP credentialsConfig may use (comma-separated https URLs)",
    parse: httpsUrlList,
    default: ['https://sts.googleapis.com/v1/token'],
  },
} satisfies Record<string, Setting<unknown>>;
