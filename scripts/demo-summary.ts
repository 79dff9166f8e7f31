// What the demo prints for each Pod: everything the webhook added, found by comparing the Pod as
// written with the Pod as admitted (volumes, init containers, containers, mounts, env), so a new
// kind of injection shows up without a change here. test/unit/demo-summary.test.ts holds it to that.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';

export function describeInjection(written: V1Pod, admitted: V1Pod): string[] {
  const lines: string[] = [];
  const before = new Set((written.spec?.volumes ?? []).map((v) => v.name));
  for (const v of admitted.spec?.volumes ?? []) if (!before.has(v.name)) lines.push(`volume ${describeVolume(v)}`);
  for (const kind of ['initContainers', 'containers'] as const) {
    const label = kind === 'initContainers' ? 'init container' : 'container';
    const original = new Map((written.spec?.[kind] ?? []).map((c) => [c.name, c]));
    for (const c of admitted.spec?.[kind] ?? []) {
      const was = original.get(c.name);
      const changes = describeContainer(was, c);
      if (!was) lines.push(`${label} ${c.name} added (image ${c.image})`);
      else if (changes.length > 0) lines.push(`${label} ${c.name}`);
      lines.push(...changes.map((l) => `  ${l}`));
    }
  }
  const creds = admitted.metadata?.annotations?.['cloud.google.com/external-credentials-json'];
  if (creds && creds !== written.metadata?.annotations?.['cloud.google.com/external-credentials-json'])
    lines.push(`file federation.json (external_account): ${creds.length} bytes, projected from a Pod annotation`);
  return lines.length > 0 ? lines : ['nothing injected'];
}

function describeVolume(v: V1Volume): string {
  const token = v.projected?.sources?.find((s) => s.serviceAccountToken)?.serviceAccountToken;
  if (token) return `${v.name}: token for audience ${token.audience}, ${token.expirationSeconds}s, file ${token.path}`;
  if (v.projected) return `${v.name}: projected`;
  return `${v.name}: ${Object.keys(v).find((k) => k !== 'name') ?? 'volume'}`;
}

/** Mounts and env the admitted container has beyond what it was written with (all of them when added). */
function describeContainer(was: V1Container | undefined, c: V1Container): string[] {
  const lines: string[] = [];
  const mounts = new Set((was?.volumeMounts ?? []).map((m) => `${m.name} ${m.mountPath}`));
  for (const m of c.volumeMounts ?? [])
    if (!mounts.has(`${m.name} ${m.mountPath}`))
      lines.push(`mount ${m.name} at ${m.mountPath}${m.subPath ? ` (${m.subPath})` : ''}`);
  const env = new Map((was?.env ?? []).map((e) => [e.name, e]));
  for (const e of c.env ?? []) {
    const value = e.value ?? (e.valueFrom ? JSON.stringify(e.valueFrom) : '');
    if (!env.has(e.name)) lines.push(`env ${e.name}=${value}`);
  }
  // The Pod's own variables, which the webhook never overwrites, where it injected beside them.
  if (lines.length > 0)
    for (const e of was?.env ?? []) lines.push(`env ${e.name}=${e.value ?? ''}   (the Pod's own value, kept)`);
  return lines;
}

/** A word as the shell reads it back: as is when plain, else single-quoted. */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The line that makes `kubectl` work in the user's shell: the kubectl scripts/provide-binaries.sh
 * built with kube-apiserver (dev.sh exports it as TEST_ASSET_KUBECTL), else one on PATH, else how
 * to get one.
 */
export function kubectlHint(env: NodeJS.ProcessEnv = process.env): string {
  const built = env.TEST_ASSET_KUBECTL;
  if (built && executable(built))
    return `  alias kubectl=${shellQuote(built)}   # built with kube-apiserver, at its version`;
  if ((env.PATH ?? '').split(delimiter).some((dir) => dir && executable(join(dir, 'kubectl'))))
    return '  # kubectl: the one on your PATH';
  return '  alias kubectl="$(bash scripts/dev.sh ensure-binaries | sed -n \'s/^KUBECTL=//p\')"   # builds it once, cached';
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
