import { denial, type Denial } from '../errors.ts';
import type { Container, Pod, ServiceAccountView, Volume } from '../kube/types.ts';
import type { Injection, PodProvider, ProviderName } from '../providers/types.ts';
import { appendAll, setMembers, type PatchOperation } from './patch.ts';

/** Opts a Pod out of every provider (each provider's own opt-out labels work too). */
export const SKIP_POD_LABEL = 'workload-identity-webhook.io/skip';

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
export function mutatePod(providers: readonly PodProvider[], admission: PodAdmission): PodMutation {
  const { injections, denials } = resolvePodInjections(providers, admission);
  if (denials.length > 0) return { allowed: false, denial: mergeDenials(denials) };
  return planPodPatch(admission.pod, injections);
}

export function mergeDenials(denials: Denial[]): Denial {
  if (denials.length === 1) return denials[0];
  return denial(denials[0].reason, denials.map((d) => d.message).join('; '), denials[0].status);
}

/** Turns resolved injections into patch operations, refusing conflicts with the user's Pod. */
export function planPodPatch(pod: Pod, injections: Injection[]): PodMutation {
  const warnings: string[] = [];
  for (const injection of injections) if (injection.warnings) warnings.push(...injection.warnings);
  const ops: PatchOperation[] = [];
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

  const containerOps: PatchOperation[] = [];
  planContainers(containerOps, conflicts, '/spec/initContainers', spec.initContainers, injections);
  planContainers(containerOps, conflicts, '/spec/containers', spec.containers, injections);

  if (conflicts.length > 0) {
    return { allowed: false, denial: denial('Conflict', conflicts.join('; '), 409) };
  }

  if (Object.keys(annotations).length > 0) {
    if (pod.metadata === undefined) ops.push({ op: 'add', path: '/metadata', value: { annotations } });
    else setMembers(ops, '/metadata/annotations', pod.metadata.annotations, annotations);
  }
  appendAll(ops, '/spec/volumes', spec.volumes, newVolumes);
  for (const op of containerOps) ops.push(op);
  return { allowed: true, patch: ops, injections, warnings };
}

function planContainers(
  ops: PatchOperation[],
  conflicts: string[],
  base: string,
  containers: Container[] | undefined,
  injections: Injection[],
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
