import type { Config } from '../config.ts';
import { createAwsProvider, type AwsOptions } from '../providers/aws.ts';
import { createAzureProvider, type AzureOptions } from '../providers/azure.ts';
import { createGcpProvider, type GcpOptions } from '../providers/gcp.ts';
import type { PodProvider, ProviderName } from '../providers/types.ts';
import type { IdentityProviderSpec } from './model.ts';

/**
 * The providers' options, from the same flags as src/providers/index.ts. A declared identity
 * provider or a CEL default changes a copy of these; the Pod is then resolved again by a provider
 * built from that copy, so precedence stays the providers' own (an annotation still wins over any
 * default) and the core stays pure: options are plain data, a provider a few closures.
 */
export interface ProviderOptions {
  aws: AwsOptions;
  azure: AzureOptions;
  gcp: GcpOptions;
}

export function providerOptionsFromConfig(config: Config): ProviderOptions {
  return {
    aws: {
      annotationPrefix: config.awsAnnotationPrefix,
      defaultAudience: config.awsAudience,
      defaultTokenExpiration: config.awsTokenExpiration,
      region: config.awsDefaultRegion,
      regionalStsEndpoints: config.awsStsRegionalEndpoints,
      strict: config.strict,
    },
    azure: {
      tenantId: config.azureTenantId,
      cloud: config.azureCloud,
      audience: config.azureAudience,
      defaultTokenExpiration: config.azureTokenExpiration,
      strict: config.strict,
    },
    gcp: {
      defaultTokenExpiration: config.gcpTokenExpiration,
      region: config.gcpDefaultRegion,
      audience: config.gcpAudience,
      gcloudImage: config.gcpGcloudImage,
      fileMode: config.gcpFileMode,
      setupResources: config.gcpSetupContainerResources,
      strict: config.strict,
    },
  };
}

/** Values that replace the global ones for one identity; undefined keeps the global value. */
export interface Overrides {
  region?: string;
  tenant?: string;
  audience?: string;
  tokenExpirationSeconds?: number;
}

/** Computed defaults first, then the matched identity provider's, then the flags. */
export function overridesFor(computed: Overrides, declared: IdentityProviderSpec | undefined): Overrides {
  const d = declared?.defaults ?? {};
  return {
    region: computed.region ?? d.region,
    tenant: computed.tenant,
    audience: computed.audience ?? d.audience,
    tokenExpirationSeconds: computed.tokenExpirationSeconds ?? d.tokenExpirationSeconds,
  };
}

/**
 * A provider with the overrides applied, or undefined when they change nothing (the Pod's first
 * resolution then stands).
 */
export function providerWith(base: ProviderOptions, cloud: ProviderName, o: Overrides, declared: IdentityProviderSpec | undefined): PodProvider | undefined {
  if (cloud === 'aws') {
    const next: AwsOptions = {
      ...base.aws,
      region: o.region ?? base.aws.region,
      defaultAudience: o.audience ?? base.aws.defaultAudience,
      defaultTokenExpiration: o.tokenExpirationSeconds ?? base.aws.defaultTokenExpiration,
    };
    return changed(base.aws, next) ? createAwsProvider(next) : undefined;
  }
  if (cloud === 'azure') {
    const next: AzureOptions = {
      ...base.azure,
      tenantId: o.tenant ?? base.azure.tenantId,
      cloud: declared?.cloud ?? base.azure.cloud,
      audience: o.audience ?? base.azure.audience,
      defaultTokenExpiration: o.tokenExpirationSeconds ?? base.azure.defaultTokenExpiration,
    };
    return changed(base.azure, next) ? createAzureProvider(next) : undefined;
  }
  const next: GcpOptions = {
    ...base.gcp,
    region: o.region ?? base.gcp.region,
    audience: o.audience ?? base.gcp.audience,
    defaultTokenExpiration: o.tokenExpirationSeconds ?? base.gcp.defaultTokenExpiration,
  };
  return changed(base.gcp, next) ? createGcpProvider(next) : undefined;
}

function changed<T extends object>(a: T, b: T): boolean {
  return (Object.keys(b) as (keyof T)[]).some((k) => a[k] !== b[k]);
}
