import fastJsonPatch from 'fast-json-patch';
import { stringify } from 'yaml';
import { parseManifests, type ManifestInput } from '../manifests.ts';
import { WebhookError, type Denial } from '../errors.ts';
import type { Pod, ServiceAccountView } from '../kube/types.ts';
import { RecordKeys } from '../mutate/injection-record.ts';
import { serviceAccountNameOf } from '../model.ts';
import type { PatchOperation } from '../mutate/patch.ts';
import { decidePod, podShapeError } from '../admission/pods.ts';
import type { PodProvider } from '../clouds/types.ts';
import { previewPodPolicy, type PreviewPolicy } from '../policy/preview.ts';

// A fixed key: preview's output is the same on every run. It proves nothing to a real webhook,
// whose key is its own, so a previewed Pod's record is never trusted by one.
const PREVIEW_KEYS = RecordKeys.derive('workload-identity-webhook preview');

export type OutputFormat = 'yaml' | 'json' | 'patch';

/** The files `preview` reads. */
export type PreviewInput = ManifestInput;

export type PreviewResult =
  | { allowed: true; output: string; patch: PatchOperation[]; warnings: string[] }
  | { allowed: false; denial: Denial; warnings: string[] };

/**
 * The webhook's decision for one Pod, offline: the given ServiceAccounts stand in for the
 * cluster's. Same providers, same core as `serve`.
 */
export function previewPod(
  providers: readonly PodProvider[],
  input: PreviewInput,
  format: OutputFormat,
  policy?: PreviewPolicy,
): PreviewResult {
  const manifests = parseManifests(input);
  const pods = manifests.filter((m) => m.kind === 'Pod');
  if (pods.length !== 1) {
    throw new WebhookError('WIW_BAD_INPUT', `preview needs exactly one Pod among the documents; found ${pods.length}`);
  }
  const pod = pods[0] as Pod;
  const shape = podShapeError(pod);
  if (shape) throw new WebhookError('WIW_BAD_INPUT', `the Pod cannot be read: ${shape}`);
  const namespace = pod.metadata?.namespace || 'default';
  const accounts = new Map<string, ServiceAccountView>();
  for (const m of manifests) {
    if (m.kind !== 'ServiceAccount' || !m.metadata?.name) continue;
    const ns = m.metadata.namespace || 'default';
    accounts.set(`${ns}/${m.metadata.name}`, {
      namespace: ns,
      name: m.metadata.name,
      uid: '',
      annotations: m.metadata.annotations ?? {},
    });
  }
  const saName = serviceAccountNameOf(pod);
  const sa = accounts.get(`${namespace}/${saName}`);
  const warnings: string[] = [];
  if (!sa)
    warnings.push(`ServiceAccount ${namespace}/${saName} is not among the documents: previewed as if it did not exist`);
  // The same steps as serve (admission/pods.ts), with the documents standing in for the cluster.
  const decision = decidePod(
    providers,
    { pod, namespace, serviceAccount: sa, recordKeys: PREVIEW_KEYS },
    previewPodPolicy(policy, manifests, namespace, warnings),
  );
  if (decision.denial) return { allowed: false, denial: decision.denial, warnings };
  warnings.push(...(decision.warnings ?? []));
  const patch = decision.patch ?? [];
  return { allowed: true, patch, output: renderOutput(pod, patch, format), warnings };
}

/** The object as the API server would store it (yaml or json), or the patch itself. */
export function renderOutput(object: unknown, patch: PatchOperation[], format: OutputFormat): string {
  if (format === 'patch') return JSON.stringify(patch, null, 2) + '\n';
  const mutated = fastJsonPatch.applyPatch(
    structuredClone(object),
    patch as fastJsonPatch.Operation[],
    true,
    false,
  ).newDocument;
  return format === 'json'
    ? JSON.stringify(mutated, null, 2) + '\n'
    : stringify(mutated, { lineWidth: 0, aliasDuplicateObjects: false });
}
