// The cluster-wide ServiceAccount cache: name, namespace, uid and only the annotations the
// providers read, so a cluster of 50,000 ServiceAccounts stays small in memory. An ObjectCache
// with this slimming; a miss is read directly.

import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { WebhookError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { ListPage, ListWatch } from './list-watch.ts';
import { Watched } from './lifecycle.ts';
import { ObjectCache, type CacheIndex } from './object-cache.ts';
import type { ServiceAccountView } from './types.ts';

export interface ServiceAccountCacheOptions {
  kubeConfig: KubeConfig;
  /** Annotation prefixes worth keeping; everything else is dropped on arrival. */
  annotationPrefixes: readonly string[];
  log: Logger;
  metrics?: Metrics;
  /** Timeout of a direct read on a cache miss. */
  missTimeoutMs?: number;
  /** Direct reads per second at most (token bucket, burst of the same size). */
  missReadsPerSecond?: number;
  /** A watch silent this long (no event, no bookmark) is restarted. */
  watchIdleTimeoutMs?: number;
  pageSize?: number;
}

/**
 * A ServiceAccount that is neither cached nor readable right now (the direct read timed out,
 * failed or was rate-limited): whether it exists, and what it says, is unknown.
 */
export class ServiceAccountUnavailable extends WebhookError {
  constructor(namespace: string, name: string, why: string) {
    super(
      'WIW_SERVICEACCOUNT_UNAVAILABLE',
      `ServiceAccount ${namespace}/${name} is not cached yet and could not be read (${why})`,
    );
    this.name = 'ServiceAccountUnavailable';
  }
}

type Raw = {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string> | null;
  };
};

/** What the cache keeps of one ServiceAccount; undefined for an object without name or namespace. */
export function slimServiceAccount(sa: Raw, prefixes: readonly string[]): ServiceAccountView | undefined {
  const m = sa.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const annotations: Record<string, string> = {};
  if (m.annotations) {
    for (const key in m.annotations) {
      for (const prefix of prefixes) {
        if (key.startsWith(prefix)) {
          annotations[key] = m.annotations[key];
          break;
        }
      }
    }
  }
  return Object.freeze({
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    annotations: Object.freeze(annotations),
  });
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

/**
 * The namespaces that hold at least one cached ServiceAccount: every namespace the cluster has
 * (the controller manager gives each its `default`), and nothing a caller made up. Metric labels
 * take their values from here; `gone` is told when a namespace loses its last ServiceAccount.
 */
class KnownNamespaces implements CacheIndex<ServiceAccountView> {
  readonly #counts = new Map<string, number>();
  #before: Set<string> | undefined;
  gone: (namespace: string) => void = () => {};

  has(namespace: string): boolean {
    return this.#counts.has(namespace);
  }

  added(view: ServiceAccountView): void {
    this.#counts.set(view.namespace, (this.#counts.get(view.namespace) ?? 0) + 1);
  }

  removed(view: ServiceAccountView): void {
    const left = (this.#counts.get(view.namespace) ?? 1) - 1;
    if (left > 0) this.#counts.set(view.namespace, left);
    else if (this.#counts.delete(view.namespace)) this.gone(view.namespace);
  }

  relisting(): void {
    this.#before = new Set(this.#counts.keys());
    this.#counts.clear();
  }

  relisted(): void {
    for (const namespace of this.#before ?? []) if (!this.#counts.has(namespace)) this.gone(namespace);
    this.#before = undefined;
  }
}

/** ServiceAccounts are looked up by namespace and name; the key of the cache underneath is "namespace/name". */
export class ServiceAccountCache extends Watched {
  readonly #cache: ObjectCache<ServiceAccountView>;
  readonly #namespaces = new KnownNamespaces();
  protected readonly source: ObjectCache<ServiceAccountView>;

  constructor({ kubeConfig, annotationPrefixes, ...options }: ServiceAccountCacheOptions) {
    super();
    const api = kubeConfig.makeApiClient(CoreV1Api);
    this.#cache = this.source = new ObjectCache({
      ...options,
      kubeConfig,
      what: 'ServiceAccount',
      path: '/api/v1/serviceaccounts',
      list: (page) => api.listServiceAccountForAllNamespaces(page) as Promise<ListPage>,
      read: (key) => {
        const [namespace, name] = key.split('/');
        return api.readNamespacedServiceAccount({ namespace, name });
      },
      slim: (raw) => slimServiceAccount(raw as Raw, annotationPrefixes),
      index: this.#namespaces,
      key: (view) => keyOf(view.namespace, view.name),
      unavailable: (key, why) => {
        const [namespace, name] = key.split('/');
        return new ServiceAccountUnavailable(namespace, name, why);
      },
    });
  }

  /** A watch connection is open (the list is in and events are flowing). */
  get watching(): boolean {
    return this.#cache.watching;
  }

  get size(): number {
    return this.#cache.size;
  }

  /** Whether the namespace holds a cached ServiceAccount, i.e. exists (not merely named by a caller). */
  hasNamespace(namespace: string): boolean {
    return this.#namespaces.has(namespace);
  }

  /** Called when a namespace loses its last cached ServiceAccount (deleted), to drop what was kept for it. */
  onNamespaceGone(fn: (namespace: string) => void): void {
    this.#namespaces.gone = fn;
  }

  /** The list-watch underneath, for tests' diagnostics. */
  get listWatchForTests(): ListWatch {
    return this.#cache.listWatch;
  }

  /** The cached view, synchronously; undefined on a miss. */
  get(namespace: string, name: string): ServiceAccountView | undefined {
    return this.#cache.get(keyOf(namespace, name));
  }

  /**
   * The cached view, or on a miss a direct read: a Pod created right after its ServiceAccount
   * still gets its identity. undefined: the ServiceAccount does not exist. A read that cannot be
   * made or answered rejects with ServiceAccountUnavailable: the caller decides between refusing
   * and admitting.
   */
  lookup(namespace: string, name: string): ServiceAccountView | Promise<ServiceAccountView | undefined> {
    return this.#cache.lookup(keyOf(namespace, name));
  }
}
