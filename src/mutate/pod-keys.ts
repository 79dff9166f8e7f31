// Comparison keys: when is a volume or a container already there the webhook's own (from an
// earlier admission, or from the peer webhook running side by side), whatever the API server
// defaulted? The plan asks before it adds; the injection record stores their digests, and
// undoing a record removes only what still matches.
import type { Container, Volume, VolumeMount } from '../kube/types.ts';
import type { Injection } from '../clouds/types.ts';

/**
 * The setup container is already there, from an earlier admission or from the peer webhook
 * running side by side (with the API server's defaults and Go's empty fields added): same image,
 * command and environment.
 */
export function sameSetup(existing: Container, ours: Container): boolean {
  return setupKey(existing) === setupKey(ours);
}

/**
 * What a setup container runs (image, command, env), whatever the API server defaulted. An empty
 * value is the same as none: the API server (and a reinvocation's review) omits empty strings.
 */
export function setupKey(c: Container): string {
  return JSON.stringify([c.image, c.command ?? null, (c.env ?? []).map((e) => [e.name, e.value ?? ''])]);
}

/** A volume's identity for the record: its projection, or the volume as written (emptyDir). */
export function volumeKey(v: Volume): string {
  return projectionKey(v) ?? JSON.stringify({ ...v, name: undefined });
}

/** Every volume an injection adds: its token volume first. */
export function volumesOf(injection: Injection): Volume[] {
  return [injection.volume, ...(injection.extraVolumes ?? []).map((e) => e.volume)];
}

/** Every mount an injection gives a container: the token volume at each of its paths, then the extra volumes'. */
export function mountsOf(injection: Injection): VolumeMount[] {
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
export function sameProjection(a: Volume, b: Volume): boolean {
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

/** The token volume as a conflict message names it. */
export function describeVolume(volume: Volume): string {
  const token = volume.projected?.sources?.find((s) => s.serviceAccountToken)?.serviceAccountToken;
  return token ? `audience ${token.audience}, expirationSeconds ${token.expirationSeconds}` : 'projected token';
}
