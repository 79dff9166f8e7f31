import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { WebhookError } from '../errors.ts';
import type { NamespaceView } from './types.ts';
import { DirectReads } from './direct-read.ts';
import { ListWatch, statusOf, type ListPage } from './list-watch.ts';

type Raw = { metadata?: { name?: string; labels?: Record<string, string> | null } };

/** What tenant policy reads of a Namespace: name and labels. */
export function slimNamespace(ns: Raw): NamespaceView | undefined {
  const name = ns.metadata?.name;
  if (!name) return undefined;
  return Object.freeze({ name, labels: Object.freeze({ ...ns.metadata?.labels }) });
}

export interface NamespaceCacheOptions {
  kubeConfig: KubeConfig;
  log: Logger;
  /** Timeout of the direct read when a namespace is not cached yet. */
  missTimeoutMs?: number;
}

/**
 * Namespaces' names and labels, cluster-wide, for tenant policy. A namespace not cached yet (just
 * created, or just relabelled before the watch caught up) is read directly. A namespace that
 * cannot be read at all fails the admission: judging a tenant without its labels could grant
 * what a label was meant to refuse.
 */
export class NamespaceCache {
  readonly #items = new Map<string, NamespaceView>();
  readonly #reads: DirectReads<NamespaceView>;
  readonly #api: CoreV1Api;
  readonly #lw: ListWatch;

  constructor({ kubeConfig, log, missTimeoutMs = 2000 }: NamespaceCacheOptions) {
    this.#api = kubeConfig.makeApiClient(CoreV1Api);
    this.#reads = new DirectReads(missTimeoutMs);
    this.#lw = new ListWatch({
      kubeConfig,
      log,
      what: 'Namespace',
      path: '/api/v1/namespaces',
      list: (page) => this.#api.listNamespace(page) as Promise<ListPage>,
      onList: (items) => {
        this.#items.clear();
        for (const item of items) this.#put(item as Raw);
      },
      onEvent: (type, obj) => {
        if (type === 'DELETED') this.#items.delete((obj as Raw).metadata?.name ?? '');
        else this.#put(obj as Raw);
      },
    });
  }

  get synced(): boolean {
    return this.#lw.synced;
  }

  get size(): number {
    return this.#items.size;
  }

  start(): Promise<void> {
    return this.#lw.start();
  }

  stop(): void {
    this.#lw.stop();
  }

  #put(raw: Raw): void {
    const view = slimNamespace(raw);
    if (view) this.#items.set(view.name, view);
  }

  lookup(name: string): NamespaceView | Promise<NamespaceView> {
    return this.#items.get(name) ?? this.#reads.read(name, () => this.#read(name));
  }

  async #read(name: string): Promise<NamespaceView> {
    try {
      const view = slimNamespace((await this.#api.readNamespace({ name })) as Raw) ?? { name, labels: {} };
      if (!this.#items.has(name)) this.#items.set(name, view);
      return view;
    } catch (err) {
      // A namespace that does not exist has no labels; the API server refuses the object anyway.
      if (statusOf(err) === 404) return { name, labels: {} };
      throw new WebhookError(
        'WIW_NAMESPACE_UNAVAILABLE',
        `the labels of namespace ${name} are needed for tenant policy but cannot be read: ${(err as Error).message}`,
      );
    }
  }
}
