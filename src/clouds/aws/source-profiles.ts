// Role chaining (the AWS peer's issue #258, which it does not offer): a `role-arns` profile may
// assume its role with another profile's credentials (`source_profile` in the shared config)
// instead of with the token, so a Pod reaches a role in another account through a role that
// trusts the cluster. Every profile of a chain is a `role-arns` profile: tenant policy judges
// each role and `trust` prints each step (the first role trusts the OIDC provider, each next one
// the role before it).
import { MAX_CHAIN_HOPS } from '../../bounds.ts';
import { denial, isDenial, type Denial } from '../../errors.ts';
import { parseNamedEntries } from '../common.ts';
import { DEFAULT_PROFILE, notAProfile, type Profile, profileNameProblem } from './profiles.ts';
import type { RoleArn } from './role-arn.ts';

/**
 * `<profile>=<source profile>` entries, separated by commas or new lines: both must be profiles of
 * the shared config file (the `role-arns` profiles and `default`).
 */
function parseSourceProfiles(value: string, key: string, profiles: readonly Profile[]): Map<string, string> | Denial {
  const pairs = parseNamedEntries(value, {
    key,
    entry: '<profile>=<source profile>',
    form: 'expected <profile>=<source profile> entries separated by commas or new lines',
    noun: 'profile',
    nameProblem: profileNameProblem,
    twice: (name) => `profile "${name}" is given a source twice`,
  });
  if (isDenial(pairs)) return pairs;
  const known = new Set(profiles.map((p) => p.name));
  const unknown = (name: string) => `profile ${notAProfile(name, known)}`;
  for (const [profile, source] of pairs) {
    if (!known.has(profile)) return denial('InvalidAnnotation', `${key}: ${unknown(profile)}`);
    if (!known.has(source))
      return denial('InvalidAnnotation', `${key}: the source of profile "${profile}", ${unknown(source)}`);
  }
  return new Map(pairs);
}

/**
 * The profiles with their sources set. `default`, when it is the first listed profile's copy,
 * follows that profile's source unless `source-profiles` names its own. Every chain must end at a
 * profile that presents the token, in at most MAX_CHAIN_HOPS AssumeRole calls: a cycle (which
 * the SDKs refuse only once the Pod runs) or a longer chain is refused, naming it.
 */
function withSources(
  profiles: readonly Profile[],
  sources: ReadonlyMap<string, string>,
  key: string,
): Profile[] | Denial {
  const all = new Map(sources);
  const copyOf = profiles.find((p) => p.name === DEFAULT_PROFILE)?.copyOf;
  const inherited = copyOf === undefined || all.has(DEFAULT_PROFILE) ? undefined : all.get(copyOf);
  const inherits = inherited !== undefined;
  if (inherits) all.set(DEFAULT_PROFILE, inherited);
  // Said when default is in a cycle it inherited: a copy of a profile chained (back) through default.
  const why = inherits
    ? `; "${DEFAULT_PROFILE}" is a copy of the first listed profile "${copyOf}" (neither role-arn nor a profile named ${DEFAULT_PROFILE} gives it a role) and takes its source: give ${DEFAULT_PROFILE} its own role, or list another profile first`
    : '';
  for (const start of all.keys()) {
    const chain = [start];
    for (let at = all.get(start); at !== undefined; at = all.get(at)) {
      const looped = chain.includes(at);
      chain.push(at);
      if (looped)
        return denial(
          'InvalidAnnotation',
          `${key}: the chain ${chain.join(' → ')} is a cycle: every chain must end at a profile that assumes its role with the token (one without a source)${chain.includes(DEFAULT_PROFILE) ? why : ''}`,
        );
    }
    if (chain.length - 1 > MAX_CHAIN_HOPS)
      return denial(
        'InvalidAnnotation',
        `${key}: profile "${start}" is ${chain.length - 1} AssumeRole calls from the token (${chain.join(' → ')}), more than the ${MAX_CHAIN_HOPS} a chain may have`,
      );
  }
  return profiles.map((p) => {
    const source = all.get(p.name);
    return source === undefined ? p : { ...p, source };
  });
}

/** The ServiceAccount's `source-profiles`, if any, applied to its profiles. */
export function chainProfiles(profiles: Profile[], raw: string | undefined, key: string): Profile[] | Denial {
  if (!raw?.trim()) return profiles;
  const sources = parseSourceProfiles(raw, key, profiles);
  return isDenial(sources) ? sources : withSources(profiles, sources, key);
}

/**
 * One identity per role and way of reaching it, the first profile naming it: tenant policy and
 * trust judge roles, not profile names, and a chained role's record names its source role (so
 * `trust` prints the AssumeRole trust it needs instead of the OIDC provider's).
 */
export function profileIdentities(
  profiles: readonly Profile[],
  identityOf: (role: RoleArn) => Record<string, string>,
): { identity: Record<string, string>; additionalIdentities: Record<string, string>[] } {
  const byName = new Map(profiles.map((p) => [p.name, p]));
  const seen = new Set<string>();
  const records: Record<string, string>[] = [];
  for (const p of profiles) {
    // biome-ignore lint/style/noNonNullAssertion: A source is one of the profiles (parseSourceProfiles refuses any other name).
    const source = p.source === undefined ? undefined : byName.get(p.source)!;
    const key = `${p.role.arn} ${source?.role.arn ?? ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    records.push({
      ...identityOf(p.role),
      profile: p.name,
      ...(source && { sourceProfile: source.name, sourceRoleArn: source.role.arn }),
    });
  }
  const [identity, ...additionalIdentities] = records;
  return { identity, additionalIdentities };
}
