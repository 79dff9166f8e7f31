// The thing a person restarts for a Pod: its controller, followed up to the workload (a
// ReplicaSet's Deployment, a Job's CronJob), and `kubectl rollout restart` for the three kinds it
// restarts. Every other owner gets what to do instead, since restarting it is not doctor's to do.
import { type KubeApi, apiPath } from '../kube/api.ts';
import type { ObjectMeta, Pod } from '../kube/types.ts';
import { shellQuote } from '../shell.ts';

export interface Owner {
  kind: string;
  namespace: string;
  name: string;
  /** `doctor --fix` restarts it (Deployment, StatefulSet, DaemonSet). */
  restartable: boolean;
  /** What to do instead, for an owner doctor does not restart. */
  instead?: string;
}

/** The kinds `kubectl rollout restart` restarts, by their collection under apps/v1 (a Map: a kind is the cluster's text). */
const RESTARTABLE: ReadonlyMap<string, string> = new Map([
  ['Deployment', 'deployments'],
  ['StatefulSet', 'statefulsets'],
  ['DaemonSet', 'daemonsets'],
]);

/** kubectl rollout restart's annotation on the Pod template: a new value rolls every Pod. */
const RESTARTED_AT_ANNOTATION = 'kubectl.kubernetes.io/restartedAt';

interface OwnerReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  controller?: boolean;
}

function controllerOf(meta: ObjectMeta | undefined): OwnerReference | undefined {
  const refs = (meta?.ownerReferences ?? []) as OwnerReference[];
  return refs.find((r) => r.controller) ?? refs[0];
}

export function ownerKey(o: Pick<Owner, 'kind' | 'namespace' | 'name'>): string {
  return `${o.kind} ${o.namespace}/${o.name}`;
}

/** Resolves owners, each intermediate object (ReplicaSet, Job) read once. */
export class OwnerResolver {
  readonly #api: KubeApi;
  readonly #read = new Map<string, Promise<OwnerReference | undefined>>();

  constructor(api: KubeApi) {
    this.#api = api;
  }

  async ownerOf(pod: Pod): Promise<Owner> {
    const namespace = pod.metadata?.namespace ?? 'default';
    const ref = controllerOf(pod.metadata);
    if (!ref?.kind || !ref.name) return bare(namespace, pod.metadata?.name ?? '');
    const { kind, name } = ref;
    if (RESTARTABLE.has(kind) && ref.apiVersion === 'apps/v1') return { kind, namespace, name, restartable: true };
    if (kind === 'ReplicaSet' && ref.apiVersion === 'apps/v1') {
      const up = await this.#controllerOf(namespace, 'apps', 'replicasets', name);
      if (up?.kind === 'Deployment' && up.name && up.apiVersion === 'apps/v1')
        return { kind: 'Deployment', namespace, name: up.name, restartable: true };
      return other(
        kind,
        namespace,
        name,
        'a ReplicaSet without a Deployment: delete its Pods, and it creates them again through the webhook',
      );
    }
    if (kind === 'Job' && ref.apiVersion === 'batch/v1') {
      const up = await this.#controllerOf(namespace, 'batch', 'jobs', name);
      if (up?.kind === 'CronJob' && up.name)
        return other(
          'CronJob',
          namespace,
          up.name,
          `its next run gets the identity; to run it now: kubectl create job -n ${shellQuote(namespace)} --from=${shellQuote(`cronjob/${up.name}`)} ${shellQuote(`${up.name}-identity`.slice(0, 63))}`,
        );
      return other(
        kind,
        namespace,
        name,
        "a Job's Pods are not restarted: once it has finished, delete and create the Job again, and its new Pods get the identity",
      );
    }
    return other(
      kind,
      namespace,
      name,
      `restart it as its controller allows: deleting the Pod makes most controllers create it again through the webhook`,
    );
  }

  #controllerOf(namespace: string, group: string, resource: string, name: string) {
    const key = `${resource}/${namespace}/${name}`;
    let found = this.#read.get(key);
    if (!found) {
      found = this.#api
        .request<{ metadata?: ObjectMeta }>(
          'GET',
          apiPath('apis', group, 'v1', 'namespaces', namespace, resource, name),
        )
        .then(
          (o) => controllerOf(o.metadata),
          // Gone or unreadable: the Pod's own owner is what is told.
          () => undefined,
        );
      this.#read.set(key, found);
    }
    return found;
  }
}

function bare(namespace: string, name: string): Owner {
  return other(
    'Pod',
    namespace,
    name,
    'a bare Pod: nothing creates it again; delete it and create it again from its manifest, so that it passes the webhook',
  );
}

function other(kind: string, namespace: string, name: string, instead: string): Owner {
  return { kind, namespace, name, restartable: false, instead };
}

/**
 * `kubectl rollout restart`: the Pod template's restartedAt annotation set to now, so its
 * controller replaces every Pod, in its own rollout's order and pace.
 */
export async function restartOwner(api: KubeApi, owner: Owner, now: Date): Promise<void> {
  const resource = RESTARTABLE.get(owner.kind);
  if (!owner.restartable || !resource) throw new Error(`${ownerKey(owner)} is not restarted by doctor`);
  await api.request('PATCH', apiPath('apis', 'apps', 'v1', 'namespaces', owner.namespace, resource, owner.name), {
    contentType: 'application/strategic-merge-patch+json',
    body: {
      spec: {
        template: {
          metadata: { annotations: { [RESTARTED_AT_ANNOTATION]: now.toISOString().replace(/\.\d+Z$/, 'Z') } },
        },
      },
    },
  });
}
