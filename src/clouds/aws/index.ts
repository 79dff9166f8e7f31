// AWS as one Cloud: IAM Roles for Service Accounts for Pods, GEP-26 Secrets for the rest.
import type { Cloud } from '../types.ts';
import { awsPeerMetrics } from './metrics.ts';
import { awsPolicy, type AwsDeclared, type AwsField } from './policy.ts';
import { awsTrustPart, type AwsTrust } from './trust.ts';
import type { AwsOptions } from './options.ts';
import { createAwsProvider } from './pod.ts';
import { createAwsSecretProvider } from './secret.ts';

export const awsCloud: Cloud<AwsOptions, AwsDeclared, AwsField, AwsTrust> = {
  name: 'aws',
  options: (config) => ({
    annotationPrefix: config.awsAnnotationPrefix,
    defaultAudience: config.awsAudience,
    defaultTokenExpiration: config.awsTokenExpiration,
    region: config.awsDefaultRegion,
    regionalStsEndpoints: config.awsStsRegionalEndpoints,
    roleSessionName: config.awsRoleSessionName,
    strict: config.strict,
    roleArnBase: config.awsRoleArnBase,
    containerCredentials: config.awsContainerCredentialsConfig && {
      associations: config.awsContainerCredentialsConfig,
      audience: config.awsContainerCredentialsAudience,
      fullUri: config.awsContainerCredentialsFullUri,
      mountPath: config.awsContainerCredentialsTokenMountPath,
      volumeName: config.awsContainerCredentialsTokenVolumeName,
      tokenPath: config.awsContainerCredentialsTokenPath,
    },
  }),
  withOverrides: (options, { values: o }) => ({
    ...options,
    region: o.region ?? options.region,
    defaultAudience: o.audience ?? options.defaultAudience,
    defaultTokenExpiration: o.tokenExpirationSeconds ?? options.defaultTokenExpiration,
  }),
  podProvider: createAwsProvider,
  secretProvider: (config) =>
    createAwsSecretProvider({ audience: config.awsAudience, defaultRegion: config.awsDefaultRegion }),
  policy: awsPolicy,
  trust: awsTrustPart,
  peerMetrics: awsPeerMetrics,
  start: (settings, log) => {
    const associations = settings.awsContainerCredentialsConfig;
    if (!associations) return () => {};
    if (associations.ignored.length)
      log.warn(
        { file: associations.file, ignored: associations.ignored },
        'pod identity associations: members ignored',
      );
    log.info({ file: associations.file, associations: associations.size }, 'EKS Pod Identity associations loaded');
    return associations.watch(log);
  },
};
