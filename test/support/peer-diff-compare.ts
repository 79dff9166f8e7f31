// Compares two stored Pods as the kubelet reads them: volumes by name, containers by name (and
// their order), mounts by path, env by name, and env order only where it changes a value: a
// $(VAR) reference expands only to a variable defined before it in the same container.
import { isDeepStrictEqual } from 'node:util';
import type { Container, EnvVar, Pod } from '../../src/kube/types.ts';

export interface Difference {
  path: string;
  ours: unknown;
  theirs: unknown;
}

export type Stored = Pod | { refused: string };

const isRefused = (p: Stored): p is { refused: string } => 'refused' in p;

/** Keys the API server sets on every object; never a webhook's doing. */
const SERVER_METADATA = ['uid', 'creationTimestamp', 'resourceVersion', 'managedFields', 'generation'];
const CONTAINER_LISTS = ['initContainers', 'containers', 'ephemeralContainers'] as const;

function deep(path: string, a: unknown, b: unknown, out: Difference[]): void {
  if (isDeepStrictEqual(a, b)) return;
  const plain = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (plain(a) && plain(b)) {
    const x = a as Record<string, unknown>;
    const y = b as Record<string, unknown>;
    for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) deep(`${path}.${k}`, x[k], y[k], out);
    return;
  }
  out.push({ path, ours: a, theirs: b });
}

/** A list of named items as a map (a repeated name keeps every copy, in order). */
function byKey<T>(items: T[] | undefined, key: (t: T) => string): Record<string, T | T[]> {
  const out: Record<string, T | T[]> = {};
  for (const item of items ?? []) {
    const k = key(item);
    if (k in out) out[k] = ([] as T[]).concat(out[k] as T, item);
    else out[k] = item;
  }
  return out;
}

/** For each $(NAME) a value references: whether NAME is defined before it (else it stays literal). */
function referenceMeaning(env: EnvVar[] | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const seen = new Set<string>();
  for (const e of env ?? []) {
    const refs = [...(e.value ?? '').matchAll(/\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g)].map((m) => m[1]);
    if (refs.length) out[e.name] = refs.map((r) => `${r}:${seen.has(r) ? 'expanded' : 'literal'}`);
    seen.add(e.name);
  }
  return out;
}

function compareContainer(path: string, a: Container | undefined, b: Container | undefined, out: Difference[]): void {
  if (!a || !b) {
    out.push({ path, ours: a?.name ?? null, theirs: b?.name ?? null });
    return;
  }
  const { env: envA, volumeMounts: mA, ...restA } = a;
  const { env: envB, volumeMounts: mB, ...restB } = b;
  deep(path, restA, restB, out);
  const envs = [byKey(envA, (e) => e.name), byKey(envB, (e) => e.name)];
  for (const name of new Set([...Object.keys(envs[0]), ...Object.keys(envs[1])]))
    deep(`${path}.env[${name}]`, envs[0][name], envs[1][name], out);
  const [refA, refB] = [referenceMeaning(envA), referenceMeaning(envB)];
  for (const name of new Set([...Object.keys(refA), ...Object.keys(refB)]))
    if (envs[0][name] && envs[1][name]) deep(`${path}.env[${name}].$(references)`, refA[name], refB[name], out);
  const mounts = [byKey(mA, (m) => m.mountPath), byKey(mB, (m) => m.mountPath)];
  for (const p of new Set([...Object.keys(mounts[0]), ...Object.keys(mounts[1])]))
    deep(`${path}.volumeMounts[${p}]`, mounts[0][p], mounts[1][p], out);
}

export function diffPods(ours: Stored, theirs: Stored): Difference[] {
  const out: Difference[] = [];
  if (isRefused(ours) || isRefused(theirs)) {
    if (isRefused(ours) && isRefused(theirs)) return out;
    out.push({
      path: '(admission)',
      ours: isRefused(ours) ? `refused: ${ours.refused}` : 'admitted',
      theirs: isRefused(theirs) ? `refused: ${theirs.refused}` : 'admitted',
    });
    return out;
  }
  const meta = (p: Pod) => {
    const m = { ...(p.metadata ?? {}) } as Record<string, unknown>;
    for (const k of SERVER_METADATA) delete m[k];
    return m;
  };
  deep('metadata', meta(ours), meta(theirs), out);
  const specA = { ...(ours.spec ?? {}) } as Record<string, any>;
  const specB = { ...(theirs.spec ?? {}) } as Record<string, any>;
  const vols = [
    byKey(specA.volumes, (v: { name: string }) => v.name),
    byKey(specB.volumes, (v: { name: string }) => v.name),
  ];
  for (const name of new Set([...Object.keys(vols[0]), ...Object.keys(vols[1])]))
    deep(`spec.volumes[${name}]`, vols[0][name], vols[1][name], out);
  for (const list of CONTAINER_LISTS) {
    const a: Container[] = specA[list] ?? [];
    const b: Container[] = specB[list] ?? [];
    deep(
      `spec.${list}(order)`,
      a.map((c) => c.name),
      b.map((c) => c.name),
      out,
    );
    for (const name of new Set([...a, ...b].map((c) => c.name)))
      compareContainer(
        `spec.${list}[${name}]`,
        a.find((c) => c.name === name),
        b.find((c) => c.name === name),
        out,
      );
    delete specA[list];
    delete specB[list];
  }
  delete specA.volumes;
  delete specB.volumes;
  deep('spec', specA, specB, out);
  return out;
}
