import { CLOUDS } from '../registry.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar } from '../../kube/types.ts';
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
}

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
function configuresItself(env: ReadonlySet<string>): boolean {
  return (
    (env.has('AWS_ROLE_ARN') || env.has('AWS_WEB_IDENTITY_TOKEN_FILE')) &&
    (env.has('AWS_REGION') || env.has('AWS_DEFAULT_REGION')) &&
    env.has('AWS_STS_REGIONAL_ENDPOINTS')
  );
}

export function createAwsProvider(options: AwsOptions): PodProvider {
  const p = options.annotationPrefix;
  const keys = {
    roleArn: `${p}/role-arn`,
    audience: `${p}/audience`,
    regional: `${p}/sts-regional-endpoints`,
    expiration: `${p}/token-expiration`,
    skipContainers: `${p}/skip-containers`,
  };

  return {
    name: 'aws',
    annotationPrefixes: [`${p}/`],
    resolvePod({ pod, serviceAccount, windows }: PodContext): Injection | Denial | undefined {
      const labels = pod.metadata?.labels;
      if (labels && labels[AWS_SKIP_POD_LABEL] !== undefined) return undefined;
      if (!serviceAccount) return undefined;
      const sa = serviceAccount.annotations;
      const rawArn = sa[keys.roleArn];
      if (rawArn === undefined || rawArn.trim() === '') return undefined;

      const saName = `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`;
      const role = parseRoleArn(rawArn, `${saName} annotation ${keys.roleArn}`);
      if (isDenial(role)) return role;

      const audience = sa[keys.audience]?.trim() || options.defaultAudience;

      const strict = options.strict ?? false;
      const warnings: string[] = [];
      let regional = options.regionalStsEndpoints;
      const rawRegional = sa[keys.regional];
      if (rawRegional !== undefined) {
        // The peer ignores a value strconv.ParseBool cannot read and keeps its default.
        let parsed = parseBool(rawRegional, keys.regional, saName);
        if (typeof parsed !== 'boolean') parsed = tolerated(strict, warnings, parsed, regional, `using ${regional}`);
        if (typeof parsed !== 'boolean') return parsed;
        regional = parsed;
      }

      // The Pod's annotation wins over the ServiceAccount's, as in the peer; a value the peer
      // cannot read falls back to the next source (Pod, then ServiceAccount, then the default).
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
      expiration = bounded;

      const tokenFile = `${AWS_MOUNT_PATH}/${AWS_TOKEN_FILE}`;
      const envGroups: EnvVar[][] = [];
      if (regional) envGroups.push([{ name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' }]);
      if (options.region) {
        envGroups.push([
          { name: 'AWS_DEFAULT_REGION', value: options.region },
          { name: 'AWS_REGION', value: options.region },
        ]);
      }
      // A pair, as in the peer: a container that sets either one gets neither.
      envGroups.push([
        { name: 'AWS_ROLE_ARN', value: role.arn },
        { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: windows ? windowsPath(tokenFile) : tokenFile },
      ]);

      return {
        provider: 'aws',
        volume: tokenVolume(AWS_VOLUME_NAME, audience, expiration, AWS_TOKEN_FILE),
        mountPath: AWS_MOUNT_PATH,
        envGroups,
        annotations: {},
        skipContainers: splitNames(pod.metadata?.annotations?.[keys.skipContainers], ','),
        satisfied: configuresItself,
        warnings: warnings.length ? warnings : undefined,
        identity: { roleArn: role.arn, account: role.account, partition: role.partition, audience },
      };
    },
  };
}
