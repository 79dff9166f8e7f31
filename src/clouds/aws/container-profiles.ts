// A role per container (the AWS peer's issues #147 and #77, which it does not offer): the
// ServiceAccount names, for some of its Pods' containers, the `role-arns` profile each one uses,
// as Azure's container-client-ids names a client id. The profiles are the ServiceAccount's own, so
// tenant policy and `trust` judge and print every role a container can get, as for role-arns.
import { denial, isDenial, type Denial } from '../../errors.ts';
import type { Pod } from '../../kube/types.ts';
import { CONTAINER_ENTRIES, parseNamedEntries, podContainers } from '../common.ts';
import type { Injection } from '../types.ts';
import { notAProfile, type Profile } from './profiles.ts';

/**
 * `<container>=<profile>` entries, separated by commas or new lines; every profile must be one
 * of the shared config file's (the `role-arns` profiles and `default`).
 */
export function parseContainerProfiles(
  value: string,
  key: string,
  profiles: readonly Profile[],
): Map<string, string> | Denial {
  const pairs = parseNamedEntries(value, {
    key,
    entry: '<container>=<profile>',
    form: 'expected <container>=<profile> entries separated by commas or new lines',
    ...CONTAINER_ENTRIES,
  });
  if (isDenial(pairs)) return pairs;
  const known = new Set(profiles.map((p) => p.name));
  const out = new Map<string, string>();
  for (const [container, profile] of pairs) {
    if (!known.has(profile))
      return denial(
        'InvalidAnnotation',
        `${key}: container "${container}" names profile ${notAProfile(profile, known)}`,
      );
    out.set(container, profile);
  }
  return out;
}

/**
 * Each named container the Pod serves gets AWS_PROFILE after its env groups (its own groups where
 * the plan gave it some): a container that sets AWS_PROFILE itself keeps its own.
 */
export function withContainerProfiles(
  pod: Pod,
  chosen: ReadonlyMap<string, string>,
  skip: ReadonlySet<string>,
  plan: Pick<Injection, 'envGroups' | 'containerEnvGroups'>,
): Pick<Injection, 'envGroups' | 'containerEnvGroups'> {
  if (chosen.size === 0) return plan;
  const perContainer = new Map(plan.containerEnvGroups ?? []);
  for (const c of podContainers(pod)) {
    const profile = chosen.get(c.name);
    if (profile === undefined || skip.has(c.name)) continue;
    const groups = perContainer.get(c.name) ?? plan.envGroups;
    perContainer.set(c.name, [...groups, [{ name: 'AWS_PROFILE', value: profile }]]);
  }
  return perContainer.size > 0 ? { envGroups: plan.envGroups, containerEnvGroups: perContainer } : plan;
}
