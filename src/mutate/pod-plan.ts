// The plan: resolved (and judged) injections in, the additive JSON Patch out, or a refusal when
// what the webhook adds conflicts with the user's Pod or would take its annotations over what
// kube-apiserver stores. An earlier record of another ServiceAccount is undone first (pod-undo.ts).
import { annotationsBytes, MAX_ANNOTATIONS_BYTES } from '../bounds.ts';
import { denial, type Denial } from '../errors.ts';
import type { Container, Pod } from '../kube/types.ts';
import type { Injection } from '../clouds/types.ts';
import { INJECTED_ANNOTATION, readRecord, type RecordKeys, writeRecord } from './injection-record.ts';
import { appendAll, type PatchOperation, setMembers } from './patch.ts';
import { type Additions, metadataOf, planAdded, planSetups, planVolumes } from './pod-additions.ts';
import { planContainers, type Shadowed, shadowWarning } from './pod-containers.ts';
import { draftRecord, recorded } from './pod-record.ts';
import { removeRecorded } from './pod-undo.ts';

export type PodMutation =
  | {
      allowed: true;
      patch: PatchOperation[];
      injections: Injection[];
      warnings: string[];
      /** Credential variables a container's own value shadows (for the metric), one per container. */
      shadowed: Shadowed[];
    }
  | { allowed: false; denial: Denial };

export interface PlanContext {
  serviceAccountName: string;
  namespace: string;
  keys: RecordKeys;
}

/** Turns resolved injections into patch operations, refusing conflicts with the user's Pod. */
export function planPodPatch(original: Pod, injections: Injection[], ctx: PlanContext): PodMutation {
  const warnings: string[] = [];
  for (const injection of injections) if (injection.warnings) warnings.push(...injection.warnings);

  // Another ServiceAccount's injection (the Pod was re-created under a new one) goes first.
  let pod = original;
  let ops: PatchOperation[] = [];
  let record = readRecord(ctx.keys, ctx.namespace, original.metadata?.annotations?.[INJECTED_ANNOTATION]);
  if (record && record.sa !== ctx.serviceAccountName) {
    ({ pod, ops } = removeRecorded(original, record));
    record = undefined;
  }
  if (injections.length === 0) return { allowed: true, patch: ops, injections, warnings, shadowed: [] };

  const spec = pod.spec ?? {};
  const volumes = planVolumes(spec, injections);
  const next = draftRecord(record);
  const added = planAdded(spec, injections);
  const containers = planContainers(spec, injections, added.own, next);
  for (const s of containers.shadowed) warnings.push(shadowWarning(s));
  const setups = planSetups(spec, injections);
  const conflicts = [...volumes.conflicts, ...containers.conflicts, ...setups.conflicts];
  if (conflicts.length > 0) {
    return { allowed: false, denial: denial('Conflict', listed(conflicts)) };
  }

  const additions: Additions = { volumes: volumes.items, setups: setups.items, added, ...metadataOf(injections) };
  const written = { v: 2 as const, sa: record?.sa ?? ctx.serviceAccountName, ...recorded(next, pod, additions) };
  additions.annotations[INJECTED_ANNOTATION] = writeRecord(ctx.keys, ctx.namespace, written);
  const tooLarge = annotationsProblem(pod.metadata?.annotations, additions.annotations);
  if (tooLarge) return { allowed: false, denial: tooLarge };
  addAll(ops, pod, additions, containers.ops);
  return {
    allowed: true,
    patch: ops,
    injections,
    warnings,
    shadowed: containers.shadowed.map(({ provider, variable }) => ({ provider, variable })),
  };
}

/** Conflicts as a message: the first few and how many more (one a container: up to 500). */
function listed(conflicts: string[], shown = 5): string {
  const more = conflicts.length - shown;
  return conflicts.slice(0, shown).join('; ') + (more > 0 ? `; and ${more} more like these` : '');
}

/**
 * kube-apiserver stores no object whose annotations, keys and values, exceed 256 KiB: a patch
 * that would take the Pod over is refused here, with what the webhook adds named, not answered
 * for the API server to refuse (role-arns of 1,737 profiles did).
 */
function annotationsProblem(
  own: Readonly<Record<string, string>> | undefined,
  added: Readonly<Record<string, string>>,
): Denial | undefined {
  // An added key the Pod has already is replaced: its own value no longer counts.
  let bytes = annotationsBytes(own) + annotationsBytes(added);
  for (const key of Object.keys(added))
    if (own && Object.hasOwn(own, key)) bytes -= Buffer.byteLength(key) + Buffer.byteLength(own[key]);
  if (bytes <= MAX_ANNOTATIONS_BYTES) return undefined;
  const largest = Object.keys(added)
    .map((key) => ({ key, bytes: Buffer.byteLength(key) + Buffer.byteLength(added[key]) }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 3)
    .map((a) => `${a.key} (${a.bytes} bytes)`);
  return denial(
    'TooLarge',
    `with the annotations workload-identity-webhook adds (${largest.join(', ')}), the Pod's annotations would hold ${bytes} bytes, more than the ${MAX_ANNOTATIONS_BYTES} kube-apiserver stores; name fewer roles or providers in the ServiceAccount's annotations, or give the Pod fewer annotations of its own`,
  );
}

/** The operations, in an order where each index is still right when applied. */
function addAll(ops: PatchOperation[], pod: Pod, additions: Additions, containerOps: PatchOperation[]): void {
  const { annotations, labels, added } = additions;
  const spec = pod.spec ?? {};
  const hasLabels = Object.keys(labels).length > 0;
  if (pod.metadata === undefined)
    ops.push({ op: 'add', path: '/metadata', value: { annotations, ...(hasLabels ? { labels } : {}) } });
  else {
    setMembers(ops, '/metadata/annotations', pod.metadata.annotations, annotations);
    setMembers(ops, '/metadata/labels', pod.metadata.labels, labels);
  }
  appendAll(ops, '/spec/volumes', spec.volumes, additions.volumes);
  for (const op of containerOps) ops.push(op);
  // Setup init containers go first, after the operations that address init containers by index.
  addContainers(
    ops,
    '/spec/initContainers',
    spec.initContainers,
    [...additions.setups, ...added.initContainers.first],
    added.initContainers.last,
  );
  addContainers(ops, '/spec/containers', spec.containers, added.containers.first, added.containers.last);
}

/** Adds containers before and after a list's own, after every operation that addresses it by index. */
function addContainers(
  ops: PatchOperation[],
  path: string,
  list: Container[] | undefined,
  first: Container[],
  last: Container[],
): void {
  if (first.length === 0 && last.length === 0) return;
  if (list === undefined) {
    ops.push({ op: 'add', path, value: [...first, ...last] });
    return;
  }
  for (const c of last) ops.push({ op: 'add', path: `${path}/-`, value: c });
  for (const c of [...first].reverse()) ops.push({ op: 'add', path: `${path}/0`, value: c });
}
