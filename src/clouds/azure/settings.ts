// Azure's flags and their environment twins (WIW_AZURE_...), part of the webhook's settings.
import { ConfigError } from '../../errors.ts';
import { integer, type Setting, string } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';
import { AZURE_AUDIENCE, AZURE_CLOUDS, type AzureCloud } from './environments.ts';

const AZURE_CLOUD_ALIASES: Record<string, AzureCloud> = {
  azurepubliccloud: 'AzurePublicCloud',
  public: 'AzurePublicCloud',
  azureusgovernmentcloud: 'AzureUSGovernmentCloud',
  usgovernment: 'AzureUSGovernmentCloud',
  usgov: 'AzureUSGovernmentCloud',
  azurechinacloud: 'AzureChinaCloud',
  china: 'AzureChinaCloud',
  azuregermancloud: 'AzureGermanCloud',
  german: 'AzureGermanCloud',
};
function azureCloud(raw: string, flag: string): AzureCloud {
  const cloud = AZURE_CLOUD_ALIASES[raw.toLowerCase()];
  if (!cloud)
    throw new ConfigError(
      `--${flag}="${raw}" must be one of: ${Object.keys(AZURE_CLOUDS).join(', ')} (or public, usgovernment, china)`,
    );
  return cloud;
}

const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
function tenant(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!GUID.test(raw) && !/^[a-zA-Z0-9][a-zA-Z0-9.-]*\.[a-zA-Z]{2,}$/.test(raw)) {
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
      'AzurePublicCloud, AzureUSGovernmentCloud, AzureChinaCloud or AzureGermanCloud, in any case as the peer reads them (sets AZURE_AUTHORITY_HOST)',
    parse: azureCloud,
    default: 'AzurePublicCloud' as AzureCloud,
  },
  azureAudience: { flag: 'azure-audience', description: 'Token audience', parse: string, default: AZURE_AUDIENCE },
  azureTokenExpiration: {
    flag: 'azure-token-expiration',
    description: 'Token expiry in seconds when no annotation sets one',
    parse: integer(CLOUDS.azure.tokenBounds.min, CLOUDS.azure.tokenBounds.max),
    default: 3600,
  },
} satisfies Record<string, Setting<unknown>>;
