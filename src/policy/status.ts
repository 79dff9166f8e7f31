import type { CompileResult, PolicyProblem } from './model.ts';
import { summary } from './store.ts';

/**
 * The status subresource of a WorkloadIdentityPolicy, in the shape Kubernetes tools read:
 * `observedGeneration`, a `Ready` condition, and every problem with the path of its field.
 */
export interface PolicyStatus {
  observedGeneration: number;
  conditions: PolicyCondition[];
  problems: PolicyProblem[];
  examples: { total: number; failed: number };
}

interface PolicyCondition {
  type: 'Ready';
  status: 'True' | 'False';
  reason: 'Valid' | PolicyProblem['reason'];
  message: string;
  observedGeneration: number;
  lastTransitionTime: string;
}

/** At most this many problems are listed; etcd objects stay small and the first ones matter. */
const MAX_PROBLEMS = 20;

export function policyStatus(
  result: CompileResult,
  previous: Partial<PolicyStatus> | undefined,
  now: Date,
): PolicyStatus {
  let condition: Omit<PolicyCondition, 'lastTransitionTime'>;
  let problems: PolicyProblem[] = [];
  let failed = 0;
  if (result.ok) {
    const p = result.policy;
    condition = {
      type: 'Ready',
      status: 'True',
      reason: 'Valid',
      message: `in force: ${p.validations.length} validation${p.validations.length === 1 ? '' : 's'}, ${p.defaults.length} default${p.defaults.length === 1 ? '' : 's'}, ${p.identityProviders.length} identity provider${p.identityProviders.length === 1 ? '' : 's'}; ${p.examples} example${p.examples === 1 ? '' : 's'} passed`,
      observedGeneration: result.generation,
    };
  } else {
    problems = result.problems.slice(0, MAX_PROBLEMS);
    failed = result.problems.filter((x) => x.reason === 'ExampleFailed').length;
    // What admissions do meanwhile is each webhook's --policy-failure-mode; replicas that differ
    // (say, during a rollout) must still write the same status, or they would overwrite each other.
    const effect = "not used until fixed (meanwhile admissions follow the webhook's --policy-failure-mode)";
    condition = {
      type: 'Ready',
      status: 'False',
      // The worst kind decides: a spec that cannot be read, then an expression, then an example.
      // Every problem is of one of the three kinds.
      reason:
        (['InvalidSpec', 'CompileError', 'ExampleFailed'] as const).find((r) =>
          result.problems.some((x) => x.reason === r),
        ) ?? 'InvalidSpec',
      message: `${summary(result)}; ${effect}`,
      observedGeneration: result.generation,
    };
  }
  const before = previous?.conditions?.find((c) => c.type === 'Ready');
  const lastTransitionTime =
    before && before.status === condition.status
      ? before.lastTransitionTime
      : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    observedGeneration: result.generation,
    conditions: [{ ...condition, lastTransitionTime }],
    problems,
    examples: { total: result.examples, failed },
  };
}

/** Whether writing `next` would change anything (status writes bump resourceVersion and wake every watcher). */
export function statusChanged(previous: unknown, next: PolicyStatus): boolean {
  return JSON.stringify(canonical(previous ?? {})) !== JSON.stringify(canonical(next));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  return v;
}
