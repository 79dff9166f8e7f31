import fastJsonPatch from 'fast-json-patch';
import { loadConfig, type Config } from '../../src/config.ts';
import type { Pod, ServiceAccountView } from '../../src/kube/types.ts';
import type { PatchOperation } from '../../src/mutate/patch.ts';
import { createProviders } from '../../src/clouds/index.ts';

export function config(flags: Record<string, string> = {}): Config {
  return loadConfig(new Map(Object.entries(flags)), {});
}

export function providers(flags: Record<string, string> = {}) {
  return createProviders(config(flags));
}

export function sa(annotations: Record<string, string>, name = 'app', namespace = 'team-a'): ServiceAccountView {
  return { namespace, name, uid: 'uid-1', annotations };
}

export function pod(
  overrides: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    spec?: Record<string, unknown>;
  } = {},
): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'p',
      namespace: 'team-a',
      ...(overrides.labels ? { labels: overrides.labels } : {}),
      ...(overrides.annotations ? { annotations: overrides.annotations } : {}),
    },
    spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }], ...overrides.spec },
  };
}

/** Applies a patch the way the API server does: to a copy, validating every operation. */
export function apply(target: Pod, patch: PatchOperation[]): Pod {
  return fastJsonPatch.applyPatch(structuredClone(target), patch as fastJsonPatch.Operation[], true, false).newDocument;
}

export function envOf(
  container: { env?: { name: string; value?: string }[] } | undefined,
): Record<string, string | undefined> {
  return Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value]));
}
