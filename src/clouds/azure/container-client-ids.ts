// A client id per container (the Azure peer's issue #408, which it does not offer): the
// ServiceAccount names, for some of its Pods' containers, the user-assigned identity or app
// registration each one signs in as. One token serves them all (the same ServiceAccount subject),
// so every client id needs a federated credential for it; `trust` prints one for each.
import { denial, isDenial, type Denial } from '../../errors.ts';
import type { EnvVar } from '../../kube/types.ts';
import type { Pod } from '../../kube/types.ts';
import { CONTAINER_ENTRIES, parseNamedEntries, podContainers } from '../common.ts';
import { GUID_PATTERN } from './facts.ts';

export const CONTAINER_CLIENT_IDS_ANNOTATION = 'azure.workload.identity/container-client-ids';

/**
 * `<container>=<client id>` entries, separated by semicolons (as the peer's skip-containers),
 * commas or new lines. Every value is new to this annotation: anything but a GUID is refused,
 * with or without --strict.
 */
export function parseContainerClientIds(value: string, where: string): Map<string, string> | Denial {
  const key = `${where} annotation ${CONTAINER_CLIENT_IDS_ANNOTATION}`;
  const pairs = parseNamedEntries(value, {
    key,
    entry: '<container>=<client id>',
    form: 'expected <container>=<client id> entries separated by semicolons',
    ...CONTAINER_ENTRIES,
  });
  if (isDenial(pairs)) return pairs;
  const ids = new Map<string, string>();
  for (const [container, clientId] of pairs) {
    if (!GUID_PATTERN.test(clientId))
      return denial(
        'InvalidClientId',
        `${key}: the client id of container "${container}", "${clientId}", is not a GUID such as 00000000-0000-0000-0000-000000000000`,
      );
    ids.set(container, clientId);
  }
  return ids;
}

/**
 * The env groups of each named container the Pod has: its own AZURE_CLIENT_ID in place of the
 * ServiceAccount's (first, where the ServiceAccount names none).
 */
export function containerEnvGroups(
  pod: Pod,
  ids: ReadonlyMap<string, string>,
  skip: ReadonlySet<string>,
  envGroups: EnvVar[][],
): Map<string, EnvVar[][]> {
  const out = new Map<string, EnvVar[][]>();
  const own = (clientId: string): EnvVar[] => [{ name: 'AZURE_CLIENT_ID', value: clientId }];
  const rest = envGroups.filter((g) => !g.some((e) => e.name === 'AZURE_CLIENT_ID'));
  for (const c of podContainers(pod)) {
    const clientId = ids.get(c.name);
    if (clientId === undefined || skip.has(c.name)) continue;
    out.set(c.name, [own(clientId), ...rest]);
  }
  return out;
}
