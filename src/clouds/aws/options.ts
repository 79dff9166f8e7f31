// The AWS provider's options and its annotation keys (under the configured prefix), read once
// at start-up and shared by both of its modes, IRSA (irsa.ts) and EKS Pod Identity (pod.ts).
import type { SessionName } from './session-name.ts';
import type { RoleArnBase } from './role-arn.ts';

export interface AwsOptions {
  /** The annotation prefix; the peer makes it a flag, so some clusters use their own. */
  annotationPrefix: string;
  defaultAudience: string;
  defaultTokenExpiration: number;
  /** AWS_REGION and AWS_DEFAULT_REGION for containers that set neither. */
  region: string | undefined;
  /** AWS_STS_REGIONAL_ENDPOINTS=regional unless a ServiceAccount says otherwise. */
  regionalStsEndpoints: boolean;
  /** --aws-role-session-name: AWS_ROLE_SESSION_NAME from the Pod's name or a literal (annotations override it). */
  roleSessionName?: SessionName;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
  /** --aws-compose-role-arn: the account and partition a bare role name completes to. */
  roleArnBase?: RoleArnBase;
  /** EKS Pod Identity: associated ServiceAccounts get container credentials instead of IRSA. */
  containerCredentials?: ContainerCredentialsOptions;
}

export interface ContainerCredentialsOptions {
  /** The associations file in force (reloaded in place when it changes). */
  associations: { has(namespace: string, serviceAccount: string): boolean };
  audience: string;
  fullUri: string;
  mountPath: string;
  volumeName: string;
  tokenPath: string;
}

/** A provider's options and its annotation keys (under its prefix), read once at start-up. */
export interface Aws {
  options: AwsOptions;
  keys: AwsKeys;
  strict: boolean;
}

type AwsKeys = ReturnType<typeof keysOf>;

export function keysOf(p: string) {
  return {
    roleArn: `${p}/role-arn`,
    roleArns: `${p}/role-arns`,
    containerProfiles: `${p}/container-profiles`,
    sourceProfiles: `${p}/source-profiles`,
    audience: `${p}/audience`,
    regional: `${p}/sts-regional-endpoints`,
    expiration: `${p}/token-expiration`,
    region: `${p}/region`,
    skipContainers: `${p}/skip-containers`,
    includeContainers: `${p}/include-containers`,
    sessionName: `${p}/role-session-name`,
  };
}
