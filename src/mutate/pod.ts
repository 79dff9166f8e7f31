import { annotationsBytes, MAX_ANNOTATIONS_BYTES } from '../bounds.ts';
import { denial, type Denial, isDenial, mergeDenials } from '../errors.ts';
import type { Container, Pod, ServiceAccountView, Volume, VolumeMount } from '../kube/types.ts';
import { isWindowsPod, serviceAccountNameOf } from '../model.ts';
import type { Injection, PodProvider } from '../clouds/types.ts';
import {
  EntrySet,
  INJECTED_ANNOTATION,
  injectedDigest,
  readRecord,
  RecordKeys,
  writeRecord,
  type InjectionRecord,
} from './injection-record.ts';
import { escapePointerToken } from './json-pointer.ts';
import { appendAll, setMembers, type PatchOperation } from './patch.ts';

/** Opts a Pod out of every provider (each provider's own opt-out labels work too). */
const SKIP_POD_LABEL = 'workload-identity-webhook.io/skip';

export { INJECTED_ANNOTATION };

const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/** Signs records when the caller brings no key: right for one process (tests, one replica). */
const PROCESS_KEYS = RecordKeys.random();

export interface PodAdmission {
  pod: Pod;
  /** The request's namespace: a Pod being created may not carry one itself. */
  namespace: string;
  serviceAccount: ServiceAccountView | undefined;
  /** Signs and checks the injection record; replicas must share it (see injection-record.ts). */
  recordKeys?: RecordKeys;
}

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

// The pure mutation core: a Pod and its ServiceAccount in, additive JSON Patch out. No I/O, no
// clock, no randomness. Admission (admission/pods.ts) runs its steps: resolve, then tenant
// policy's judgement (policy/), then plan; preview and the tests run them too.

/**
 * Step one: what each provider would inject, without looking at the Pod's containers; every
 * provider's refusal, merged.
 */
export function resolve(
  providers: readonly PodProvider[],
  { pod, namespace, serviceAccount }: PodAdmission,
): Injection[] | Denial {
  const injections: Injection[] = [];
  const denials: Denial[] = [];
  if (pod.metadata?.labels?.[SKIP_POD_LABEL] !== undefined) return injections;
  // A static Pod's mirror: the API server refuses mirror Pods that reference a ServiceAccount
  // token or any other API object, and the kubelet runs the manifest, not this object, anyway.
  if (pod.metadata?.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) return injections;
  const ctx = { pod, namespace, serviceAccount, windows: isWindowsPod(pod) };
  for (const provider of providers) {
    const result = provider.resolvePod(ctx);
    if (result === undefined) continue;
    if (isDenial(result)) denials.push(result);
    else injections.push(result);
  }
  return denials.length > 0 ? mergeDenials(denials) : injections;
}

/** The last step: the patch that adds the (judged) injections, refusing conflicts with the user's Pod. */
export function plan(admission: PodAdmission, injections: Injection[]): PodMutation {
  return planPodPatch(admission.pod, injections, {
    serviceAccountName: serviceAccountNameOf(admission.pod),
    namespace: admission.namespace,
    keys: admission.recordKeys ?? PROCESS_KEYS,
  });
}

/** Resolve then plan, with no tenant policy: for tools and tests. */
export function mutatePod(providers: readonly PodProvider[], admission: PodAdmission): PodMutation {
  const injections = resolve(providers, admission);
  return isDenial(injections) ? { allowed: false, denial: injections } : plan(admission, injections);
}

/** A container's own value of an injected credential variable: it wins, and the identity goes unused. */
export interface Shadowed {
  provider: Injection['provider'];
  variable: string;
}

interface PlanContext {
  serviceAccountName: string;
  namespace: string;
  keys: RecordKeys;
}

/** Turns resolved injections into patch operations, refusing conflicts with the user's Pod. */
function planPodPatch(original: Pod, injections: Injection[], ctx: PlanContext): PodMutation {
  const warnings: string[] = [];
  for (const injection of injections) if (injection.warnings) warnings.push(...injection.warnings);
  const ops: PatchOperation[] = [];

  // Another ServiceAccount's injection (the Pod was re-created under a new one) goes first.
  let pod = original;
  let record = readRecord(ctx.keys, ctx.namespace, original.metadata?.annotations?.[INJECTED_ANNOTATION]);
  if (record && record.sa !== ctx.serviceAccountName) {
    pod = removeRecorded(original, record, ops);
    record = undefined;
  }
  if (injections.length === 0) return { allowed: true, patch: ops, injections, warnings, shadowed: [] };

  const spec = pod.spec ?? {};
  const conflicts: string[] = [];
  const volumes = planVolumes(spec, injections, conflicts);
  const next = nextRecord(record);
  const added = planAdded(spec, injections);
  const planning: Planning = { ops: [], conflicts, injections, record: next, ownAdded: added.own, shadowed: [] };
  planContainers(planning, '/spec/initContainers', 'init/', spec.initContainers);
  planContainers(planning, '/spec/containers', '', spec.containers);
  for (const s of planning.shadowed) warnings.push(shadowWarning(s));
  const setups = planSetups(spec, injections, conflicts);
  if (conflicts.length > 0) {
    return { allowed: false, denial: denial('Conflict', listed(conflicts)) };
  }

  const additions: Additions = { volumes, setups, added, ...metadataOf(injections) };
  const written: InjectionRecord = {
    v: 2,
    sa: record?.sa ?? ctx.serviceAccountName,
    ...recorded(next, pod, additions),
  };
  additions.annotations[INJECTED_ANNOTATION] = writeRecord(ctx.keys, ctx.namespace, written);
  const tooLarge = annotationsProblem(pod.metadata?.annotations, additions.annotations);
  if (tooLarge) return { allowed: false, denial: tooLarge };
  addAll(ops, pod, additions, planning.ops);
  return {
    allowed: true,
    patch: ops,
    injections,
    warnings,
    shadowed: planning.shadowed.map(({ provider, variable }) => ({ provider, variable })),
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

/**
 * Volumes: one per provider. A user volume of the same name is ours only if it projects the
 * same token; anything else is the user's and is never taken over.
 */
function planVolumes(spec: NonNullable<Pod['spec']>, injections: Injection[], conflicts: string[]): Volume[] {
  const volumes: Volume[] = [];
  for (const volume of injections.flatMap(volumesOf)) {
    const existing = spec.volumes?.find((v) => v.name === volume.name);
    if (!existing) volumes.push(volume);
    else if (!sameProjection(existing, volume)) {
      conflicts.push(
        `the Pod already has a volume named "${volume.name}" that is not the token volume the webhook injects (${describeVolume(volume)}); rename that volume`,
      );
    }
  }
  return volumes;
}

/** Containers added whole (the Azure proxy), before and after each list's own. */
interface Added {
  initContainers: { first: Container[]; last: Container[] };
  containers: { first: Container[]; last: Container[] };
  /** Added containers the Pod has already, the webhook's own from an earlier admission. */
  own: Set<string>;
}

/**
 * A container the Pod already has under that name stays, as in the peer; when it is the webhook's
 * own from an earlier admission, it is not mutated again.
 */
function planAdded(spec: NonNullable<Pod['spec']>, injections: Injection[]): Added {
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
function planSetups(spec: NonNullable<Pod['spec']>, injections: Injection[], conflicts: string[]): Container[] {
  const setups: Container[] = [];
  for (const { initContainer, initContainerAlike = [] } of injections) {
    if (!initContainer) continue;
    const existing = spec.initContainers?.find((c) => c.name === initContainer.name);
    if (!existing) setups.push(initContainer);
    else if (
      !sameSetup(existing, initContainer) &&
      !initContainerAlike.some((command) => sameSetup(existing, { ...initContainer, command: [...command] }))
    ) {
      conflicts.push(
        `the Pod already has an init container named "${initContainer.name}" that is not the one the webhook injects; rename it`,
      );
    }
  }
  return setups;
}

function metadataOf(injections: Injection[]): { annotations: Record<string, string>; labels: Record<string, string> } {
  const annotations: Record<string, string> = {};
  const labels: Record<string, string> = {};
  for (const injection of injections) {
    Object.assign(annotations, injection.annotations);
    Object.assign(labels, injection.labels);
  }
  return { annotations, labels };
}

/** What the admission adds to the Pod, once no conflict stands in its way. */
interface Additions {
  volumes: Volume[];
  /** Setup init containers, first of all. */
  setups: Container[];
  added: Added;
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

/** The record's entries, carried over from an earlier admission of the same ServiceAccount. */
function nextRecord(record: InjectionRecord | undefined) {
  return {
    prior: new EntrySet(record?.env),
    env: new EntrySet(record?.env),
    vol: new EntrySet(record?.vol),
    ann: new EntrySet(record?.ann),
    keep: new EntrySet(record?.keep),
    init: new EntrySet(record?.init),
    ctr: new EntrySet(record?.ctr),
    lab: new EntrySet(record?.lab),
  };
}

/** The record's entries with this admission's additions: what a later admission may remove. */
function recorded(
  next: ReturnType<typeof nextRecord>,
  pod: Pod,
  { volumes, setups, added, annotations, labels }: Additions,
): Omit<InjectionRecord, 'v' | 'sa'> {
  for (const v of volumes) next.vol.add(v.name, injectedDigest(volumeKey(v)));
  for (const c of setups) next.init.add(c.name, injectedDigest(setupKey(c)));
  for (const c of [...added.initContainers.first, ...added.initContainers.last])
    next.init.add(c.name, injectedDigest(setupKey(c)));
  for (const c of [...added.containers.first, ...added.containers.last])
    next.ctr.add(c.name, injectedDigest(setupKey(c)));
  for (const [key, value] of Object.entries(annotations)) next.ann.add(key, injectedDigest(value));
  for (const [key, value] of Object.entries(labels))
    if (pod.metadata?.labels?.[key] !== value) next.lab.add(key, injectedDigest(value));
  return {
    env: next.env.entries,
    vol: next.vol.entries,
    ann: next.ann.entries,
    keep: next.keep.entries,
    ...(next.init.entries.length ? { init: next.init.entries } : {}),
    ...(next.ctr.entries.length ? { ctr: next.ctr.entries } : {}),
    ...(next.lab.entries.length ? { lab: next.lab.entries } : {}),
  };
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

/**
 * Emits `remove` operations for what a previous injection recorded (highest index first, so
 * each index is still right when applied) and returns the Pod as it looks after them. Only items
 * equal to what was recorded go: a value the user set, or another webhook's, stays.
 */
function removeRecorded(pod: Pod, record: InjectionRecord, ops: PatchOperation[]): Pod {
  const spec = pod.spec ?? {};
  const env = new EntrySet(record.env);
  const keep = new EntrySet(record.keep);
  const vols = new EntrySet(record.vol);
  const removedVolumes = new Set(
    (spec.volumes ?? []).filter((v) => vols.matches(v.name, () => volumeKey(v))).map((v) => v.name),
  );
  const inits = new EntrySet(record.init);
  const removedInit = new Set(
    (spec.initContainers ?? []).filter((c) => inits.matches(c.name, () => setupKey(c))).map((c) => c.name),
  );
  const ctrs = new EntrySet(record.ctr);
  const removedCtr = new Set(
    (spec.containers ?? []).filter((c) => ctrs.matches(c.name, () => setupKey(c))).map((c) => c.name),
  );
  const prune = <T>(base: string, list: T[] | undefined, drop: (item: T) => boolean): T[] | undefined => {
    if (!list) return list;
    for (let i = list.length - 1; i >= 0; i--) if (drop(list[i])) ops.push({ op: 'remove', path: `${base}/${i}` });
    return list.filter((item) => !drop(item));
  };
  const cleanContainers = (base: string, prefix: string, containers: Container[] | undefined) =>
    containers?.map((c, i) => ({
      ...c,
      env: prune(
        `${base}/${i}/env`,
        c.env,
        // An empty value we added is stored without one (the API server omits empty strings).
        (e) =>
          e.valueFrom === undefined && env.matches(e.name, () => e.value ?? '') && !keep.has(prefix + c.name, e.name),
      ),
      // A mount of a volume that goes would leave the Pod invalid: it goes too.
      volumeMounts: prune(`${base}/${i}/volumeMounts`, c.volumeMounts, (m) => removedVolumes.has(m.name)),
    }));
  // A setup container that goes is removed whole, after the edits that address others by index.
  const initContainers = cleanContainers(
    '/spec/initContainers',
    'init/',
    spec.initContainers?.map((c) => (removedInit.has(c.name) ? { name: c.name } : c)),
  )?.filter((c) => !removedInit.has(c.name));
  (spec.initContainers ?? []).forEach((_c, i, all) => {
    const j = all.length - 1 - i;
    if (removedInit.has(all[j].name)) ops.push({ op: 'remove', path: `/spec/initContainers/${j}` });
  });
  const containers = cleanContainers(
    '/spec/containers',
    '',
    spec.containers?.map((c) => (removedCtr.has(c.name) ? { name: c.name } : c)),
  )?.filter((c) => !removedCtr.has(c.name));
  (spec.containers ?? []).forEach((_c, i, all) => {
    const j = all.length - 1 - i;
    if (removedCtr.has(all[j].name)) ops.push({ op: 'remove', path: `/spec/containers/${j}` });
  });
  const keptVolumes = prune('/spec/volumes', spec.volumes, (v) => removedVolumes.has(v.name));
  const annotations = { ...pod.metadata?.annotations };
  const ann = new EntrySet(record.ann);
  for (const key of Object.keys(annotations)) {
    if (key !== INJECTED_ANNOTATION && !ann.matches(key, () => annotations[key])) continue;
    ops.push({ op: 'remove', path: `/metadata/annotations/${escapePointerToken(key)}` });
    delete annotations[key];
  }
  const labels = pod.metadata?.labels && { ...pod.metadata.labels };
  const lab = new EntrySet(record.lab);
  for (const key of Object.keys(labels ?? {})) {
    if (!lab.matches(key, () => labels![key])) continue;
    ops.push({ op: 'remove', path: `/metadata/labels/${escapePointerToken(key)}` });
    delete labels![key];
  }
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations, ...(labels && { labels }) },
    spec: { ...spec, initContainers, containers, volumes: keptVolumes },
  };
}

interface NextRecord {
  /** Env vars recorded by an earlier call: a var equal to one of them is the webhook's own. */
  prior: EntrySet;
  env: EntrySet;
  keep: EntrySet;
}

/** The containers' planning state: their operations, the conflicts, and what the record keeps. */
interface Planning {
  ops: PatchOperation[];
  conflicts: string[];
  injections: Injection[];
  record: NextRecord;
  ownAdded: ReadonlySet<string>;
  shadowed: ShadowedIn[];
}

function planContainers(
  { ops, conflicts, injections, record, ownAdded, shadowed }: Planning,
  base: string,
  recordPrefix: string,
  containers: Container[] | undefined,
): void {
  if (!containers) return;
  // Setup containers the webhook injects are its own: no provider mutates them, so a second
  // admission changes nothing.
  const setups = new Set([...ownAdded, ...injections.flatMap((i) => (i.initContainer ? [i.initContainer.name] : []))]);
  for (let i = 0; i < containers.length; i++) {
    const container = containers[i];
    if (setups.has(container.name)) continue;
    const mounts = [];
    const env = [];
    // The container's own env, indexed once (containers may carry hundreds of vars); names the
    // webhook adds go to `added`, so every injection's `configuredBy` sees the user's names only.
    let userEnv: Map<string, string | undefined> | undefined;
    const added = new Set<string>();
    for (const injection of injections) {
      if (injection.skipContainers.has(container.name)) continue;
      userEnv ??= envIndex(container);
      if (configuresItself(injection, userEnv)) {
        for (const group of injection.envGroups)
          noteShadowed(shadowed, injection, container.name, group, userEnv, record);
        continue;
      }
      for (const wanted of mountsOf(injection)) {
        const atPath = container.volumeMounts?.find((m) => m.mountPath === wanted.mountPath);
        if (atPath === undefined) {
          mounts.push(wanted);
        } else if (atPath.name !== wanted.name) {
          conflicts.push(
            `container "${container.name}" already mounts volume "${atPath.name}" at ${wanted.mountPath}, where the webhook mounts "${wanted.name}"; move that mount or list the container in the provider's skip-containers annotation (or leave it out of include-containers)`,
          );
        }
      }
      for (const group of injection.containerEnvGroups?.get(container.name) ?? injection.envGroups) {
        // The user's value always wins: a group is added only when none of its names is set.
        const guards = injection.envGuards;
        if (
          group.some((e) => userEnv!.has(e.name) || added.has(e.name) || guards?.[e.name]?.some((g) => userEnv!.has(g)))
        ) {
          noteShadowed(shadowed, injection, container.name, group, userEnv, record);
          // The user's own copy of the very value the webhook adds stays the user's.
          for (const e of group) {
            if (
              e.value === undefined ||
              userEnv.get(e.name) !== e.value ||
              record.prior.has(e.name, injectedDigest(e.value))
            )
              continue;
            record.keep.add(recordPrefix + container.name, e.name);
          }
          continue;
        }
        for (const e of group) {
          env.push(e);
          added.add(e.name);
          if (e.value !== undefined) record.env.add(e.name, injectedDigest(e.value));
        }
      }
    }
    appendAll(ops, `${base}/${i}/volumeMounts`, container.volumeMounts, mounts);
    appendAll(ops, `${base}/${i}/env`, container.env, env);
  }
}

/** The container sets, of each of the injection's `configuredBy` lists, a name. */
function configuresItself(injection: Injection, userEnv: ReadonlyMap<string, string | undefined>): boolean {
  return injection.configuredBy?.every((names) => names.some((n) => userEnv.has(n))) ?? false;
}

interface ShadowedIn extends Shadowed {
  container: string;
}

/**
 * The container's own value of a credential variable the webhook would set, unless it is the
 * value the webhook itself wrote (an earlier admission, or the same value written by hand).
 */
function noteShadowed(
  out: ShadowedIn[],
  injection: Injection,
  container: string,
  group: readonly { name: string; value?: string }[],
  userEnv: ReadonlyMap<string, string | undefined>,
  record: NextRecord,
): void {
  for (const e of group) {
    if (!injection.credentialEnv?.has(e.name) || !userEnv.has(e.name)) continue;
    const own = userEnv.get(e.name);
    if (own === e.value || (own !== undefined && record.prior.matches(e.name, () => own))) continue;
    out.push({ provider: injection.provider, variable: e.name, container });
  }
}

/** Names only: the container's value may be anything, and the names are the webhook's own constants. */
function shadowWarning(s: ShadowedIn): string {
  return `container ${JSON.stringify(s.container.slice(0, 63))} sets ${s.variable} itself, so it does not use the ${s.provider} identity the webhook injects; remove ${s.variable} from the container to use workload identity (docs/install.md#keeping-an-old-credential)`;
}

function envIndex(container: Container): Map<string, string | undefined> {
  const index = new Map<string, string | undefined>();
  // A stored empty value has no `value` (the API server omits empty strings): it reads as "".
  for (const e of container.env ?? []) index.set(e.name, e.valueFrom ? undefined : (e.value ?? ''));
  return index;
}

/**
 * The setup container is already there, from an earlier admission or from the peer webhook
 * running side by side (with the API server's defaults and Go's empty fields added): same image,
 * command and environment.
 */
function sameSetup(existing: Container, ours: Container): boolean {
  return setupKey(existing) === setupKey(ours);
}

/**
 * What a setup container runs (image, command, env), whatever the API server defaulted. An empty
 * value is the same as none: the API server (and a reinvocation's review) omits empty strings.
 */
function setupKey(c: Container): string {
  return JSON.stringify([c.image, c.command ?? null, (c.env ?? []).map((e) => [e.name, e.value ?? ''])]);
}

/** A volume's identity for the record: its projection, or the volume as written (emptyDir). */
function volumeKey(v: Volume): string {
  return projectionKey(v) ?? JSON.stringify({ ...v, name: undefined });
}

function volumesOf(injection: Injection): Volume[] {
  return [injection.volume, ...(injection.extraVolumes ?? []).map((e) => e.volume)];
}

function mountsOf(injection: Injection): VolumeMount[] {
  return [
    ...[injection.mountPath, ...(injection.extraMountPaths ?? [])].map((mountPath) => ({
      name: injection.volume.name,
      mountPath,
      readOnly: true,
    })),
    ...(injection.extraVolumes ?? []).map((e) => e.mount),
  ];
}

/**
 * Same token (audience, path) and same files; API-server defaults are ignored, and so is the
 * expiry: a peer running side by side may have chosen another (the AWS peer jitters EKS Pod
 * Identity's), and the kubelet refreshes either token in time.
 */
function sameProjection(a: Volume, b: Volume): boolean {
  return projectionKey(a, false) === projectionKey(b, false);
}

function projectionKey(volume: Volume, withExpiry = true): string | undefined {
  const sources = volume.projected?.sources;
  if (!sources) {
    // Other kinds (pfnet's emptyDir and downward-API volumes): the source itself, modes aside.
    const { name: _name, ...source } = volume;
    if (Object.keys(source).length === 0) return undefined;
    return JSON.stringify(source, (k, v) => (k === 'defaultMode' ? undefined : v));
  }
  const parts: string[] = [];
  for (const s of sources) {
    if (s.serviceAccountToken) {
      const t = s.serviceAccountToken;
      parts.push(`token:${t.audience ?? ''}:${withExpiry ? (t.expirationSeconds ?? 3600) : ''}:${t.path}`);
    } else if (s.downwardAPI) {
      for (const item of s.downwardAPI.items ?? []) parts.push(`file:${item.path}:${item.fieldRef?.fieldPath ?? ''}`);
    } else {
      parts.push(JSON.stringify(s));
    }
  }
  return parts.sort().join('|');
}

function describeVolume(volume: Volume): string {
  const token = volume.projected?.sources?.find((s) => s.serviceAccountToken)?.serviceAccountToken;
  return token ? `audience ${token.audience}, expirationSeconds ${token.expirationSeconds}` : 'projected token';
}
