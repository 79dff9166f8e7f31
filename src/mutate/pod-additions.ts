// What an admission adds to the Pod beside the containers' env and mounts: the token volumes,
// the setup init containers, whole added containers (the Azure proxy), annotations and labels.
// An item the Pod already has under that name is the webhook's own only when it is the same
// thing (pod-keys.ts); anything else is the user's, never taken over: a conflict.
import type { Container, PodSpec, Volume } from '../kube/types.ts';
import type { Injection } from '../clouds/types.ts';
import { describeVolume, sameProjection, sameSetup, volumesOf } from './pod-keys.ts';

/** Items to add, and the conflicts that refuse the Pod. */
export interface Planned<T> {
  items: T[];
  conflicts: string[];
}

/**
 * Volumes: one per provider. A user volume of the same name is ours only if it projects the
 * same token; anything else is the user's and is never taken over.
 */
export function planVolumes(spec: PodSpec, injections: Injection[]): Planned<Volume> {
  const planned: Planned<Volume> = { items: [], conflicts: [] };
  for (const volume of injections.flatMap(volumesOf)) {
    const existing = spec.volumes?.find((v) => v.name === volume.name);
    if (!existing) planned.items.push(volume);
    else if (!sameProjection(existing, volume)) {
      planned.conflicts.push(
        `the Pod already has a volume named "${volume.name}" that is not the token volume the webhook injects (${describeVolume(volume)}); rename that volume`,
      );
    }
  }
  return planned;
}

/** Containers added whole (the Azure proxy), before and after each list's own. */
export interface Added {
  initContainers: { first: Container[]; last: Container[] };
  containers: { first: Container[]; last: Container[] };
  /** Added containers the Pod has already, the webhook's own from an earlier admission. */
  own: Set<string>;
}

/**
 * A container the Pod already has under that name stays, as in the peer; when it is the webhook's
 * own from an earlier admission, it is not mutated again.
 */
export function planAdded(spec: PodSpec, injections: Injection[]): Added {
  const added: Added = {
    initContainers: { first: [], last: [] },
    containers: { first: [], last: [] },
    own: new Set<string>(),
  };
  for (const { list, at, container } of injections.flatMap((i) => i.addedContainers ?? [])) {
    const existing = spec[list]?.find((c) => c.name === container.name);
    if (!existing) added[list][at].push(container);
    else if (sameSetup(existing, container)) added.own.add(container.name);
  }
  return added;
}

/** Setup init containers; one of the same name that runs something else is the user's, a conflict. */
export function planSetups(spec: PodSpec, injections: Injection[]): Planned<Container> {
  const planned: Planned<Container> = { items: [], conflicts: [] };
  for (const { initContainer, initContainerAlike = [] } of injections) {
    if (!initContainer) continue;
    const existing = spec.initContainers?.find((c) => c.name === initContainer.name);
    if (!existing) planned.items.push(initContainer);
    else if (
      !sameSetup(existing, initContainer) &&
      !initContainerAlike.some((command) => sameSetup(existing, { ...initContainer, command: [...command] }))
    ) {
      planned.conflicts.push(
        `the Pod already has an init container named "${initContainer.name}" that is not the one the webhook injects; rename it`,
      );
    }
  }
  return planned;
}

/** Every injection's annotations and labels, a later provider's over an earlier's. */
export function metadataOf(injections: Injection[]): {
  annotations: Record<string, string>;
  labels: Record<string, string>;
} {
  const annotations: Record<string, string> = {};
  const labels: Record<string, string> = {};
  for (const injection of injections) {
    Object.assign(annotations, injection.annotations);
    Object.assign(labels, injection.labels);
  }
  return { annotations, labels };
}

/** What the admission adds to the Pod, once no conflict stands in its way. */
export interface Additions {
  volumes: Volume[];
  /** Setup init containers, first of all. */
  setups: Container[];
  added: Added;
  annotations: Record<string, string>;
  labels: Record<string, string>;
}
