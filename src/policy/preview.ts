// Tenant policy for `preview --policy FILE`: the same compilation, the same failure mode and the
// same judgement as `serve`, with Namespaces among the input documents standing in for the
// cluster's.
import type { Config } from '../config.ts';
import type { InjectionPolicy } from './gate.ts';
import { judgePodInjections, isEmptyPolicySet, type PolicySet } from './evaluate.ts';
import type { NamespaceView } from '../kube/types.ts';
import { loadPolicyFile } from './load.ts';
import type { CompileResult } from './model.ts';
import { providerOptionsFromConfig, type ProviderOptions } from '../clouds/index.ts';
import { PolicyStore, summary } from './store.ts';

export interface PreviewPolicy {
  set: PolicySet;
  options: ProviderOptions;
  results: CompileResult[];
  /** One line per policy that is not used, for stderr. */
  warnings: string[];
}

export function loadPreviewPolicy(files: readonly string[], config: Config): PreviewPolicy {
  const store = new PolicyStore(config.policyFailureMode);
  const results = files.flatMap((f) => loadPolicyFile(f));
  const warnings: string[] = [];
  for (const r of results) {
    const enforcement = store.put(r);
    if (r.ok) continue;
    const effect =
      enforcement.state === 'denying'
        ? 'cloud identities are refused (--policy-failure-mode=deny)'
        : 'it is not enforced';
    warnings.push(`WorkloadIdentityPolicy "${r.name}" (${r.source}) is not used: ${summary(r)}; ${effect}`);
  }
  return { set: store.current(), options: providerOptionsFromConfig(config), results, warnings };
}

type NamespaceManifest = { kind?: string; metadata?: { name?: string; labels?: Record<string, string> } };

/** The hook for the previewed Pod, or undefined without policy. */
export function previewPodPolicy(
  policy: PreviewPolicy | undefined,
  manifests: readonly NamespaceManifest[],
  namespace: string,
  warnings: string[],
): InjectionPolicy | undefined {
  if (!policy || isEmptyPolicySet(policy.set)) return undefined;
  const doc = manifests.find((m) => m.kind === 'Namespace' && m.metadata?.name === namespace);
  if (!doc) warnings.push(`Namespace ${namespace} is not among the documents: tenant policy sees it without labels`);
  const view: NamespaceView = { name: namespace, labels: { ...doc?.metadata?.labels } };
  return (admission, injections) =>
    judgePodInjections({ set: policy.set, options: policy.options, namespace: view }, admission, injections);
}

/** `check-policy`: one line per policy; true when every policy is good. */
export function policyReport(results: readonly CompileResult[]): { ok: boolean; lines: string[] } {
  const lines: string[] = [];
  for (const r of results) {
    if (r.ok) {
      lines.push(
        `ok    ${r.name} (${r.source}): ${r.policy.validations.length} validations, ${r.policy.defaults.length} defaults, ${r.policy.identityProviders.length} identity providers; ${r.examples} examples passed`,
      );
    } else {
      lines.push(`FAIL  ${r.name} (${r.source}): not used`);
      for (const p of r.problems) lines.push(`      ${p.reason} ${p.path}: ${p.message}`);
    }
  }
  return { ok: results.every((r) => r.ok), lines };
}
