// The pure mutation core's steps: a Pod and its ServiceAccount in, additive JSON Patch out. No
// I/O and no clock. Admission (admission/pods.ts) runs them: resolve, then tenant policy's
// judgement (policy/), then plan; preview and the tests run them too. The plan itself is in
// pod-plan.ts, the containers' part in pod-containers.ts, the undoing of an earlier record in
// pod-undo.ts.
import { type Denial, isDenial, mergeDenials } from '../errors.ts';
import type { Pod, ServiceAccountView } from '../kube/types.ts';
import { isWindowsPod, serviceAccountNameOf } from '../model.ts';
import type { Injection, PodProvider } from '../clouds/types.ts';
import { RecordKeys } from './injection-record.ts';
import { planPodPatch, type PodMutation } from './pod-plan.ts';

/** Opts a Pod out of every provider (each provider's own opt-out labels work too). */
const SKIP_POD_LABEL = 'workload-identity-webhook.io/skip';

const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/**
 * Signs records when the caller brings no key: right for one process (tests, one replica). The
 * one random draw of the core, made once when this module loads: a record signed with it differs
 * from process to process, and the same Pod still gets the same patch within one. Serving
 * replicas bring a key derived from shared material instead (see injection-record.ts).
 */
const PROCESS_KEYS = RecordKeys.random();

export interface PodAdmission {
  pod: Pod;
  /** The request's namespace: a Pod being created may not carry one itself. */
  namespace: string;
  serviceAccount: ServiceAccountView | undefined;
  /** Signs and checks the injection record; replicas must share it (see injection-record.ts). */
  recordKeys?: RecordKeys;
}

/**
 * Step one: what each provider would inject, without looking at the Pod's containers; every
 * provider's refusal, merged.
 */
export function resolve(
  providers: readonly PodProvider[],
  { pod, namespace, serviceAccount }: PodAdmission,
): Injection[] | Denial {
  const injections: Injection[] = [];
  const denials: Denial[] = [];
  if (pod.metadata?.labels?.[SKIP_POD_LABEL] !== undefined) return injections;
  // A static Pod's mirror: the API server refuses mirror Pods that reference a ServiceAccount
  // token or any other API object, and the kubelet runs the manifest, not this object, anyway.
  if (pod.metadata?.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) return injections;
  const ctx = { pod, namespace, serviceAccount, windows: isWindowsPod(pod) };
  for (const provider of providers) {
    const result = provider.resolvePod(ctx);
    if (result === undefined) continue;
    if (isDenial(result)) denials.push(result);
    else injections.push(result);
  }
  return denials.length > 0 ? mergeDenials(denials) : injections;
}

/** The last step: the patch that adds the (judged) injections, refusing conflicts with the user's Pod. */
export function plan(admission: PodAdmission, injections: Injection[]): PodMutation {
  return planPodPatch(admission.pod, injections, {
    serviceAccountName: serviceAccountNameOf(admission.pod),
    namespace: admission.namespace,
    keys: admission.recordKeys ?? PROCESS_KEYS,
  });
}

/** Resolve then plan, with no tenant policy: for tools and tests. */
export function mutatePod(providers: readonly PodProvider[], admission: PodAdmission): PodMutation {
  const injections = resolve(providers, admission);
  return isDenial(injections) ? { allowed: false, denial: injections } : plan(admission, injections);
}
