import { denial } from '../errors.ts';
import type { Pod, ServiceAccountView } from '../kube/types.ts';
import { mutatePod, serviceAccountNameOf, type InjectionPolicy } from '../mutate/pod.ts';
import { podPolicyFor, type PolicyGate } from '../policy/gate.ts';
import type { PodProvider } from '../providers/types.ts';
import type { AdmissionRequest, Decision } from './review.ts';

export type ServiceAccountLookup = (
  namespace: string,
  name: string,
) => ServiceAccountView | undefined | Promise<ServiceAccountView | undefined>;

/** Checks the shape the mutation core relies on; the API server sends typed objects, others may not. */
export function podShapeError(pod: unknown): string | undefined {
  if (typeof pod !== 'object' || pod === null) return 'request.object is not a Pod';
  const spec = (pod as Pod).spec;
  if (spec === undefined) return undefined;
  if (typeof spec !== 'object' || spec === null) return 'spec is not an object';
  for (const field of ['containers', 'initContainers', 'volumes'] as const) {
    const list = spec[field];
    if (list === undefined) continue;
    if (!Array.isArray(list)) return `spec.${field} is not a list`;
    for (let i = 0; i < list.length; i++) {
      const item = list[i] as unknown as Record<string, unknown>;
      if (typeof item !== 'object' || item === null || typeof item.name !== 'string') return `spec.${field}[${i}] has no name`;
      if (field !== 'volumes') {
        if (item.env !== undefined && !Array.isArray(item.env)) return `spec.${field}[${i}].env is not a list`;
        if (item.volumeMounts !== undefined && !Array.isArray(item.volumeMounts)) return `spec.${field}[${i}].volumeMounts is not a list`;
      }
    }
  }
  return undefined;
}

function decide(providers: readonly PodProvider[], pod: Pod, namespace: string, sa: ServiceAccountView | undefined, policy?: InjectionPolicy): Decision {
  const result = mutatePod(providers, { pod, namespace, serviceAccount: sa }, policy);
  if (!result.allowed) return { allowed: false, denial: result.denial };
  const providersInjected = result.injections.map((i) => i.provider);
  return {
    allowed: true,
    patch: result.patch,
    warnings: result.warnings,
    auditAnnotations: providersInjected.length ? { 'injected-providers': providersInjected.join(',') } : undefined,
    injected: providersInjected,
  };
}

/** Pods on CREATE: look the ServiceAccount up (cache first) and run the pure core. */
export function admitPod(
  providers: readonly PodProvider[],
  lookup: ServiceAccountLookup,
  request: AdmissionRequest,
  policyGate?: PolicyGate,
): Decision | Promise<Decision> {
  if (request.operation !== 'CREATE' || request.subResource) return { allowed: true };
  const pod = request.object as Pod;
  const shape = podShapeError(pod);
  if (shape) return { allowed: false, denial: denial('MalformedObject', `the Pod cannot be read: ${shape}`) };
  const namespace = request.namespace || pod.metadata?.namespace || 'default';
  const sa = lookup(namespace, serviceAccountNameOf(pod));
  // Tenant policy needs the namespace's labels: cached, or read when the cache has not seen it yet.
  const policy = podPolicyFor(policyGate, namespace);
  if (sa instanceof Promise || policy instanceof Promise) {
    return Promise.all([sa, policy]).then(([view, hook]) => decide(providers, pod, namespace, view, hook));
  }
  return decide(providers, pod, namespace, sa, policy);
}
