// Namespaces' names and labels, cluster-wide, for tenant policy: an ObjectCache with this
// slimming. A namespace not cached yet (just created, or just relabelled before the watch caught
// up) is read directly. A namespace that cannot be read at all fails the admission: judging a
// tenant without its labels could grant what a label was meant to refuse.

import type { Logger } from 'pino';
import { apiPath, type KubeApi } from './api.ts';
import { WebhookError } from '../errors.ts';
import { isNamespaceName } from '../model.ts';
import type { Metrics } from '../metrics.ts';
import { Watched } from './lifecycle.ts';
import { ObjectCache } from './object-cache.ts';
import type { NamespaceView } from './types.ts';

type Raw = { metadata?: { name?: string; labels?: Record<string, string> | null } };

/** What tenant policy reads of a Namespace: name and labels. */
function slimNamespace(ns: Raw): NamespaceView | undefined {
  const name = ns.metadata?.name;
  if (!name) return undefined;
  return Object.freeze({ name, labels: Object.freeze({ ...ns.metadata?.labels }) });
}

interface NamespaceCacheOptions {
  api: KubeApi;
  log: Logger;
  metrics?: Metrics;
  /** Timeout of the direct read when a namespace is not cached yet. */
  missTimeoutMs?: number;
  /** Direct reads per second at most (token bucket, burst of the same size). */
  missReadsPerSecond?: number;
  watchIdleTimeoutMs?: number;
}

/** A namespace that does not exist has no labels; the API server refuses the object anyway. */
const absent = (name: string): NamespaceView => Object.freeze({ name, labels: Object.freeze({}) });

export class NamespaceCache extends Watched {
  readonly #cache: ObjectCache<NamespaceView>;
  protected readonly source: ObjectCache<NamespaceView>;

  constructor({ api, ...options }: NamespaceCacheOptions) {
    super();
    this.#cache = this.source = new ObjectCache({
      ...options,
      api,
      what: 'Namespace',
      path: '/api/v1/namespaces',
      read: (name) => api.request('GET', apiPath('api', 'v1', 'namespaces', name)),
      slim: (raw) => slimNamespace(raw as Raw),
      possible: isNamespaceName,
      key: (view) => view.name,
      unavailable: (name, why) =>
        new WebhookError(
          'WIW_NAMESPACE_UNAVAILABLE',
          `the labels of namespace ${name} are needed for tenant policy but cannot be read: ${why}`,
        ),
    });
  }

  get size(): number {
    return this.#cache.size;
  }

  /** The namespace's labels; rejects with WIW_NAMESPACE_UNAVAILABLE when they cannot be read. */
  lookup(name: string): NamespaceView | Promise<NamespaceView> {
    const view = this.#cache.lookup(name);
    return view instanceof Promise ? view.then((found) => found ?? absent(name)) : view;
  }
}
