// AWS's flags and their environment twins (WIW_AWS_...), part of the webhook's settings.
import { ConfigError, errorMessage } from '../../errors.ts';
import { isDnsLabel } from '../../model.ts';
import { bool, integer, type Setting, string } from '../../settings.ts';
import { CLOUDS } from '../registry.ts';
import {
  AWS_ACCOUNT_ID,
  AWS_PARTITION,
  AWS_REGION_NAME,
  AWS_ROLE_TRUST_POLICY_LENGTH,
  EKS_CLUSTER_NAME,
} from './facts.ts';
import { type InstanceIdentity, readInstanceIdentity } from './imds.ts';
import { PodIdentityAssociations } from './pod-identity-associations.ts';
import { partitionOfRegion, type RoleArnBase } from './role-arn.ts';
import { POD_NAME, readSessionName, type SessionName } from './session-name.ts';

// The peer passes its --aws-default-region through untouched, so the flag refuses only what no
// SDK could read as a region name.
function awsRegion(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!AWS_REGION_NAME.test(raw))
    throw new ConfigError(
      `--${flag}="${raw}" is not an AWS region name (lower-case letters, digits and hyphens, for example eu-west-1 or eusc-de-east-1)`,
    );
  return raw;
}

function dnsSubdomain(raw: string, flag: string): string {
  if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(raw)) throw new ConfigError(`--${flag}="${raw}" is not a DNS subdomain`);
  return raw;
}

function associations(raw: string, flag: string): PodIdentityAssociations | undefined {
  if (raw === '') return undefined;
  try {
    return PodIdentityAssociations.read(raw);
  } catch (err) {
    throw new ConfigError(`--${flag}: ${errorMessage(err)}`);
  }
}

function clusterName(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!EKS_CLUSTER_NAME.test(raw))
    throw new ConfigError(
      `--${flag}="${raw}" is not an EKS cluster name (1 to 100 letters, digits, "-" and "_", starting with a letter or digit)`,
    );
  return raw;
}

function sessionName(raw: string, flag: string): SessionName | undefined {
  if (raw === '') return undefined;
  const read = readSessionName(raw, false);
  if (typeof read === 'string') throw new ConfigError(`--${flag}="${raw}" ${read}`);
  return read;
}

function nonEmpty(raw: string, flag: string): string {
  if (raw.trim() === '') throw new ConfigError(`--${flag} must not be empty`);
  return raw;
}

function absolutePath(raw: string, flag: string): string {
  if (!raw.startsWith('/') || raw.split('/').includes('..'))
    throw new ConfigError(`--${flag}="${raw}" is not an absolute path without ".."`);
  return raw.replace(/\/+$/, '') || '/';
}

function fileName(raw: string, flag: string): string {
  if (raw === '' || raw.startsWith('/') || raw.split('/').includes('..'))
    throw new ConfigError(`--${flag}="${raw}" is not a relative file path without ".."`);
  return raw;
}

function volumeName(raw: string, flag: string): string {
  if (!isDnsLabel(raw)) throw new ConfigError(`--${flag}="${raw}" is not a volume name (a DNS label)`);
  return raw;
}

function accountId(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!AWS_ACCOUNT_ID.test(raw)) throw new ConfigError(`--${flag}="${raw}" is not an AWS account id (12 digits)`);
  return raw;
}

function partition(raw: string, flag: string): string | undefined {
  if (raw === '') return undefined;
  if (!AWS_PARTITION.test(raw))
    throw new ConfigError(`--${flag}="${raw}" is not an AWS partition (aws, aws-cn, aws-us-gov, ...)`);
  return raw;
}

export const AWS_SETTINGS = {
  awsAnnotationPrefix: {
    flag: 'aws-annotation-prefix',
    description: 'Annotation prefix of the AWS keys',
    parse: dnsSubdomain,
    default: 'eks.amazonaws.com',
  },
  awsDefaultRegion: {
    flag: 'aws-default-region',
    description: 'AWS_REGION and AWS_DEFAULT_REGION for containers that set neither',
    parse: awsRegion,
    default: undefined,
  },
  awsAudience: {
    flag: 'aws-audience',
    description: 'Token audience when the ServiceAccount names none',
    parse: string,
    default: 'sts.amazonaws.com',
  },
  awsTokenExpiration: {
    flag: 'aws-token-expiration',
    description: 'Token expiry in seconds when no annotation sets one',
    parse: integer(CLOUDS.aws.tokenBounds.min, CLOUDS.aws.tokenBounds.max),
    default: 86400,
  },
  awsStsRegionalEndpoints: {
    flag: 'aws-sts-regional-endpoints',
    description: 'Inject AWS_STS_REGIONAL_ENDPOINTS=regional unless the ServiceAccount says otherwise',
    parse: bool,
    default: false,
    boolean: true,
  },
  // Off unless asked: the SDKs then name the session themselves (a timestamp or a random one).
  awsRoleSessionName: {
    flag: 'aws-role-session-name',
    description: `AWS_ROLE_SESSION_NAME for IRSA containers that set none: "${POD_NAME}" (the Pod's name, through the downward API) or a literal RoleSessionName; a role-session-name annotation overrides it`,
    parse: sessionName,
    default: undefined,
  },
  // Bare role names completed to ARNs, as the peer's --compose-role-arn (its PR #95).
  awsComposeRoleArn: {
    flag: 'aws-compose-role-arn',
    description:
      'Complete a role-arn annotation without "arn:" (a role name or path) to arn:<partition>:iam::<account>:role/<value>',
    parse: bool,
    default: false,
    boolean: true,
  },
  awsComposeRoleArnAccount: {
    flag: 'aws-compose-role-arn-account',
    description:
      "With --aws-compose-role-arn: the account (12 digits); default: the EC2 instance identity document's, read at start-up as the peer does",
    parse: accountId,
    default: undefined,
  },
  awsComposeRoleArnPartition: {
    flag: 'aws-compose-role-arn-partition',
    description:
      "With --aws-compose-role-arn: the partition; default: the one of the instance identity document's region, else of --aws-default-region, else aws",
    parse: partition,
    default: undefined,
  },
  // EKS Pod Identity (container credentials), as the peer's --watch-container-credentials-config.
  awsContainerCredentialsConfig: {
    flag: 'aws-container-credentials-config',
    description:
      'File of EKS Pod Identity associations ({"identities":[{"namespace","serviceAccount"[,"roleArn"]}]}): those ServiceAccounts get container credentials instead of IRSA; reloaded when it changes',
    parse: associations,
    default: undefined,
  },
  // What `trust` and `doctor` need of the AWS side besides the flags above (docs/trust.md).
  awsEksClusterName: {
    flag: 'aws-eks-cluster-name',
    description:
      'trust: the EKS cluster named in the aws eks create-pod-identity-association commands it prints (default: "$EKS_CLUSTER_NAME" in them)',
    parse: clusterName,
    default: undefined,
  },
  awsRoleTrustPolicyLength: {
    flag: 'aws-role-trust-policy-length',
    description: `trust and doctor: the account's IAM quota "Role trust policy length" (${AWS_ROLE_TRUST_POLICY_LENGTH.default}; up to ${AWS_ROLE_TRUST_POLICY_LENGTH.max} once raised); a role whose policy exceeds it is split`,
    parse: integer(AWS_ROLE_TRUST_POLICY_LENGTH.default, AWS_ROLE_TRUST_POLICY_LENGTH.max),
    default: AWS_ROLE_TRUST_POLICY_LENGTH.default,
  },
  awsContainerCredentialsAudience: {
    flag: 'aws-container-credentials-audience',
    description: 'Token audience for EKS Pod Identity',
    parse: nonEmpty,
    default: 'pods.eks.amazonaws.com',
  },
  awsContainerCredentialsFullUri: {
    flag: 'aws-container-credentials-full-uri',
    description: 'AWS_CONTAINER_CREDENTIALS_FULL_URI for EKS Pod Identity (the Pod Identity Agent)',
    parse: nonEmpty,
    default: 'http://169.254.170.23/v1/credentials',
  },
  awsContainerCredentialsTokenMountPath: {
    flag: 'aws-container-credentials-token-mount-path',
    description: 'Where EKS Pod Identity tokens are mounted',
    parse: absolutePath,
    default: '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount',
  },
  awsContainerCredentialsTokenVolumeName: {
    flag: 'aws-container-credentials-token-volume-name',
    description: 'Name of the EKS Pod Identity token volume',
    parse: volumeName,
    default: 'eks-pod-identity-token',
  },
  awsContainerCredentialsTokenPath: {
    flag: 'aws-container-credentials-token-path',
    description: 'File name of the EKS Pod Identity token in its volume',
    parse: fileName,
    default: 'eks-pod-identity-token',
  },
} satisfies Record<string, Setting<unknown>>;

type AwsSettingValues = {
  [K in keyof typeof AWS_SETTINGS]: ReturnType<(typeof AWS_SETTINGS)[K]['parse']> | (typeof AWS_SETTINGS)[K]['default'];
};

/**
 * What the AWS settings derive at start-up: the account and partition bare role names complete
 * to. An explicit account needs no look-up; without one, `completeAwsSettings` reads the
 * instance identity document.
 */
export function deriveAwsSettings(c: AwsSettingValues): { awsRoleArnBase?: RoleArnBase } {
  if (!c.awsComposeRoleArn) {
    if (c.awsComposeRoleArnAccount !== undefined || c.awsComposeRoleArnPartition !== undefined)
      throw new ConfigError(
        '--aws-compose-role-arn-account and --aws-compose-role-arn-partition need --aws-compose-role-arn',
      );
    return {};
  }
  if (c.awsComposeRoleArnAccount === undefined) return {};
  return {
    awsRoleArnBase: {
      account: c.awsComposeRoleArnAccount,
      partition:
        c.awsComposeRoleArnPartition ??
        (c.awsDefaultRegion === undefined ? 'aws' : partitionOfRegion(c.awsDefaultRegion)),
    },
  };
}

/** The look-up `deriveAwsSettings` leaves to start-up: the instance identity document, read once. */
export async function completeAwsSettings(
  c: AwsSettingValues & { awsRoleArnBase?: RoleArnBase },
  read: () => Promise<InstanceIdentity> = readInstanceIdentity,
): Promise<{ awsRoleArnBase?: RoleArnBase }> {
  if (!c.awsComposeRoleArn || c.awsRoleArnBase) return {};
  const identity = await read();
  return {
    awsRoleArnBase: {
      account: identity.accountId,
      partition: c.awsComposeRoleArnPartition ?? partitionOfRegion(identity.region),
    },
  };
}
