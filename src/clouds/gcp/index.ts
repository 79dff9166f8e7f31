// GCP as one Cloud: Workload Identity Federation for Pods, GEP-26 Secrets for the rest.
import type { Cloud } from '../types.ts';
import { gcpPeerMetrics } from './metrics.ts';
import { gcpPolicy, type GcpDeclared, type GcpField } from './policy.ts';
import { gcpTrustPart, type GcpTrust } from './trust.ts';
import type { GcpOptions } from './options.ts';
import { createGcpProvider } from './pod.ts';
import { createGcpSecretProvider } from './secret.ts';
import { withNamedProviders } from './providers.ts';

export const gcpCloud: Cloud<GcpOptions, GcpDeclared, GcpField, GcpTrust> = {
  name: 'gcp',
  options: (config) => ({
    defaultTokenExpiration: config.gcpTokenExpiration,
    region: config.gcpDefaultRegion,
    audience: config.gcpAudience,
    gcloudImage: config.gcpGcloudImage,
    fileMode: config.gcpFileMode,
    setupResources: config.gcpSetupContainerResources,
    defaultInjectionMode: config.gcpDefaultInjectionMode,
    directGcloud: config.gcpDirectGcloud,
    strict: config.strict,
  }),
  withOverrides: (options, { values: o }) => ({
    ...options,
    region: o.region ?? options.region,
    audience: o.audience ?? options.audience,
    defaultTokenExpiration: o.tokenExpirationSeconds ?? options.defaultTokenExpiration,
  }),
  podProvider: (options) => withNamedProviders(createGcpProvider(options), options),
  secretProvider: (config) =>
    createGcpSecretProvider({ allowedTokenUrls: config.gcpAllowedTokenUrls, audience: config.gcpAudience }),
  policy: gcpPolicy,
  trust: gcpTrustPart,
  peerMetrics: gcpPeerMetrics,
};
