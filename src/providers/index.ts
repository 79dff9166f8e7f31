import type { Config } from '../config.ts';
import { createAwsProvider } from './aws.ts';
import { createAzureProvider } from './azure.ts';
import { createGcpProvider } from './gcp.ts';
import type { PodProvider } from './types.ts';

export function createProviders(config: Config): PodProvider[] {
  return [
    createAwsProvider({
      annotationPrefix: config.awsAnnotationPrefix,
      defaultAudience: config.awsAudience,
      defaultTokenExpiration: config.awsTokenExpiration,
      region: config.awsDefaultRegion,
      regionalStsEndpoints: config.awsStsRegionalEndpoints,
      strict: config.strict,
    }),
    createAzureProvider({
      tenantId: config.azureTenantId,
      cloud: config.azureCloud,
      audience: config.azureAudience,
      defaultTokenExpiration: config.azureTokenExpiration,
      strict: config.strict,
    }),
    createGcpProvider({
      defaultTokenExpiration: config.gcpTokenExpiration,
      region: config.gcpDefaultRegion,
      audience: config.gcpAudience,
      gcloudImage: config.gcpGcloudImage,
      fileMode: config.gcpFileMode,
      setupResources: config.gcpSetupContainerResources,
      strict: config.strict,
    }),
  ];
}

/** The ServiceAccount annotation prefixes any provider reads: all the cache keeps. */
export function annotationPrefixes(providers: readonly PodProvider[]): string[] {
  return [...new Set(providers.flatMap((p) => p.annotationPrefixes))];
}
