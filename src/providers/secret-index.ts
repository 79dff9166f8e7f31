import type { Config } from '../config.ts';
import { createAwsSecretProvider } from './aws-secret.ts';
import { createAzureSecretProvider } from './azure-secret.ts';
import { createGcpSecretProvider } from './gcp-secret.ts';
import type { SecretProvider } from './secret-config.ts';
import type { ProviderName } from './types.ts';

export type SecretProviders = Readonly<Record<ProviderName, SecretProvider>>;

/** The providers of GEP-26 Secrets, from the same settings as the Pod providers. */
export function createSecretProviders(config: Config): SecretProviders {
  return {
    aws: createAwsSecretProvider({ audience: config.awsAudience, defaultRegion: config.awsDefaultRegion }),
    azure: createAzureSecretProvider({ audience: config.azureAudience, cloud: config.azureCloud }),
    gcp: createGcpSecretProvider({ allowedTokenUrls: config.gcpAllowedTokenUrls, audience: config.gcpAudience }),
  };
}
