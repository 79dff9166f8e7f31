// The containers' part of the plan: which token mounts and env groups each container gets. The
// user's value always wins: a group is added only where the container sets none of its names, a
// mount only where nothing else is mounted at its path (anything else is a conflict), and a
// container's own value of a credential variable is reported as shadowing the identity.
import type { Container, EnvVar, VolumeMount } from '../kube/types.ts';
import type { Injection } from '../clouds/types.ts';
import { type EntrySet, injectedDigest } from './injection-record.ts';
import { appendAll, type PatchOperation } from './patch.ts';
import { mountsOf } from './pod-keys.ts';

/** A container's own value of an injected credential variable: it wins, and the identity goes unused. */
export interface Shadowed {
  provider: Injection['provider'];
  variable: string;
}

export interface ShadowedIn extends Shadowed {
  container: string;
}

/** The env entries of the record being written, as the containers' plan adds to them. */
export interface EnvRecord {
  /** Env vars recorded by an earlier call: a var equal to one of them is the webhook's own. */
  prior: EntrySet;
  /** Env vars this admission adds (the prior ones carried over). */
  env: EntrySet;
  /** [container key, env name] where the user's own value equals the one the webhook adds. */
  keep: EntrySet;
}

/** What the containers' plan yields, in container order. */
export interface ContainersPlan {
  ops: PatchOperation[];
  conflicts: string[];
  shadowed: ShadowedIn[];
}

/**
 * Mounts and env for the init containers, then the containers. Setup containers the webhook
 * injects (`own`: added ones the Pod has already) are its own: no provider mutates them, so a
 * second admission changes nothing.
 */
export function planContainers(
  lists: { initContainers?: Container[]; containers?: Container[] },
  injections: Injection[],
  own: ReadonlySet<string>,
  record: EnvRecord,
): ContainersPlan {
  const plan: ContainersPlan = { ops: [], conflicts: [], shadowed: [] };
  const setups = new Set([...own, ...injections.flatMap((i) => (i.initContainer ? [i.initContainer.name] : []))]);
  for (const [base, prefix, containers] of [
    ['/spec/initContainers', 'init/', lists.initContainers],
    ['/spec/containers', '', lists.containers],
  ] as const) {
    if (!containers) continue;
    for (let i = 0; i < containers.length; i++) {
      const container = containers[i];
      if (setups.has(container.name)) continue;
      const one = planContainer(container, prefix + container.name, injections, record);
      plan.conflicts.push(...one.conflicts);
      plan.shadowed.push(...one.shadowed);
      appendAll(plan.ops, `${base}/${i}/volumeMounts`, container.volumeMounts, one.mounts);
      appendAll(plan.ops, `${base}/${i}/env`, container.env, one.env);
    }
  }
  return plan;
}

/** What one container gets, and what stands in its way. */
interface ContainerPlan {
  mounts: VolumeMount[];
  env: EnvVar[];
  conflicts: string[];
  shadowed: ShadowedIn[];
}

function planContainer(
  container: Container,
  recordKey: string,
  injections: Injection[],
  record: EnvRecord,
): ContainerPlan {
  const plan: ContainerPlan = { mounts: [], env: [], conflicts: [], shadowed: [] };
  // The container's own env, indexed once (containers may carry hundreds of vars); names the
  // webhook adds go to `added`, so every injection's `configuredBy` sees the user's names only.
  let indexed: Map<string, string | undefined> | undefined;
  const added = new Set<string>();
  for (const injection of injections) {
    if (injection.skipContainers.has(container.name)) continue;
    indexed ??= envIndex(container);
    const userEnv = indexed;
    const note = (group: readonly EnvVar[]) =>
      plan.shadowed.push(...shadowedIn(injection, container.name, group, userEnv, record));
    if (configuresItself(injection, userEnv)) {
      for (const group of injection.envGroups) note(group);
      continue;
    }
    for (const wanted of mountsOf(injection)) {
      const atPath = container.volumeMounts?.find((m) => m.mountPath === wanted.mountPath);
      if (atPath === undefined) plan.mounts.push(wanted);
      else if (atPath.name !== wanted.name) plan.conflicts.push(mountConflict(container.name, atPath.name, wanted));
    }
    for (const group of injection.containerEnvGroups?.get(container.name) ?? injection.envGroups) {
      // The user's value always wins: a group is added only when none of its names is set.
      const guards = injection.envGuards;
      if (
        group.some((e) => userEnv.has(e.name) || added.has(e.name) || guards?.[e.name]?.some((g) => userEnv.has(g)))
      ) {
        note(group);
        keepOwnCopies(recordKey, group, userEnv, record);
        continue;
      }
      for (const e of group) {
        plan.env.push(e);
        added.add(e.name);
        if (e.value !== undefined) record.env.add(e.name, injectedDigest(e.value));
      }
    }
  }
  return plan;
}

function mountConflict(container: string, theirs: string, wanted: VolumeMount): string {
  return `container "${container}" already mounts volume "${theirs}" at ${wanted.mountPath}, where the webhook mounts "${wanted.name}"; move that mount or list the container in the provider's skip-containers annotation (or leave it out of include-containers)`;
}

/** The user's own copy of the very value the webhook adds stays the user's when a record is undone. */
function keepOwnCopies(
  recordKey: string,
  group: readonly EnvVar[],
  userEnv: ReadonlyMap<string, string | undefined>,
  record: EnvRecord,
): void {
  for (const e of group) {
    if (e.value === undefined || userEnv.get(e.name) !== e.value || record.prior.has(e.name, injectedDigest(e.value)))
      continue;
    record.keep.add(recordKey, e.name);
  }
}

/** The container sets, of each of the injection's `configuredBy` lists, a name. */
function configuresItself(injection: Injection, userEnv: ReadonlyMap<string, string | undefined>): boolean {
  return injection.configuredBy?.every((names) => names.some((n) => userEnv.has(n))) ?? false;
}

/**
 * The container's own values of credential variables the webhook would set, unless one is the
 * value the webhook itself wrote (an earlier admission, or the same value written by hand).
 */
function shadowedIn(
  injection: Injection,
  container: string,
  group: readonly { name: string; value?: string }[],
  userEnv: ReadonlyMap<string, string | undefined>,
  record: EnvRecord,
): ShadowedIn[] {
  const out: ShadowedIn[] = [];
  for (const e of group) {
    if (!injection.credentialEnv?.has(e.name) || !userEnv.has(e.name)) continue;
    const own = userEnv.get(e.name);
    if (own === e.value || (own !== undefined && record.prior.matches(e.name, () => own))) continue;
    out.push({ provider: injection.provider, variable: e.name, container });
  }
  return out;
}

/** Names only: the container's value may be anything, and the names are the webhook's own constants. */
export function shadowWarning(s: ShadowedIn): string {
  return `container ${JSON.stringify(s.container.slice(0, 63))} sets ${s.variable} itself, so it does not use the ${s.provider} identity the webhook injects; remove ${s.variable} from the container to use workload identity (docs/install.md#keeping-an-old-credential)`;
}

function envIndex(container: Container): Map<string, string | undefined> {
  const index = new Map<string, string | undefined>();
  // A stored empty value has no `value` (the API server omits empty strings): it reads as "".
  for (const e of container.env ?? []) index.set(e.name, e.valueFrom ? undefined : (e.value ?? ''));
  return index;
}
