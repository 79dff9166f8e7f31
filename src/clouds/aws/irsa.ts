// IAM Roles for Service Accounts: `role-arn` alone renders as the peer's web identity pair;
// `role-arns` (with or without it) as a shared config file of profiles, projected from a Pod
// annotation beside the token, with container-profiles and source-profiles on top.
import { denial, type Denial, isDenial } from '../../errors.ts';
import { kubeletLiteral } from '../../shell.ts';
import { tokenVolume, tolerated } from '../common.ts';
import type { Injection } from '../types.ts';
import { parseContainerProfiles, withContainerProfiles } from './container-profiles.ts';
import {
  AWS_CREDENTIAL_ENV,
  AWS_MOUNT_PATH,
  AWS_TOKEN_FILE,
  AWS_TOKEN_PATH,
  AWS_VOLUME_NAME,
  profilesConfigured,
  webIdentityConfigured,
} from './conventions.ts';
import type { Aws } from './options.ts';
import { type AwsPod, envPlan, readShared, type Shared, withWarnings } from './pod-read.ts';
import {
  AWS_CONFIG_ANNOTATION,
  AWS_CONFIG_FILE,
  DEFAULT_PROFILE,
  type Profile,
  parseProfiles,
  sharedConfigFile,
} from './profiles.ts';
import { composeRoleArn, type RoleArn, readRoleArn } from './role-arn.ts';
import { readSessionName, type SessionName, sessionNameEnv } from './session-name.ts';
import { chainProfiles, profileIdentities } from './source-profiles.ts';

/** What both IRSA layouts share beside the admission: the token's audience and the shared reads. */
interface WebIdentity {
  audience: string;
  shared: Shared;
}

/** IRSA: `role-arn` alone is a web identity pair; `role-arns` (with or without it) a shared config file. */
export function irsa(ctx: AwsPod): Injection | Denial | undefined {
  const { aws, sa, saName, warnings } = ctx;
  const { keys, options } = aws;
  const rawArn = sa[keys.roleArn]?.trim() ? sa[keys.roleArn] : undefined;
  const rawProfiles = sa[keys.roleArns]?.trim() ? sa[keys.roleArns] : undefined;
  if (rawArn === undefined && rawProfiles === undefined) return undefined;
  const needsProfiles = [keys.containerProfiles, keys.sourceProfiles].find((k) => sa[k]?.trim());
  if (rawProfiles === undefined && needsProfiles)
    return denial(
      'InvalidAnnotation',
      `${saName} annotation ${needsProfiles} names role-arns profiles, but ${keys.roleArns} is not set`,
    );
  const role = rawArn === undefined ? undefined : defaultRole(ctx, rawArn, rawProfiles !== undefined);
  if (role && isDenial(role)) return role;
  const audience = sa[keys.audience]?.trim() || options.defaultAudience;
  const shared = readShared(ctx);
  if (isDenial(shared)) return shared;
  const session = sessionNameOf(ctx);
  if (isDenial(session)) return session;
  if (rawProfiles !== undefined) {
    if (session?.annotated)
      warnings.push(
        `${keys.sessionName} is not applied with ${keys.roleArns}: the SDKs read a shared config file's profiles without AWS_ROLE_SESSION_NAME`,
      );
    return sharedConfig(ctx, { audience, shared }, rawProfiles, role);
  }
  // role-arn alone (with neither set the first check returned).
  return role && webIdentityPair(ctx, { audience, shared: withSessionName(ctx, shared, session?.want) }, role);
}

/** The role of `role-arn`: completed, validated, and outside --strict a malformed one injected as written, as the peer does. */
function defaultRole({ aws, saName, warnings }: AwsPod, raw: string, inFile: boolean): RoleArn | Denial {
  const { roleArnBase } = aws.options;
  const role = readRoleArn(raw, `${saName} annotation ${aws.keys.roleArn}`, roleArnBase);
  // A shared config file is parsed by the SDKs: nothing malformed goes into it.
  if (!isDenial(role) || inFile) return role;
  const kept = tolerated(aws.strict, warnings, role, undefined, 'injecting it as written');
  if (kept !== undefined) return kept;
  // Tenant policy cannot place it in an account: it matches no declared identity provider.
  return { arn: composeRoleArn(raw.trim(), roleArnBase), account: '', partition: '' };
}

/** The session name asked for: the Pod's annotation over the ServiceAccount's over the flag. */
function sessionNameOf({
  aws,
  pod,
  sa,
  saName,
}: AwsPod): { want: SessionName; annotated: boolean } | Denial | undefined {
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
function withSessionName({ pod, warnings }: AwsPod, shared: Shared, want: SessionName | undefined): Shared {
  if (!want) return shared;
  const env = sessionNameEnv(want, pod.metadata?.name || undefined);
  if (env === undefined) return shared;
  if (typeof env === 'string') {
    warnings.push(env);
    return shared;
  }
  return { ...shared, envGroups: [...shared.envGroups, [env]] };
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
function webIdentityPair(ctx: AwsPod, { audience, shared }: WebIdentity, role: RoleArn): Injection {
  const pair = [
    // Outside --strict any value the peer injected as written: a kubelet literal (src/shell.ts).
    { name: 'AWS_ROLE_ARN', value: kubeletLiteral(role.arn) },
    { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: ctx.path(AWS_TOKEN_PATH) },
  ];
  return withWarnings(ctx.warnings, {
    ...irsaBase(ctx.skip),
    volume: tokenVolume(AWS_VOLUME_NAME, audience, shared.expiration, AWS_TOKEN_FILE),
    ...envPlan(ctx, shared, pair),
    annotations: {},
    configuredBy: webIdentityConfigured,
    identity: identityOf(role, audience),
  });
}

/** `role-arns`: the profiles in a shared config file, projected from a Pod annotation beside the token. */
function sharedConfig(
  ctx: AwsPod,
  { audience, shared }: WebIdentity,
  rawProfiles: string,
  role: RoleArn | undefined,
): Injection | Denial {
  const { aws, pod, sa, saName, skip, path } = ctx;
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
  return withWarnings(ctx.warnings, {
    ...irsaBase(skip),
    volume: tokenVolume(AWS_VOLUME_NAME, audience, shared.expiration, AWS_TOKEN_FILE, [
      {
        path: AWS_CONFIG_FILE,
        fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${AWS_CONFIG_ANNOTATION}']` },
      },
    ]),
    ...withContainerProfiles(pod, chosen, skip, envPlan(ctx, shared, configFile, ownWebIdentity)),
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
