// Azure's flags and their environment twins (WIW_AZURE_...), part of the webhook's settings.
import { ConfigError } from '../../errors.ts';
import { bool, imageReference, integer, oneOf, optionalString, type Setting, string } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';
import { GUID_PATTERN } from './facts.ts';
import {
  AZURE_AUDIENCE,
  AZURE_CLOUDS,
  AZURE_STACK_CLOUD,
  type AzureCloudName,
  type AzureStackEnvironment,
  readAzureStackEnvironment,
} from './environments.ts';

const AZURE_CLOUD_ALIASES: Record<string, AzureCloudName> = {
  azurepubliccloud: 'AzurePublicCloud',
  public: 'AzurePublicCloud',
  azureusgovernmentcloud: 'AzureUSGovernmentCloud',
  usgovernment: 'AzureUSGovernmentCloud',
  usgov: 'AzureUSGovernmentCloud',
  azurechinacloud: 'AzureChinaCloud',
  china: 'AzureChinaCloud',
  azuregermancloud: 'AzureGermanCloud',
  german: 'AzureGermanCloud',
  azurestackcloud: AZURE_STACK_CLOUD,
};
function azureCloud(raw: string, flag: string): AzureCloudName {
  const cloud = AZURE_CLOUD_ALIASES[raw.toLowerCase()];
  if (!cloud)
    throw new ConfigError(
      `--${flag}="${raw}" must be one of: ${[...Object.keys(AZURE_CLOUDS), AZURE_STACK_CLOUD].join(', ')} (or public, usgovernment, china)`,
    );
  return cloud;
}

function tenant(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!GUID_PATTERN.test(raw) && !/^[a-zA-Z0-9][a-zA-Z0-9.-]*\.[a-zA-Z]{2,}$/.test(raw)) {
    throw new ConfigError(`--${flag}="${raw}" is not a tenant id; expected a GUID or the tenant's domain`);
  }
  return raw;
}

export const AZURE_SETTINGS = {
  azureTenantId: {
    flag: 'azure-tenant-id',
    description: 'Tenant for ServiceAccounts without the tenant-id annotation',
    parse: tenant,
    default: undefined,
  },
  azureCloud: {
    flag: 'azure-cloud',
    description:
      'AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud, AzureGermanCloud or AzureStackCloud (with --azure-environment-filepath), in any case as the peer reads them (sets AZURE_AUTHORITY_HOST)',
    parse: azureCloud,
    default: 'AzurePublicCloud' as AzureCloudName,
  },
  azureEnvironmentFilepath: {
    flag: 'azure-environment-filepath',
    description:
      "With --azure-cloud=AzureStackCloud: the stack's environment JSON file (the peer's AZURE_ENVIRONMENT_FILEPATH); its activeDirectoryEndpoint becomes AZURE_AUTHORITY_HOST",
    parse: optionalString,
    default: undefined,
  },
  // The peer's proxy for Pods annotated azure.workload.identity/inject-proxy-sidecar; its images
  // are the peer's release images (its Makefile's REGISTRY and IMAGE_VERSION).
  azureProxyImage: {
    flag: 'azure-proxy-image',
    description:
      "Image of the azwi-proxy sidecar (the peer's PROXY_IMAGE); the default is the peer's release tag, which its registry could move: pin one with IMAGE:TAG@sha256:DIGEST",
    parse: imageReference,
    default: 'mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0',
  },
  azureProxyInitImage: {
    flag: 'azure-proxy-init-image',
    description:
      "Image of the azwi-proxy-init init container (the peer's PROXY_INIT_IMAGE); the default is the peer's release tag, which its registry could move: pin one with IMAGE:TAG@sha256:DIGEST",
    parse: imageReference,
    default: 'mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.6.0',
  },
  azureProxyNativeSidecar: {
    flag: 'azure-proxy-native-sidecar',
    description:
      'Run azwi-proxy as a native sidecar (an init container with restartPolicy Always), as the peer does on Kubernetes 1.32+; false: a first container, as on older clusters',
    parse: bool,
    default: true,
  },
  azureProxyLogLevel: {
    flag: 'azure-proxy-log-level',
    description: '--log-level of azwi-proxy (the peer passes its own log level: warning, info, debug, trace or all)',
    parse: oneOf(['warning', 'info', 'debug', 'trace', 'all'] as const),
    default: 'info' as 'warning' | 'info' | 'debug' | 'trace' | 'all',
  },
  azureAudience: { flag: 'azure-audience', description: 'Token audience', parse: string, default: AZURE_AUDIENCE },
  azureTokenExpiration: {
    flag: 'azure-token-expiration',
    description: 'Token expiry in seconds when no annotation sets one',
    parse: integer(CLOUDS.azure.tokenBounds.min, CLOUDS.azure.tokenBounds.max),
    default: 3600,
  },
} satisfies Record<string, Setting<unknown>>;

/** AzureStackCloud and its environment file go together; the file is read once, at start-up. */
export function deriveAzureSettings(c: { azureCloud: AzureCloudName; azureEnvironmentFilepath?: string }): {
  azureStack?: AzureStackEnvironment;
} {
  if (c.azureCloud === AZURE_STACK_CLOUD) {
    if (c.azureEnvironmentFilepath === undefined)
      throw new ConfigError(
        "--azure-cloud=AzureStackCloud needs --azure-environment-filepath: the JSON file of the stack's endpoints (the peer's AZURE_ENVIRONMENT_FILEPATH), whose activeDirectoryEndpoint becomes AZURE_AUTHORITY_HOST",
      );
    return { azureStack: readAzureStackEnvironment(c.azureEnvironmentFilepath, 'azure-environment-filepath') };
  }
  if (c.azureEnvironmentFilepath !== undefined) {
    throw new ConfigError(
      `--azure-environment-filepath is read only with --azure-cloud=AzureStackCloud (now ${c.azureCloud}): set both or neither`,
    );
  }
  return {};
}
