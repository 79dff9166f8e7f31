import { type AnnotationBound, listBound, scalarBound } from '../../annotation-bounds.ts';
import {
  MAX_AUDIENCE,
  MAX_DNS_LABEL,
  MAX_NAME_LIST_ANNOTATION,
  MAX_ROLE_ARN,
  MAX_SCALAR_ANNOTATION,
} from '../../bounds.ts';
import { CLOUDS } from '../registry.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar, Pod } from '../../kube/types.ts';
import { serviceAccountNameOf } from '../../model.ts';
import {
  boundExpiration,
  envFromMaySet,
  parseBool,
  parseSeconds,
  podContainers,
  skippedContainers,
  tokenVolume,
  tolerated,
  windowsPath,
} from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';
import { AWS_REGION_NAME } from './facts.ts';
import {
  AWS_CONFIG_ANNOTATION,
  AWS_CONFIG_FILE,
  DEFAULT_PROFILE,
  MAX_PROFILE_NAME,
  type Profile,
  parseProfiles,
  sharedConfigFile,
} from './profiles.ts';
import { composeRoleArn, type RoleArn, type RoleArnBase, readRoleArn } from './role-arn.ts';
import { kubeletLiteral } from '../../shell.ts';
import { parseContainerProfiles, withContainerProfiles } from './container-profiles.ts';
import { chainProfiles, profileIdentities } from './source-profiles.ts';
import { readSessionName, type SessionName, sessionNameEnv } from './session-name.ts';

export { parseRoleArn, ROLE_ARN_PATTERN, type RoleArn } from './role-arn.ts';

/** Conventions of aws/amazon-eks-pod-identity-webhook (IAM Roles for Service Accounts). */
export const AWS_VOLUME_NAME = 'aws-iam-token';
export const AWS_MOUNT_PATH = '/var/run/secrets/eks.amazonaws.com/serviceaccount';
export const AWS_TOKEN_FILE = 'token';
export const AWS_SKIP_POD_LABEL = 'eks.amazonaws.com/skip-pod-identity-webhook';

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
const webIdentityConfigured = configuresItself(['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE']);
const profilesConfigured = configuresItself(['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONFIG_FILE']);
const containerCredentialsConfigured = configuresItself([
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE',
]);

const REGION_VARS = ['AWS_DEFAULT_REGION', 'AWS_REGION'] as const;

/** The injection with the warnings gathered while building it (envPlan adds some). */
function withWarnings(warnings: string[], injection: Injection): Injection {
  return warnings.length > 0 ? { ...injection, warnings } : injection;
}

/** What both modes read alike: regional STS, expiry and region. */
interface Shared {
  expiration: number;
  /** AWS_STS_REGIONAL_ENDPOINTS, if injected. */
  envGroups: EnvVar[][];
  region: { value: string; fromPod: boolean } | undefined;
}

/** A provider's options and its annotation keys (under its prefix), read once at start-up. */
interface Aws {
  options: AwsOptions;
  keys: ReturnType<typeof keysOf>;
  strict: boolean;
}

function keysOf(p: string) {
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

/**
 * The ServiceAccount annotations IRSA reads, under the configured prefix, each with the most a
 * legitimate value needs: a role ARN, 64 profiles of a name and a role ARN, an audience, and
 * short values (a boolean, seconds, a region, a session name).
 */
export function awsServiceAccountAnnotations(prefix: string): AnnotationBound[] {
  const k = keysOf(prefix);
  return [
    scalarBound(k.roleArn, MAX_ROLE_ARN),
    listBound(k.roleArns, MAX_PROFILE_NAME + 1 + MAX_ROLE_ARN),
    listBound(k.containerProfiles, MAX_DNS_LABEL + 1 + MAX_PROFILE_NAME),
    listBound(k.sourceProfiles, MAX_PROFILE_NAME + 1 + MAX_PROFILE_NAME),
    scalarBound(k.audience, MAX_AUDIENCE),
    scalarBound(k.regional),
    scalarBound(k.expiration),
    scalarBound(k.region),
    scalarBound(k.sessionName),
  ];
}

export function createAwsProvider(options: AwsOptions): PodProvider {
  const aws: Aws = { options, keys: keysOf(options.annotationPrefix), strict: options.strict ?? false };
  const { expiration, region, skipContainers, includeContainers, sessionName } = aws.keys;
  return {
    name: 'aws',
    serviceAccountAnnotations: awsServiceAccountAnnotations(options.annotationPrefix),
    podReads: {
      annotations: [
        { key: expiration, max: MAX_SCALAR_ANNOTATION },
        { key: region, max: MAX_SCALAR_ANNOTATION },
        { key: sessionName, max: MAX_SCALAR_ANNOTATION },
        { key: skipContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
        { key: includeContainers, max: MAX_NAME_LIST_ANNOTATION, separator: ',' },
      ],
      credentialEnv: AWS_CREDENTIAL_ENV,
    },
    podSelection: {
      skipLabel: AWS_SKIP_POD_LABEL,
      containers: { skip: skipContainers, include: includeContainers, separator: ',' },
    },
    resolvePod: (ctx) => resolveAwsPod(aws, ctx),
  };
}

function resolveAwsPod(aws: Aws, ctx: PodContext): Injection | Denial | undefined {
  const { pod, namespace, serviceAccount } = ctx;
  const labels = pod.metadata?.labels;
  if (labels && labels[AWS_SKIP_POD_LABEL] !== undefined) return undefined;
  const saName = `ServiceAccount ${namespace}/${serviceAccount?.name ?? serviceAccountNameOf(pod)}`;
  const warnings: string[] = [];
  const { skipContainers: skip, includeContainers: include } = aws.keys;
  const skipContainers = skippedContainers(pod, { skip, include }, ',', warnings);
  // EKS Pod Identity takes precedence over IRSA and needs no annotation: the association lives
  // in EKS (the peer's buildPodPatchConfig).
  const cc = aws.options.containerCredentials;
  if (cc?.associations.has(namespace, serviceAccount?.name ?? serviceAccountNameOf(pod)))
    return podIdentity(aws, cc, ctx, saName, warnings, skipContainers);
  if (!serviceAccount) return undefined;
  return irsa(aws, ctx, saName, warnings, skipContainers);
}

/**
 * EKS Pod Identity's container credentials. The ServiceAccount's annotations, when known, still
 * give the expiry and regional STS, as the peer's GetCommonConfigurations does.
 */
function podIdentity(
  aws: Aws,
  cc: ContainerCredentialsOptions,
  { pod, serviceAccount, windows }: PodContext,
  saName: string,
  warnings: string[],
  skipContainers: ReadonlySet<string>,
): Injection | Denial {
  const shared = common(aws, pod, serviceAccount?.annotations ?? {}, saName, warnings);
  if (isDenial(shared)) return shared;
  const tokenFile = `${cc.mountPath.replace(/\/$/, '')}/${cc.tokenPath}`;
  const pair = [
    { name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: cc.fullUri },
    { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: windows ? windowsPath(tokenFile) : tokenFile },
  ];
  return withWarnings(warnings, {
    provider: 'aws',
    volume: tokenVolume(cc.volumeName, cc.audience, shared.expiration, cc.tokenPath),
    mountPath: cc.mountPath,
    ...envPlan(aws, pod, shared, pair, skipContainers, warnings),
    annotations: {},
    labels: { [AWS_POD_IDENTITY_LABEL]: 'enabled' },
    skipContainers,
    configuredBy: containerCredentialsConfigured,
    credentialEnv: AWS_CREDENTIAL_ENV,
    identity: { mode: 'eks-pod-identity', audience: cc.audience },
  });
}

/**
 * The peer's GetCommonConfigurations and parsePodAnnotations: the regional STS switch and the
 * token expiry, Pod annotation over ServiceAccount over flag; and the region, the same way.
 */
function common(aws: Aws, pod: Pod, sa: Record<string, string>, saName: string, warnings: string[]): Shared | Denial {
  const { options, keys, strict } = aws;
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

  const region = regionOf(aws, pod, sa, saName);
  if (isDenial(region)) return region;
  const envGroups: EnvVar[][] = [];
  if (regional) envGroups.push([{ name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' }]);
  return { expiration: bounded, envGroups, region };
}

/** The region annotations (AWS issues #149, #238): the Pod's over the ServiceAccount's over the flag. */
function regionOf(aws: Aws, pod: Pod, sa: Record<string, string>, saName: string): Shared['region'] | Denial {
  const key = aws.keys.region;
  const fromPod = pod.metadata?.annotations?.[key];
  for (const [where, raw] of [
    ['Pod', fromPod],
    [saName, sa[key]],
  ] as const) {
    if (raw === undefined) continue;
    if (!AWS_REGION_NAME.test(raw.trim()))
      return denial(
        'InvalidAnnotation',
        `${where} annotation ${key}="${raw}" is not an AWS region name (lower-case letters, digits and hyphens, for example eu-west-1)`,
      );
    return { value: raw.trim(), fromPod: raw === fromPod };
  }
  const region = aws.options.region;
  return region === undefined ? undefined : { value: region, fromPod: false };
}

/**
 * The env groups in order, and each container's own where it differs: a region the container's
 * envFrom may set is left to it (AWS #248: an env entry would shadow envFrom), unless the Pod's
 * own annotation names the region; `ownIdentity` drops what a container that configures its own
 * web identity must not get.
 */
function envPlan(
  aws: Aws,
  pod: Pod,
  shared: Shared,
  identity: EnvVar[],
  skip: ReadonlySet<string>,
  warnings: string[],
  ownIdentity?: (sets: (name: string) => boolean) => boolean,
): Pick<Injection, 'envGroups' | 'containerEnvGroups'> {
  const regionGroup = shared.region && REGION_VARS.map((name) => ({ name, value: shared.region!.value }));
  const envGroups = [...shared.envGroups, ...(regionGroup ? [regionGroup] : []), identity];
  const perContainer = new Map<string, EnvVar[][]>();
  const leftToEnvFrom: string[] = [];
  const yieldable = regionGroup !== undefined && !shared.region!.fromPod;
  if (!yieldable && !ownIdentity) return { envGroups };
  for (const c of podContainers(pod)) {
    if (skip.has(c.name)) continue;
    // Looked up only when needed: most containers have no envFrom (the core indexes env itself).
    const sets = (name: string) => c.env?.some((e) => e.name === name) ?? false;
    const yieldRegion = yieldable && REGION_VARS.some((n) => envFromMaySet(c, n)) && !REGION_VARS.some(sets);
    const dropIdentity = ownIdentity?.(sets) ?? false;
    if (yieldRegion) leftToEnvFrom.push(`"${c.name}"`);
    if (yieldRegion || dropIdentity)
      perContainer.set(
        c.name,
        envGroups.filter((g) => !(yieldRegion && g === regionGroup) && !(dropIdentity && g === identity)),
      );
  }
  if (leftToEnvFrom.length > 0)
    warnings.push(
      `container${leftToEnvFrom.length > 1 ? 's' : ''} ${leftToEnvFrom.join(', ')}: AWS_REGION and AWS_DEFAULT_REGION (${shared.region!.value}) are not injected because envFrom may set them and an env entry would override it; set them in env or in that ConfigMap or Secret, or name the region in the Pod annotation ${aws.keys.region}`,
    );
  return perContainer.size > 0 ? { envGroups, containerEnvGroups: perContainer } : { envGroups };
}

/** The role of `role-arn`: completed, validated, and outside --strict a malformed one injected as written, as the peer does. */
function defaultRole(aws: Aws, raw: string, saName: string, warnings: string[], inFile: boolean): RoleArn | Denial {
  const { roleArnBase } = aws.options;
  const role = readRoleArn(raw, `${saName} annotation ${aws.keys.roleArn}`, roleArnBase);
  // A shared config file is parsed by the SDKs: nothing malformed goes into it.
  if (!isDenial(role) || inFile) return role;
  const kept = tolerated(aws.strict, warnings, role, undefined, 'injecting it as written');
  if (kept !== undefined) return kept;
  // Tenant policy cannot place it in an account: it matches no declared identity provider.
  return { arn: composeRoleArn(raw.trim(), roleArnBase), account: '', partition: '' };
}

/** What both IRSA layouts share: the token's audience and the Pod's side of its paths. */
interface WebIdentity {
  pod: Pod;
  saName: string;
  audience: string;
  shared: Shared;
  skip: ReadonlySet<string>;
  path: (file: string) => string;
  warnings: string[];
}

const AWS_TOKEN_PATH = `${AWS_MOUNT_PATH}/${AWS_TOKEN_FILE}`;

/** IRSA: `role-arn` alone is a web identity pair; `role-arns` (with or without it) a shared config file. */
function irsa(
  aws: Aws,
  { pod, serviceAccount, windows }: PodContext,
  saName: string,
  warnings: string[],
  skip: ReadonlySet<string>,
): Injection | Denial | undefined {
  const { keys, options } = aws;
  const sa = serviceAccount!.annotations;
  const rawArn = sa[keys.roleArn]?.trim() ? sa[keys.roleArn] : undefined;
  const rawProfiles = sa[keys.roleArns]?.trim() ? sa[keys.roleArns] : undefined;
  if (rawArn === undefined && rawProfiles === undefined) return undefined;
  const needsProfiles = [keys.containerProfiles, keys.sourceProfiles].find((k) => sa[k]?.trim());
  if (rawProfiles === undefined && needsProfiles)
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${needsProfiles} names role-arns profiles, but ${keys.roleArns} is not set`,
    );
  const role = rawArn === undefined ? undefined : defaultRole(aws, rawArn, saName, warnings, rawProfiles !== undefined);
  if (role && isDenial(role)) return role;
  const audience = sa[keys.audience]?.trim() || options.defaultAudience;
  const shared = common(aws, pod, sa, saName, warnings);
  if (isDenial(shared)) return shared;
  const session = sessionNameOf(aws, pod, sa, saName);
  if (isDenial(session)) return session;
  const path = (f: string) => (windows ? windowsPath(f) : f);
  const web: WebIdentity = { pod, saName, audience, shared, skip, path, warnings };
  if (rawProfiles !== undefined) {
    if (session?.annotated)
      warnings.push(
        `${keys.sessionName} is not applied with ${keys.roleArns}: the SDKs read a shared config file's profiles without AWS_ROLE_SESSION_NAME`,
      );
    return sharedConfig(aws, web, rawProfiles, role, sa);
  }
  return webIdentityPair(aws, withSessionName(web, session?.want), role!);
}

/** The session name asked for: the Pod's annotation over the ServiceAccount's over the flag. */
function sessionNameOf(
  aws: Aws,
  pod: Pod,
  sa: Record<string, string>,
  saName: string,
): { want: SessionName; annotated: boolean } | Denial | undefined {
  const key = aws.keys.sessionName;
  for (const [where, raw] of [
    ['Pod', pod.metadata?.annotations?.[key]],
    [saName, sa[key]],
  ] as const) {
    if (raw === undefined) continue;
    const want = readSessionName(raw, true);
    // Quoted as JSON: a newline or a control character in it is shown escaped.
    if (typeof want === 'string')
      return denial('InvalidAnnotation', `${where} annotation ${key}=${JSON.stringify(raw)} ${want}`);
    return { want, annotated: true };
  }
  const flag = aws.options.roleSessionName;
  return flag && { want: flag, annotated: false };
}

/** AWS_ROLE_SESSION_NAME as a group of its own: a container that sets it keeps its value. */
function withSessionName(web: WebIdentity, want: SessionName | undefined): WebIdentity {
  if (!want) return web;
  const env = sessionNameEnv(want, web.pod.metadata?.name || undefined);
  if (env === undefined) return web;
  if (typeof env === 'string') {
    web.warnings.push(env);
    return web;
  }
  return { ...web, shared: { ...web.shared, envGroups: [...web.shared.envGroups, [env]] } };
}

const identityOf = (r: RoleArn, audience: string) => ({
  roleArn: r.arn,
  account: r.account,
  partition: r.partition,
  audience,
});

function irsaBase(skip: ReadonlySet<string>) {
  return {
    provider: 'aws' as const,
    mountPath: AWS_MOUNT_PATH,
    skipContainers: skip,
    credentialEnv: AWS_CREDENTIAL_ENV,
  };
}

/** A pair, as in the peer: a container that sets either one gets neither. */
function webIdentityPair(aws: Aws, web: WebIdentity, role: RoleArn): Injection {
  const { pod, audience, shared, skip, path, warnings } = web;
  const pair = [
    // Outside --strict any value the peer injected as written: a kubelet literal (src/shell.ts).
    { name: 'AWS_ROLE_ARN', value: kubeletLiteral(role.arn) },
    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: path(AWS_TOKEN_PATH) },
  ];
  return withWarnings(warnings, {
    ...irsaBase(skip),
    volume: tokenVolume(AWS_VOLUME_NAME, audience, shared.expiration, AWS_TOKEN_FILE),
    ...envPlan(aws, pod, shared, pair, skip, warnings),
    annotations: {},
    configuredBy: webIdentityConfigured,
    identity: identityOf(role, audience),
  });
}

/** `role-arns`: the profiles in a shared config file, projected from a Pod annotation beside the token. */
function sharedConfig(
  aws: Aws,
  web: WebIdentity,
  rawProfiles: string,
  role: RoleArn | undefined,
  sa: Record<string, string>,
): Injection | Denial {
  const { pod, saName, audience, shared, skip, path, warnings } = web;
  const { keys } = aws;
  const listed = parseProfiles(rawProfiles, `${saName} annotation ${keys.roleArns}`, aws.options.roleArnBase);
  if (isDenial(listed)) return listed;
  const named = withDefault(aws, listed, role, saName);
  const profiles = isDenial(named)
    ? named
    : chainProfiles(named, sa[keys.sourceProfiles], `${saName} annotation ${keys.sourceProfiles}`);
  if (isDenial(profiles)) return profiles;
  const rawChosen = sa[keys.containerProfiles];
  const chosen = rawChosen?.trim()
    ? parseContainerProfiles(rawChosen, `${saName} annotation ${aws.keys.containerProfiles}`, profiles)
    : new Map<string, string>();
  if (isDenial(chosen)) return chosen;
  // No AWS_ROLE_ARN beside the file: boto3 takes it over a profile's role_arn.
  const configFile = [{ name: 'AWS_CONFIG_FILE', value: path(`${AWS_MOUNT_PATH}/${AWS_CONFIG_FILE}`) }];
  const ownWebIdentity = (sets: (name: string) => boolean) =>
    sets('AWS_ROLE_ARN') || sets('AWS_WEB_IDENTITY_TOKEN_FILE');
  return withWarnings(warnings, {
    ...irsaBase(skip),
    volume: tokenVolume(AWS_VOLUME_NAME, audience, shared.expiration, AWS_TOKEN_FILE, [
      {
        path: AWS_CONFIG_FILE,
        fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${AWS_CONFIG_ANNOTATION}']` },
      },
    ]),
    ...withContainerProfiles(pod, chosen, skip, envPlan(aws, pod, shared, configFile, skip, warnings, ownWebIdentity)),
    annotations: { [AWS_CONFIG_ANNOTATION]: sharedConfigFile(profiles, path(AWS_TOKEN_PATH)) },
    configuredBy: profilesConfigured,
    ...profileIdentities(profiles, (r) => identityOf(r, audience)),
  });
}

/**
 * The profiles with `[default]` first: role-arn's role, else the one listed as `default`, else
 * (also kept under its own name) the first listed.
 */
function withDefault(aws: Aws, listed: Profile[], role: RoleArn | undefined, saName: string): Profile[] | Denial {
  const named = listed.find((q) => q.name === DEFAULT_PROFILE);
  if (role && named)
    return denial(
      'ConflictingAnnotations',
      `${saName} names the default profile twice: in ${aws.keys.roleArn} and as "${DEFAULT_PROFILE}" in ${aws.keys.roleArns}; keep one`,
    );
  if (named) return [named, ...listed.filter((q) => q !== named)];
  return [{ name: DEFAULT_PROFILE, role: role ?? listed[0].role, ...(!role && { copyOf: listed[0].name }) }, ...listed];
}
