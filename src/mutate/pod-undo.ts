// Undoing an earlier admission: when the Pod comes back under another ServiceAccount (a later
// webhook changed serviceAccountName and the API server reinvokes this one), what the injection
// record lists is removed first, so the old identity does not linger. Only items equal to what was
// recorded go: a value the user set, or another webhook's, stays.
import type { Container, Pod, PodSpec } from '../kube/types.ts';
import { EntrySet, INJECTED_ANNOTATION, type InjectionRecord } from './injection-record.ts';
import { escapePointerToken } from './json-pointer.ts';
import type { PatchOperation } from './patch.ts';
import { setupKey, volumeKey } from './pod-keys.ts';

/**
 * The `remove` operations for what a previous injection recorded (highest index first, so each
 * index is still right when applied), and the Pod as it looks after them.
 */
export function removeRecorded(pod: Pod, record: InjectionRecord): { pod: Pod; ops: PatchOperation[] } {
  const spec = pod.spec ?? {};
  const ops: PatchOperation[] = [];
  const gone = removedNames(spec, record);
  const env: RecordedEnv = { env: new EntrySet(record.env), keep: new EntrySet(record.keep), volumes: gone.volumes };
  const initContainers = removeFrom(ops, env, '/spec/initContainers', 'init/', spec.initContainers, gone.init);
  const containers = removeFrom(ops, env, '/spec/containers', '', spec.containers, gone.ctr);
  const volumes = prune('/spec/volumes', spec.volumes, (v) => gone.volumes.has(v.name), ops);
  const metadata = removeMetadata(ops, pod.metadata, record);
  return { pod: { ...pod, metadata, spec: { ...spec, initContainers, containers, volumes } }, ops };
}

/** The volumes and added containers that go: those still equal to what was recorded. */
function removedNames(spec: PodSpec, record: InjectionRecord) {
  const vols = new EntrySet(record.vol);
  const inits = new EntrySet(record.init);
  const ctrs = new EntrySet(record.ctr);
  return {
    volumes: new Set((spec.volumes ?? []).filter((v) => vols.matches(v.name, () => volumeKey(v))).map((v) => v.name)),
    init: new Set(
      (spec.initContainers ?? []).filter((c) => inits.matches(c.name, () => setupKey(c))).map((c) => c.name),
    ),
    ctr: new Set((spec.containers ?? []).filter((c) => ctrs.matches(c.name, () => setupKey(c))).map((c) => c.name)),
  };
}

/** What a container's own entries are matched against. */
interface RecordedEnv {
  env: EntrySet;
  /** [container key, env name]: the user's own copy of an added value, which stays. */
  keep: EntrySet;
  /** Volumes that go: their mounts go too. */
  volumes: ReadonlySet<string>;
}

/**
 * One container list: the recorded env and mounts out of the containers that stay, then the
 * added containers that go, removed whole after the edits that address others by index.
 */
function removeFrom(
  ops: PatchOperation[],
  recorded: RecordedEnv,
  base: string,
  prefix: string,
  list: Container[] | undefined,
  gone: ReadonlySet<string>,
): Container[] | undefined {
  const cleaned = list
    ?.map((c) => (gone.has(c.name) ? { name: c.name } : c))
    .map((c, i) => cleanContainer(ops, recorded, `${base}/${i}`, prefix, c))
    .filter((c) => !gone.has(c.name));
  (list ?? []).forEach((_c, i, all) => {
    const j = all.length - 1 - i;
    if (gone.has(all[j].name)) ops.push({ op: 'remove', path: `${base}/${j}` });
  });
  return cleaned;
}

function cleanContainer(
  ops: PatchOperation[],
  { env, keep, volumes }: RecordedEnv,
  at: string,
  prefix: string,
  c: Container,
): Container {
  return {
    ...c,
    env: prune(
      `${at}/env`,
      c.env,
      // An empty value we added is stored without one (the API server omits empty strings).
      (e) =>
        e.valueFrom === undefined && env.matches(e.name, () => e.value ?? '') && !keep.has(prefix + c.name, e.name),
      ops,
    ),
    // A mount of a volume that goes would leave the Pod invalid: it goes too.
    volumeMounts: prune(`${at}/volumeMounts`, c.volumeMounts, (m) => volumes.has(m.name), ops),
  };
}

/** The items of a list that stay; a `remove` for each that goes, highest index first. */
function prune<T>(
  base: string,
  list: T[] | undefined,
  drop: (item: T) => boolean,
  ops: PatchOperation[],
): T[] | undefined {
  if (!list) return list;
  for (let i = list.length - 1; i >= 0; i--) if (drop(list[i])) ops.push({ op: 'remove', path: `${base}/${i}` });
  return list.filter((item) => !drop(item));
}

/** The recorded annotations (and the record itself) and labels, removed where still equal. */
function removeMetadata(ops: PatchOperation[], metadata: Pod['metadata'], record: InjectionRecord): Pod['metadata'] {
  const annotations = { ...metadata?.annotations };
  const ann = new EntrySet(record.ann);
  for (const key of Object.keys(annotations)) {
    if (key !== INJECTED_ANNOTATION && !ann.matches(key, () => annotations[key])) continue;
    ops.push({ op: 'remove', path: `/metadata/annotations/${escapePointerToken(key)}` });
    delete annotations[key];
  }
  const labels = metadata?.labels && { ...metadata.labels };
  if (labels) {
    const lab = new EntrySet(record.lab);
    for (const key of Object.keys(labels)) {
      if (!lab.matches(key, () => labels[key])) continue;
      ops.push({ op: 'remove', path: `/metadata/labels/${escapePointerToken(key)}` });
      delete labels[key];
    }
  }
  return { ...metadata, annotations, ...(labels && { labels }) };
}
