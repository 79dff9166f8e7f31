import { describeOversize } from '../annotation-bounds.ts';
import { denial, isDenial, WebhookError } from '../errors.ts';
import type { Pod, ServiceAccountView } from '../kube/types.ts';
import { isObject, serviceAccountNameOf } from '../model.ts';
import { plan, resolve, type PodAdmission } from '../mutate/pod.ts';
import type { RecordKeys } from '../mutate/injection-record.ts';
import type { InjectionPolicy, TenantJudges } from '../policy/gate.ts';
import type { PodProvider } from '../clouds/types.ts';
import { allowed, denied, patched, type AdmissionRequest, type Decision } from './review.ts';
import { podReadsProblem } from './pod-reads.ts';
import { DNS_LABEL, DNS_SUBDOMAIN, METADATA_SHAPE, shapeError, type Shape } from './shape.ts';

/** The ServiceAccount cache's lookup: a hit answers at once, a miss later; awaited either way. */
export type ServiceAccountLookup = (
  namespace: string,
  name: string,
) => ServiceAccountView | undefined | Promise<ServiceAccountView | undefined>;

const CONTAINER_SHAPE: Shape = {
  fields: {
    name: DNS_LABEL,
    image: 'string',
    command: { list: 'string' },
    env: { list: { fields: { name: 'string', value: 'string' }, required: ['name'] } },
    volumeMounts: { list: { fields: { name: DNS_LABEL, mountPath: 'string' }, required: ['name', 'mountPath'] } },
  },
  required: ['name'],
};

const VOLUME_SHAPE: Shape = {
  fields: {
    name: DNS_LABEL,
    projected: {
      fields: {
        sources: {
          list: {
            fields: {
              serviceAccountToken: {
                fields: { audience: 'string', expirationSeconds: 'integer', path: 'string' },
                required: ['path'],
              },
              downwardAPI: {
                fields: {
                  items: {
                    list: {
                      fields: { path: 'string', fieldRef: { fields: { fieldPath: 'string' } } },
                      required: ['path'],
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
  required: ['name'],
};

/** The slice of a Pod the mutation core and the providers read, with the types they rely on. */
const POD_SHAPE: Shape = {
  fields: {
    metadata: METADATA_SHAPE,
    spec: {
      fields: {
        serviceAccountName: DNS_SUBDOMAIN,
        serviceAccount: DNS_SUBDOMAIN,
        hostNetwork: 'boolean',
        nodeSelector: { map: 'string' },
        os: { fields: { name: 'string' } },
        containers: { list: CONTAINER_SHAPE },
        initContainers: { list: CONTAINER_SHAPE },
        ephemeralContainers: { list: { fields: { name: DNS_LABEL } } },
        volumes: { list: VOLUME_SHAPE },
      },
    },
  },
  // The API server refuses a Pod without containers: one without a spec never reaches a webhook.
  required: ['spec'],
};

/** Checks the shape the mutation core relies on; the API server sends typed objects, others may not. */
export function podShapeError(pod: unknown): string | undefined {
  if (!isObject(pod)) return 'request.object is not a Pod';
  return shapeError(pod, POD_SHAPE, '');
}

function containerCount(pod: Pod): number {
  const spec = pod.spec as
    | { containers?: unknown[]; initContainers?: unknown[]; ephemeralContainers?: unknown[] }
    | undefined;
  return (
    (spec?.containers?.length ?? 0) + (spec?.initContainers?.length ?? 0) + (spec?.ephemeralContainers?.length ?? 0)
  );
}

/**
 * A Pod's steps, pure, as cert-manager's admission chain runs its own: resolve (each cloud's
 * provider: what the ServiceAccount asks for), judge (tenant policy, which may resolve again with
 * its defaults), plan (the patch). `serve` runs them after its reads, `preview` on files.
 */
export function decidePod(
  providers: readonly PodProvider[],
  admission: PodAdmission,
  judge: InjectionPolicy | undefined,
): Decision {
  const sa = admission.serviceAccount;
  // The cache kept a marker: an annotation the providers read is over its bound.
  if (sa?.oversize)
    return denied(denial('TooLarge', describeOversize(`ServiceAccount ${sa.namespace}/${sa.name}`, sa.oversize)));
  const resolved = resolve(providers, admission);
  if (isDenial(resolved)) return denied(resolved);
  const judged = judge ? judge(admission, resolved) : resolved;
  if (isDenial(judged)) return denied(judged);
  const planned = plan(admission, judged);
  if (!planned.allowed) return denied(planned.denial);
  const providersInjected = planned.injections.map((i) => i.provider);
  return patched(planned.patch, {
    warnings: planned.warnings,
    auditAnnotations: providersInjected.length ? { 'injected-providers': providersInjected.join(',') } : undefined,
    injected: providersInjected,
    shadowed: planned.shadowed,
    injections: planned.injections,
  });
}

/**
 * What to do with a Pod whose ServiceAccount cannot be read (not cached, direct read failed):
 * the webhook configuration's failurePolicy. Fail refuses it, retryably, so no Pod starts without
 * the identity its ServiceAccount may carry; Ignore admits it unchanged with a warning.
 */
type UnresolvedPolicy = 'Fail' | 'Ignore';

function unresolved(err: unknown, policy: UnresolvedPolicy): Decision {
  if (!(err instanceof WebhookError) || err.code !== 'WIW_SERVICEACCOUNT_UNAVAILABLE') throw err;
  if (policy === 'Ignore')
    return allowed({
      warnings: [`workload-identity-webhook: ${err.message}; the Pod was admitted without a cloud identity`],
    });
  return denied(
    denial(
      'ServiceAccountUnavailable',
      `${err.message}; the Pod is refused so that it does not start without its cloud identity: retry shortly`,
    ),
  );
}

/** Pods on CREATE: look the ServiceAccount up (cache first) and run the pure core. */
export async function admitPod(
  providers: readonly PodProvider[],
  lookup: ServiceAccountLookup,
  request: AdmissionRequest,
  tenantPolicy?: TenantJudges,
  {
    onUnresolved = 'Fail',
    recordKeys,
    maxContainers,
  }: { onUnresolved?: UnresolvedPolicy; recordKeys?: RecordKeys; maxContainers?: number } = {},
): Promise<Decision> {
  if (request.operation !== 'CREATE' || request.subResource) return allowed();
  const pod = request.object as Pod;
  const shape = podShapeError(pod);
  if (shape) return denied(denial('MalformedObject', `the Pod cannot be read: ${shape}`));
  const over = podReadsProblem(pod, providers);
  if (over) return denied(denial('TooLarge', `the Pod cannot be read: ${over}`));
  // Checked before any work: the cost of a Pod grows with its containers.
  const containers = containerCount(pod);
  if (maxContainers !== undefined && containers > maxContainers) {
    return denied(
      denial(
        'TooLarge',
        `the Pod has ${containers} containers, more than the ${maxContainers} workload-identity-webhook admits (--max-containers); split it into several Pods`,
      ),
    );
  }
  const namespace = request.namespace || pod.metadata?.namespace || 'default';
  let sa: ServiceAccountView | undefined;
  let policy: InjectionPolicy | undefined;
  try {
    const found = lookup(namespace, serviceAccountNameOf(pod));
    // Tenant policy needs the namespace's labels: cached, or read when the cache has not seen it yet.
    [sa, policy] = tenantPolicy ? await Promise.all([found, tenantPolicy.pod(namespace)]) : [await found, undefined];
  } catch (err) {
    return unresolved(err, onUnresolved);
  }
  return decidePod(providers, { pod, namespace, serviceAccount: sa, recordKeys }, policy);
}
