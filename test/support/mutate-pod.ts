// The core run on one Pod and its ServiceAccount's annotations, with the flags given: the
// helpers of the mutate-pod-*.test.ts files.
import assert from 'node:assert/strict';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { apply, providers, sa } from './builders.ts';
import { GCP_EMAIL, WIF_PROVIDER } from './identities.ts';

export function run(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  return mutatePod(providers(flags), {
    pod: p,
    namespace: 'team-a',
    serviceAccount: annotations ? sa(annotations) : undefined,
  });
}

/** The Pod with the patch applied; fails when the Pod is refused, with the refusal. */
export function mutated(
  p: Pod,
  annotations: Record<string, string> | undefined,
  flags: Record<string, string> = {},
): Pod {
  const result = run(p, annotations, flags);
  assert.equal(result.allowed, true, result.allowed ? '' : result.denial.message);
  return apply(p, result.allowed ? result.patch : []);
}

/** The refusal; fails when the Pod is admitted. */
export function denied(p: Pod, annotations: Record<string, string> | undefined, flags: Record<string, string> = {}) {
  const result = run(p, annotations, flags);
  assert.equal(result.allowed, false, 'expected a denial');
  return result.allowed ? assert.fail() : result.denial;
}

/** A ServiceAccount in the pfnet dialect, impersonating a Google service account. */
export const PFNET_SA = {
  'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
  'cloud.google.com/service-account-email': GCP_EMAIL,
};
