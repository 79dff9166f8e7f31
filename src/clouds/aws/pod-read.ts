// What both AWS modes read alike from one admission: the regional STS switch, the token expiry
// and the region (Pod annotation over ServiceAccount over flag), and how the env groups they add
// fall to each container. AwsPod is the admission as they read it, built once by resolveAwsPod.
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { EnvVar, Pod } from '../../kube/types.ts';
import { CLOUDS } from '../registry.ts';
import { boundExpiration, envFromMaySet, parseBool, parseSeconds, podContainers, tolerated } from '../common.ts';
import type { Injection } from '../types.ts';
import { AWS_REGION_NAME } from './facts.ts';
import type { Aws } from './options.ts';

/** One admission as the AWS provider reads it: built once, read by every step of either mode. */
export interface AwsPod {
  aws: Aws;
  pod: Pod;
  /** The ServiceAccount's annotations; none when it is not known (EKS Pod Identity needs none). */
  sa: Readonly<Record<string, string>>;
  /** `ServiceAccount NAMESPACE/NAME`, as messages name it. */
  saName: string;
  /** The containers the provider leaves alone. */
  skip: ReadonlySet<string>;
  /** A path as the Pod's OS writes it. */
  path: (file: string) => string;
  /** Where each step adds its warnings, in the order found; the injection carries them. */
  warnings: string[];
}

/** The injection with the warnings gathered while building it (envPlan adds some). */
export function withWarnings(warnings: string[], injection: Injection): Injection {
  return warnings.length > 0 ? { ...injection, warnings } : injection;
}

/** What both modes read alike: regional STS, expiry and region. */
export interface Shared {
  expiration: number;
  /** AWS_STS_REGIONAL_ENDPOINTS, if injected. */
  envGroups: EnvVar[][];
  region: { value: string; fromPod: boolean } | undefined;
}

const REGION_VARS = ['AWS_DEFAULT_REGION', 'AWS_REGION'] as const;

/**
 * The peer's GetCommonConfigurations and parsePodAnnotations: the regional STS switch and the
 * token expiry, Pod annotation over ServiceAccount over flag; and the region, the same way.
 */
export function readShared(ctx: AwsPod): Shared | Denial {
  const { aws, pod, sa, saName, warnings } = ctx;
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

  const region = regionOf(ctx);
  if (isDenial(region)) return region;
  const envGroups: EnvVar[][] = [];
  if (regional) envGroups.push([{ name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'regional' }]);
  return { expiration: bounded, envGroups, region };
}

/** The region annotations (AWS issues #149, #238): the Pod's over the ServiceAccount's over the flag. */
function regionOf({ aws, pod, sa, saName }: AwsPod): Shared['region'] | Denial {
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
export function envPlan(
  { aws, pod, skip, warnings }: AwsPod,
  shared: Shared,
  identity: EnvVar[],
  ownIdentity?: (sets: (name: string) => boolean) => boolean,
): Pick<Injection, 'envGroups' | 'containerEnvGroups'> {
  const region = shared.region;
  const regionGroup = region && REGION_VARS.map((name) => ({ name, value: region.value }));
  const envGroups = [...shared.envGroups, ...(regionGroup ? [regionGroup] : []), identity];
  const perContainer = new Map<string, EnvVar[][]>();
  const leftToEnvFrom: string[] = [];
  const yieldable = regionGroup !== undefined && region !== undefined && !region.fromPod;
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
  if (leftToEnvFrom.length > 0 && region)
    warnings.push(
      `container${leftToEnvFrom.length > 1 ? 's' : ''} ${leftToEnvFrom.join(', ')}: AWS_REGION and AWS_DEFAULT_REGION (${region.value}) are not injected because envFrom may set them and an env entry would override it; set them in env or in that ConfigMap or Secret, or name the region in the Pod annotation ${aws.keys.region}`,
    );
  return perContainer.size > 0 ? { envGroups, containerEnvGroups: perContainer } : { envGroups };
}
