// Pods that slipped past the webhook (aws/amazon-eks-pod-identity-webhook #45,
// Azure/azure-workload-identity #540): not finished, their ServiceAccount carries an identity the
// webhook would inject, and they have none of it: created while the webhook did not answer
// (failurePolicy Ignore), before it was installed, or where it is never called. "Would inject" is
// the admission's own decision (decidePod, the same steps `serve` and `preview` run), so
// include-containers, skip-containers, container-profiles and the opt-out labels count as they
// do at admission. `doctor` lists them and their owners; `serve`'s leader counts them.
import { decidePod, podShapeError, type ServiceAccountLookup } from '../admission/pods.ts';
import type { PodProvider } from '../clouds/types.ts';
import type { ProviderName } from '../clouds/registry.ts';
import { type KubeApi, KubeResponseTooLarge, apiPath } from '../kube/api.ts';
import type { Pod } from '../kube/types.ts';
import { serviceAccountNameOf } from '../model.ts';
import { INJECTED_ANNOTATION } from '../mutate/injection-record.ts';

/**
 * What a slipped Pod lacks: the providers that would inject, and the containers they would reach;
 * or, `refused`, why the webhook would refuse the Pod as it is now (its ServiceAccount names a
 * container profile role-arns lacks, say): restarting its owner would only get its Pods refused.
 */
export interface Missing {
  providers: ProviderName[];
  containers: string[];
  refused?: string;
}

const CONTAINER_OP = /^\/spec\/(containers|initContainers)\/(\d+)\//;

/**
 * What the webhook would inject into this Pod and it does not carry; undefined when it carries
 * some of it (its record, or any of the volumes), or when the webhook would add nothing to any
 * of its containers (every one skipped or left out of include-containers).
 */
export function missingInjection(
  providers: readonly PodProvider[],
  pod: Pod,
  serviceAccount: Parameters<typeof decidePod>[1]['serviceAccount'],
): Missing | undefined {
  if (pod.metadata?.annotations?.[INJECTED_ANNOTATION] !== undefined) return undefined;
  if (podShapeError(pod)) return undefined;
  const namespace = pod.metadata?.namespace ?? 'default';
  const decision = decidePod(providers, { pod, namespace, serviceAccount }, undefined);
  if (!decision.allowed) return { providers: [], containers: [], refused: decision.denial?.message ?? 'refused' };
  const injections = decision.injections ?? [];
  if (injections.length === 0) return undefined;
  const volumes = new Set((pod.spec?.volumes ?? []).map((v) => v.name));
  // Another webhook's (a peer's) injection of the same identity counts as injected.
  if (injections.some((i) => volumes.has(i.volume.name))) return undefined;
  const containers = new Set<string>();
  for (const op of decision.patch ?? []) {
    const m = CONTAINER_OP.exec(op.path);
    if (!m) continue;
    const list = m[1] === 'containers' ? pod.spec?.containers : pod.spec?.initContainers;
    const name = list?.[Number(m[2])]?.name;
    if (name !== undefined) containers.add(name);
  }
  if (containers.size === 0) return undefined;
  return { providers: injections.map((i) => i.provider), containers: [...containers] };
}

interface PodPage {
  items?: Pod[] | null;
  metadata?: { continue?: string };
}

interface ScanOptions {
  api: KubeApi;
  providers: readonly PodProvider[];
  lookup: ServiceAccountLookup;
  /** Only this namespace's Pods. */
  namespace?: string;
  /** Pods per list page (halved, down to 1, for a page longer than maxPageBytes). */
  pageSize?: number;
  maxPageBytes?: number;
  /** Each slipped Pod, as found (the caller keeps what it needs: a count, the first few). */
  onSlipped(pod: Pod, missing: Missing): void | Promise<void>;
}

const SCAN_PAGE_SIZE = 500;
const MAX_PAGE_BYTES = 8 * 1024 * 1024;
/** Finished Pods never run again: only the others are read. */
const NOT_FINISHED = 'status.phase!=Succeeded,status.phase!=Failed';

/**
 * Reads every unfinished Pod page by page (limit and continue), judging each as it arrives and
 * dropping it: memory holds one page, whatever the cluster's size. Returns how many were read.
 */
export async function scanPods(o: ScanOptions): Promise<number> {
  const path = o.namespace ? apiPath('api', 'v1', 'namespaces', o.namespace, 'pods') : '/api/v1/pods';
  let limit = o.pageSize ?? SCAN_PAGE_SIZE;
  let cont: string | undefined;
  let read = 0;
  for (;;) {
    let page: PodPage;
    try {
      page = await o.api.request<PodPage>('GET', path, {
        query: { limit, continue: cont, fieldSelector: NOT_FINISHED },
        maxBytes: limit > 1 ? (o.maxPageBytes ?? MAX_PAGE_BYTES) : undefined,
      });
    } catch (err) {
      if (!(err instanceof KubeResponseTooLarge)) throw err;
      limit = Math.max(1, Math.floor(limit / 2));
      continue;
    }
    for (const pod of page.items ?? []) {
      read++;
      const namespace = pod.metadata?.namespace ?? 'default';
      const sa = await o.lookup(namespace, serviceAccountNameOf(pod));
      const missing = missingInjection(o.providers, pod, sa);
      if (missing) await o.onSlipped(pod, missing);
    }
    cont = page.metadata?.continue || undefined;
    if (!cont) return read;
  }
}
