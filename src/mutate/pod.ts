import { denial, type Denial } from '../errors.ts';
import type { Container, Pod, ServiceAccountView, Volume } from '../kube/types.ts';
import type { Injection, PodProvider, ProviderName } from '../providers/types.ts';
import { escapePointerToken } from './json-pointer.ts';
import { appendAll, setMembers, type PatchOperation } from './patch.ts';

/** Opts a Pod out of every provider (each provider's own opt-out labels work too). */
export const SKIP_POD_LABEL = 'workload-identity-webhook.io/skip';

/**
 * What the webhook injected, recorded on the Pod. When a later webhook changes
 * serviceAccountName and the API server reinvokes this one, the record tells the webhook's own
 * env vars, volumes and annotations apart from the user's, so the old identity does not linger
 * (the Azure peer's issue #1475).
 */
export const INJECTED_ANNOTATION = 'workload-identity-webhook.io/injected';

interface InjectionRecord {
  /** ServiceAccount the injection was made for. */
  sa: string;
  /** Env var names added, by container (`init/NAME` for init containers). */
  env: Record<string, string[]>;
  volumes: string[];
  annotations: string[];
}

export interface PodAdmission {
  pod: Pod;
  /** The request's namespace: a Pod being created may not carry one itself. */
  namespace: string;
  serviceAccount: ServiceAccountView | undefined;
}

export type PodMutation =
  | {
      allowed: true;
      patch: PatchOperation[];
      injections: Injection[];
      warnings: string[];
    }
  | { allowed: false; denial: Denial };

export function serviceAccountNameOf(pod: Pod): string {
  return pod.spec?.serviceAccountName || (pod.spec?.serviceAccount as string | undefined) || 'default';
}

export function isWindowsPod(pod: Pod): boolean {
  return pod.spec?.os?.name === 'windows' || pod.spec?.nodeSelector?.['kubernetes.io/os'] === 'windows';
}

/**
 * Resolves what each provider would inject, without looking at the Pod's containers. Tenant
 * policy runs between this and `planPodPatch`.
 */
export function resolvePodInjections(
  providers: readonly PodProvider[],
  { pod, namespace, serviceAccount }: PodAdmission,
): { injections: Injection[]; denials: Denial[] } {
  const injections: Injection[] = [];
  const denials: Denial[] = [];
  if (pod.metadata?.labels?.[SKIP_POD_LABEL] !== undefined) return { injections, denials };
  const ctx = { pod, namespace, serviceAccount, windows: isWindowsPod(pod) };
  for (const provider of providers) {
    const result = provider.resolvePod(ctx);
    if (result === undefined) continue;
    if ('reason' in result) denials.push(result);
    else injections.push(result);
  }
  return { injections, denials };
}

/**
 * The pure mutation core: a Pod and its ServiceAccount in, additive JSON Patch out. No I/O, no
 * clock, no randomness: the server, the CLI's preview and the tests all call this.
 */
export function mutatePod(providers: readonly PodProvider[], admission: PodAdmission, policy?: InjectionPolicy): PodMutation {
  const resolved = resolvePodInjections(providers, admission);
  if (resolved.denials.length > 0) return { allowed: false, denial: mergeDenials(resolved.denials) };
  const { injections, denials } = policy ? policy(admission, resolved.injections) : resolved;
  if (denials.length > 0) return { allowed: false, denial: mergeDenials(denials) };
  return planPodPatch(admission.pod, injections, serviceAccountNameOf(admission.pod));
}

/**
 * Tenant policy (src/policy): judges the requested identities and may apply defaults to them.
 * Pure and synchronous like the rest of the core: compiled policies arrive as plain data.
 */
export type InjectionPolicy = (admission: PodAdmission, injections: Injection[]) => { injections: Injection[]; denials: Denial[] };

export function mergeDenials(denials: Denial[]): Denial {
  if (denials.length === 1) return denials[0];
  return denial(denials[0].reason, denials.map((d) => d.message).join('; '), denials[0].status);
}

/** Turns resolved injections into patch operations, refusing conflicts with the user's Pod. */
export function planPodPatch(original: Pod, injections: Injection[], serviceAccountName: string): PodMutation {
  const warnings: string[] = [];
  for (const injection of injections) if (injection.warnings) warnings.push(...injection.warnings);
  const ops: PatchOperation[] = [];

  let pod = original;
  let record = readRecord(original);
  if (record && record.sa !== serviceAccountName) {
    pod = removeRecorded(original, record, ops);
    record = undefined;
  }
  if (injections.length === 0) return { allowed: true, patch: ops, injections, warnings };

  const spec = pod.spec ?? {};
  const conflicts: string[] = [];

  // Volumes: one per provider. A user volume of the same name is ours only if it projects the
  // same token; anything else is the user's and is never taken over.
  const newVolumes: Volume[] = [];
  for (const { volume } of injections) {
    const existing = spec.volumes?.find((v) => v.name === volume.name);
    if (!existing) newVolumes.push(volume);
    else if (!sameProjection(existing, volume)) {
      conflicts.push(`the Pod already has a volume named "${volume.name}" that is not the token volume the webhook injects (${describeVolume(volume)}); rename that volume`);
    }
  }

  const annotations: Record<string, string> = {};
  for (const injection of injections) Object.assign(annotations, injection.annotations);

  const next: InjectionRecord = record
    ? { sa: record.sa, env: { ...record.env }, volumes: [...record.volumes], annotations: [...record.annotations] }
    : { sa: serviceAccountName, env: {}, volumes: [], annotations: [] };
  const containerOps: PatchOperation[] = [];
  planContainers(containerOps, conflicts, '/spec/initContainers', 'init/', spec.initContainers, injections, next);
  planContainers(containerOps, conflicts, '/spec/containers', '', spec.containers, injections, next);

  if (conflicts.length > 0) {
    return { allowed: false, denial: denial('Conflict', conflicts.join('; '), 409) };
  }

  for (const v of newVolumes) if (!next.volumes.includes(v.name)) next.volumes.push(v.name);
  for (const key of Object.keys(annotations)) if (!next.annotations.includes(key)) next.annotations.push(key);
  annotations[INJECTED_ANNOTATION] = JSON.stringify(next);

  if (pod.metadata === undefined) ops.push({ op: 'add', path: '/metadata', value: { annotations } });
  else setMembers(ops, '/metadata/annotations', pod.metadata.annotations, annotations);
  appendAll(ops, '/spec/volumes', spec.volumes, newVolumes);
  for (const op of containerOps) ops.push(op);
  return { allowed: true, patch: ops, injections, warnings };
}

function readRecord(pod: Pod): InjectionRecord | undefined {
  const raw = pod.metadata?.annotations?.[INJECTED_ANNOTATION];
  if (!raw) return undefined;
  try {
    const r = JSON.parse(raw) as InjectionRecord;
    if (typeof r.sa === 'string' && typeof r.env === 'object' && Array.isArray(r.volumes) && Array.isArray(r.annotations)) return r;
  } catch {
    // Not ours to trust: treat the Pod as never injected.
  }
  return undefined;
}

/**
 * Emits `remove` operations for what a previous injection recorded (highest index first, so
 * each index is still right when applied) and returns the Pod as it looks after them.
 */
function removeRecorded(pod: Pod, record: InjectionRecord, ops: PatchOperation[]): Pod {
  const spec = pod.spec ?? {};
  const volumes = new Set(record.volumes);
  const prune = <T>(base: string, list: T[] | undefined, drop: (item: T) => boolean): T[] | undefined => {
    if (!list) return list;
    for (let i = list.length - 1; i >= 0; i--) if (drop(list[i])) ops.push({ op: 'remove', path: `${base}/${i}` });
    return list.filter((item) => !drop(item));
  };
  const cleanContainers = (base: string, prefix: string, containers: Container[] | undefined) =>
    containers?.map((c, i) => {
      const names = new Set(record.env[prefix + c.name] ?? []);
      return {
        ...c,
        env: prune(`${base}/${i}/env`, c.env, (e) => names.has(e.name)),
        volumeMounts: prune(`${base}/${i}/volumeMounts`, c.volumeMounts, (m) => volumes.has(m.name)),
      };
    });
  const initContainers = cleanContainers('/spec/initContainers', 'init/', spec.initContainers);
  const containers = cleanContainers('/spec/containers', '', spec.containers);
  const keptVolumes = prune('/spec/volumes', spec.volumes, (v) => volumes.has(v.name));
  const annotations = { ...pod.metadata?.annotations };
  for (const key of [...record.annotations, INJECTED_ANNOTATION]) {
    if (annotations[key] === undefined) continue;
    ops.push({ op: 'remove', path: `/metadata/annotations/${escapePointerToken(key)}` });
    delete annotations[key];
  }
  return { ...pod, metadata: { ...pod.metadata, annotations }, spec: { ...spec, initContainers, containers, volumes: keptVolumes } };
}

function planContainers(
  ops: PatchOperation[],
  conflicts: string[],
  base: string,
  recordPrefix: string,
  containers: Container[] | undefined,
  injections: Injection[],
  record: InjectionRecord,
): void {
  if (!containers) return;
  for (let i = 0; i < containers.length; i++) {
    const container = containers[i];
    const mounts = [];
    const env = [];
    let envNames: Set<string> | undefined;
    for (const injection of injections) {
      if (injection.skipContainers.has(container.name)) continue;
      const volumeName = injection.volume.name;
      const atPath = container.volumeMounts?.find((m) => m.mountPath === injection.mountPath);
      if (atPath === undefined) {
        mounts.push({ name: volumeName, mountPath: injection.mountPath, readOnly: true });
      } else if (atPath.name !== volumeName) {
        conflicts.push(`container "${container.name}" already mounts volume "${atPath.name}" at ${injection.mountPath}, where the webhook mounts "${volumeName}"; move that mount or list the container in the provider's skip-containers annotation`);
      }
      envNames ??= new Set((container.env ?? []).map((e) => e.name));
      for (const group of injection.envGroups) {
        // The user's value always wins: a group is added only when none of its names is set.
        if (group.some((e) => envNames!.has(e.name))) continue;
        for (const e of group) {
          env.push(e);
          envNames.add(e.name);
        }
      }
    }
    if (env.length > 0) {
      const key = recordPrefix + container.name;
      record.env[key] = [...(record.env[key] ?? []), ...env.map((e) => e.name)];
    }
    appendAll(ops, `${base}/${i}/volumeMounts`, container.volumeMounts, mounts);
    appendAll(ops, `${base}/${i}/env`, container.env, env);
  }
}

/** Same token (audience, expiry, path) and same files; API-server defaults are ignored. */
function sameProjection(a: Volume, b: Volume): boolean {
  return projectionKey(a) === projectionKey(b);
}

function projectionKey(volume: Volume): string | undefined {
  const sources = volume.projected?.sources;
  if (!sources) return undefined;
  const parts: string[] = [];
  for (const s of sources) {
    if (s.serviceAccountToken) {
      const t = s.serviceAccountToken;
      parts.push(`token:${t.audience ?? ''}:${t.expirationSeconds ?? 3600}:${t.path}`);
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

export function injectedProviders(injections: readonly Injection[]): ProviderName[] {
  return injections.map((i) => i.provider);
}
