import { CLOUDS } from '../registry.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar, Pod } from '../../kube/types.ts';
import { serviceAccountNameOf } from '../../model.ts';
import {
  boundExpiration,
  parseBool,
  parseSeconds,
  splitNames,
  tokenVolume,
  tolerated,
  windowsPath,
} from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';

/** Conventions of aws/amazon-eks-pod-identity-webhook (IAM Roles for Service Accounts). */
export const AWS_VOLUME_NAME = 'aws-iam-token';
export const AWS_MOUNT_PATH = '/var/run/secrets/eks.amazonaws.com/serviceaccount';
export const AWS_TOKEN_FILE = 'token';
export const AWS_SKIP_POD_LABEL = 'eks.amazonaws.com/skip-pod-identity-webhook';

export const ROLE_ARN_PATTERN = /^arn:aws[a-z0-9-]*:iam::(\d{12}):role\/(?:[\w+=,.@-]+\/)*[\w+=,.@-]{1,64}$/;
const ROLE_ARN_FORM = 'arn:<partition>:iam::<12-digit account>:role/<optional path/><name>';

export interface AwsOptions {
  /** The annotation prefix; the peer makes it a flag, so some clusters use their own. */
  annotationPrefix: string;
  defaultAudience: string;
  defaultTokenExpiration: number;
  /** AWS_REGION and AWS_DEFAULT_REGION for containers that set neither. */
  region: string | undefined;
  /** AWS_STS_REGIONAL_ENDPOINTS=regional unless a ServiceAccount says otherwise. */
  regionalStsEndpoints: boolean;
  /** Refuse the values the peer read its own way (see tolerated) instead of warning. */
  strict?: boolean;
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

/** The peer labels every Pod it gives container credentials (handler.go getPodSpecPatch). */
export const AWS_POD_IDENTITY_LABEL = 'eks.amazonaws.com/pod-identity';

export interface RoleArn {
  partition: string;
  account: string;
  arn: string;
}

/** Validates a role ARN; the message names where it came from and the expected form. */
export function parseRoleArn(value: string, where: string): RoleArn | Denial {
  const arn = value.trim();
  const match = ROLE_ARN_PATTERN.exec(arn);
  if (!match) {
    return denial('InvalidRoleArn', `${where}="${value}" is not an IAM role ARN; expected ${ROLE_ARN_FORM}`);
  }
  return { partition: arn.split(':')[1], account: match[1], arn };
}

/**
 * The peer leaves a container alone, mount included, when it sets its web identity, region and
 * regional STS variables itself (handler.go addEnvToContainer); so do we.
 */
function configuresItself(identityVars: readonly string[]): (env: { has(name: string): boolean }) => boolean {
  return (env) =>
    identityVars.some((name) => env.has(name)) &&
    (env.has('AWS_REGION') || env.has('AWS_DEFAULT_REGION')) &&
    env.has('AWS_STS_REGIONAL_ENDPOINTS');
}
/** The variables that carry the identity: a container's own value of one means it is not used. */
export const AWS_CREDENTIAL_ENV: ReadonlySet<string> = new Set([
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
]);

// Built once: an injection's `satisfied` is the same function on every admission.
const webIdentityConfigured = configuresItself(['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE']);
const containerCredentialsConfigured = configuresItself([
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
]);

export function createAwsProvider(options: AwsOptions): PodProvider {
  const p = options.annotationPrefix;
  const keys = {
    roleArn: `${p}/role-arn`,
    audience: `${p}/audience`,
    regional: `${p}/sts-regional-endpoints`,
    expiration: `${p}/token-expiration`,
    skipContainers: `${p}/skip-containers`,
  };

  /**
   * What both modes read alike (the peer's GetCommonConfigurations and parsePodAnnotations): the
   * regional STS switch and the token expiry, Pod annotation over ServiceAccount over flag.
   */
  function common(pod: Pod, sa: Record<string, string>, saName: string, warnings: string[]) {
    const strict = options.strict ?? false;
    let regional = options.regionalStsEndpoints;
    const rawRegional = sa[keys.regional];
    if (rawRegional !== undefined) {
      // The peer ignores a value strconv.ParseBool cannot read and keeps its default.
      let parsed = parseBool(rawRegional, keys.regional, saName);
      if (typeof parsed !== 'boolean') parsed = tolerated(strict, warnings, parsed, regional, `using ${regional}`);
      if (typeof parsed !== 'boolean') return parsed;
      regional = parsed;
    }

    // A value the peer cannot read falls back to the next source (Pod, then ServiceAccount, then
    // the default).
    let expiration = options.defaultTokenExpiration;
    const sources: [string, string | undefined][] = [
      [saName, sa[keys.expiration]],
      ['Pod', pod.metadata?.annotations?.[keys.expiration]],
    ];
    for (const [where, raw] of sources) {
      if (raw === undefined) continue;
      const parsed = parseSeconds(raw, keys.expiration, where);
      const value =
        typeof parsed === 'number' ? parsed : tolerated(strict, warnings, parsed, expiration, `using ${expiration}`);
      if (typeof value !== 'number') return value;
      expiration = value;
    }
    const bounded = boundExpiration(expiration, CLOUDS.aws.tokenBounds, keys.expiration, 'ServiceAccount');
    if (isDenial(bounded)) return bounded;

    const envGroups: EnvVar[][] = [];
    if (regional) envGroups.push([{ name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' }]);
    if (options.region) {
      envGroups.push([
        { name: 'AWS_DEFAULT_REGION', value: options.region },
        { name: 'AWS_REGION', value: options.region },
      ]);
    }
    return { expiration: bounded, envGroups };
  }

  return {
    name: 'aws',
    annotationPrefixes: [`${p}/`],
    resolvePod({ pod, namespace, serviceAccount, windows }: PodContext): Injection | Denial | undefined {
      const labels = pod.metadata?.labels;
      if (labels && labels[AWS_SKIP_POD_LABEL] !== undefined) return undefined;
      const sa = serviceAccount?.annotations ?? {};
      const saName = `ServiceAccount ${namespace}/${serviceAccount?.name ?? serviceAccountNameOf(pod)}`;
      const warnings: string[] = [];
      const skipContainers = splitNames(pod.metadata?.annotations?.[keys.skipContainers], ',');

      // EKS Pod Identity takes precedence over IRSA and needs no annotation: the association
      // lives in EKS (the peer's buildPodPatchConfig). The ServiceAccount's annotations, when
      // known, still give the expiry and regional STS, as the peer's GetCommonConfigurations does.
      const cc = options.containerCredentials;
      if (cc?.associations.has(namespace, serviceAccount?.name ?? serviceAccountNameOf(pod))) {
        const shared = common(pod, sa, saName, warnings);
        if (isDenial(shared)) return shared;
        const tokenFile = `${cc.mountPath.replace(/\/$/, '')}/${cc.tokenPath}`;
        return {
          provider: 'aws',
          volume: tokenVolume(cc.volumeName, cc.audience, shared.expiration, cc.tokenPath),
          mountPath: cc.mountPath,
          envGroups: [
            ...shared.envGroups,
            [
              { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: cc.fullUri },
              { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: windows ? windowsPath(tokenFile) : tokenFile },
            ],
          ],
          annotations: {},
          labels: { [AWS_POD_IDENTITY_LABEL]: 'enabled' },
          skipContainers,
          satisfied: containerCredentialsConfigured,
          credentialEnv: AWS_CREDENTIAL_ENV,
          warnings: warnings.length ? warnings : undefined,
          identity: { mode: 'eks-pod-identity', audience: cc.audience },
        };
      }

      if (!serviceAccount) return undefined;
      const rawArn = sa[keys.roleArn];
      if (rawArn === undefined || rawArn.trim() === '') return undefined;
      const role = parseRoleArn(rawArn, `${saName} annotation ${keys.roleArn}`);
      if (isDenial(role)) return role;
      const audience = sa[keys.audience]?.trim() || options.defaultAudience;
      const shared = common(pod, sa, saName, warnings);
      if (isDenial(shared)) return shared;

      const tokenFile = `${AWS_MOUNT_PATH}/${AWS_TOKEN_FILE}`;
      return {
        provider: 'aws',
        volume: tokenVolume(AWS_VOLUME_NAME, audience, shared.expiration, AWS_TOKEN_FILE),
        mountPath: AWS_MOUNT_PATH,
        envGroups: [
          ...shared.envGroups,
          // A pair, as in the peer: a container that sets either one gets neither.
          [
            { name: 'AWS_ROLE_ARN', value: role.arn },
            { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: windows ? windowsPath(tokenFile) : tokenFile },
          ],
        ],
        annotations: {},
        skipContainers,
        satisfied: webIdentityConfigured,
        credentialEnv: AWS_CREDENTIAL_ENV,
        warnings: warnings.length ? warnings : undefined,
        identity: { roleArn: role.arn, account: role.account, partition: role.partition, audience },
      };
    },
  };
}
