// Azure as one Cloud: Microsoft Entra Workload ID for Pods, GEP-26 Secrets for the rest.
import type { Cloud } from '../types.ts';
import { azurePeerMetrics } from './metrics.ts';
import {
  azurePolicy,
  type AzureDeclared,
  type AzureField,
  type AzurePolicyOptions,
  withAuthorityHost,
} from './policy.ts';
import { azureTrustPart, type AzureTrust } from './trust.ts';
import { createAzureProvider } from './pod.ts';
import { createAzureSecretProvider } from './secret.ts';

export const azureCloud: Cloud<AzurePolicyOptions, AzureDeclared, AzureField, AzureTrust> = {
  name: 'azure',
  options: (config) => ({
    tenantId: config.azureTenantId,
    cloud: config.azureCloud,
    stack: config.azureStack,
    proxy: {
      image: config.azureProxyImage,
      initImage: config.azureProxyInitImage,
      nativeSidecar: config.azureProxyNativeSidecar,
      logLevel: config.azureProxyLogLevel,
    },
    audience: config.azureAudience,
    defaultTokenExpiration: config.azureTokenExpiration,
    strict: config.strict,
  }),
  withOverrides: (options, { values: o, declared }) => ({
    ...options,
    tenantId: o.tenant ?? options.tenantId,
    cloud: declared?.cloud ?? options.cloud,
    audience: o.audience ?? options.audience,
    defaultTokenExpiration: o.tokenExpirationSeconds ?? options.defaultTokenExpiration,
    authorityHost: declared?.authorityHost ?? options.authorityHost,
  }),
  podProvider: (options) => withAuthorityHost(createAzureProvider(options), options.authorityHost),
  secretProvider: (config) =>
    createAzureSecretProvider({ audience: config.azureAudience, cloud: config.azureCloud, stack: config.azureStack }),
  policy: azurePolicy,
  trust: azureTrustPart,
  peerMetrics: azurePeerMetrics,
};
