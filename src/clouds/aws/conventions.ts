// Conventions of aws/amazon-eks-pod-identity-webhook (IRSA and EKS Pod Identity) that a Pod
// rendered here keeps: the token volume's name and place, the opt-out and Pod Identity labels,
// and the variables that carry the identity.

export const AWS_VOLUME_NAME = 'aws-iam-token';
export const AWS_MOUNT_PATH = '/var/run/secrets/eks.amazonaws.com/serviceaccount';
export const AWS_TOKEN_FILE = 'token';
export const AWS_TOKEN_PATH = `${AWS_MOUNT_PATH}/${AWS_TOKEN_FILE}`;
export const AWS_SKIP_POD_LABEL = 'eks.amazonaws.com/skip-pod-identity-webhook';

/** The peer labels every Pod it gives container credentials (handler.go getPodSpecPatch). */
export const AWS_POD_IDENTITY_LABEL = 'eks.amazonaws.com/pod-identity';

/**
 * The peer leaves a container alone, mount included, when it sets its web identity, region and
 * regional STS variables itself (handler.go addEnvToContainer); so do we.
 */
function configuresItself(identityVars: readonly string[]): readonly (readonly string[])[] {
  return [identityVars, ['AWS_REGION', 'AWS_DEFAULT_REGION'], ['AWS_STS_REGIONAL_ENDPOINTS']];
}
/** The variables that carry the identity: a container's own value of one means it is not used. */
export const AWS_CREDENTIAL_ENV: ReadonlySet<string> = new Set([
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
  'AWS_CONFIG_FILE',
]);

// Built once: an injection's `configuredBy` is the same lists on every admission.
export const webIdentityConfigured = configuresItself(['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE']);
export const profilesConfigured = configuresItself(['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONFIG_FILE']);
export const containerCredentialsConfigured = configuresItself([
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
]);
