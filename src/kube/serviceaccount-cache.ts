import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { WebhookError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import { DirectReads, TimeoutError } from './direct-read.ts';
import { ListWatch, statusOf, type ListPage } from './list-watch.ts';
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
    resourceVersion?: string;
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

/**
 * A cluster-wide, slimmed copy of ServiceAccounts: name, namespace, uid and only the
 * annotations the providers read. List-and-watch (restarts, backoff, relist on 410 Gone, the idle
 * watchdog) is the shared ListWatch; this class adds the slimming and the direct read on a miss.
 */
export class ServiceAccountCache {
  readonly #opts: Required<Omit<ServiceAccountCacheOptions, 'metrics'>> & { metrics?: Metrics };
  readonly #api: CoreV1Api;
  readonly #listWatch: ListWatch;
  readonly #items = new Map<string, ServiceAccountView>();
  readonly #reads: DirectReads<ServiceAccountView | undefined>;
  #tokens: number;
  #lastRefill = Date.now();

  constructor(options: ServiceAccountCacheOptions) {
    this.#opts = {
      missTimeoutMs: 2000,
      missReadsPerSecond: 50,
      watchIdleTimeoutMs: 90_000,
      pageSize: 500,
      ...options,
    };
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#tokens = this.#opts.missReadsPerSecond;
    this.#reads = new DirectReads(this.#opts.missTimeoutMs);
    this.#listWatch = new ListWatch({
      kubeConfig: options.kubeConfig,
      what: 'ServiceAccount',
      path: '/api/v1/serviceaccounts',
      list: (page) => this.#api.listServiceAccountForAllNamespaces(page) as Promise<ListPage>,
      onList: (items) => {
        this.#items.clear();
        for (const item of items) {
          const view = this.#slim(item as Raw);
          if (view) this.#items.set(`${view.namespace}/${view.name}`, view);
        }
        this.#opts.metrics?.cacheSize.set(this.#items.size);
        this.#opts.log.info({ serviceAccounts: this.#items.size }, 'ServiceAccount cache listed');
      },
      onEvent: (type, obj) => {
        const view = this.#slim(obj as Raw);
        if (!view) return;
        if (type === 'DELETED') this.#items.delete(`${view.namespace}/${view.name}`);
        else this.#items.set(`${view.namespace}/${view.name}`, view);
        this.#opts.metrics?.cacheSize.set(this.#items.size);
      },
      onRestart: (cause) => this.#opts.metrics?.watchRestarts.inc({ cause }),
      log: options.log,
      watchIdleTimeoutMs: this.#opts.watchIdleTimeoutMs,
      pageSize: this.#opts.pageSize,
    });
  }

  get synced(): boolean {
    return this.#listWatch.synced;
  }

  /** A watch connection is open (the list is in and events are flowing). */
  get watching(): boolean {
    return this.#listWatch.watching;
  }

  get size(): number {
    return this.#items.size;
  }

  /** The list-watch underneath, for tests' diagnostics. */
  get listWatchForTests(): ListWatch {
    return this.#listWatch;
  }

  /** Starts list-and-watch; resolves once the first list is in. */
  start(): Promise<void> {
    return this.#listWatch.start();
  }

  waitForSync(): Promise<void> {
    return this.#listWatch.waitForSync();
  }

  stop(): void {
    this.#listWatch.stop();
  }

  /** The cached view, synchronously; undefined on a miss. */
  get(namespace: string, name: string): ServiceAccountView | undefined {
    return this.#items.get(`${namespace}/${name}`);
  }

  /**
   * The cached view, or on a miss a direct read (deduplicated per ServiceAccount, rate-limited,
   * with a short timeout): a Pod created right after its ServiceAccount still gets its identity.
   * undefined: the ServiceAccount does not exist. A read that cannot be made or answered rejects
   * with ServiceAccountUnavailable: the caller decides between refusing and admitting.
   */
  lookup(namespace: string, name: string): ServiceAccountView | undefined | Promise<ServiceAccountView | undefined> {
    const key = `${namespace}/${name}`;
    const hit = this.#items.get(key);
    if (hit) return hit;
    this.#opts.metrics?.cacheMisses.inc();
    if (!this.#reads.has(key) && !this.#takeToken()) {
      this.#opts.metrics?.fallbackReads.inc({ result: 'rate_limited' });
      this.#opts.log.warn(
        { namespace, serviceAccount: name },
        'ServiceAccount not cached and direct reads are rate-limited',
      );
      return Promise.reject(
        new ServiceAccountUnavailable(
          namespace,
          name,
          `more than ${this.#opts.missReadsPerSecond} direct reads per second`,
        ),
      );
    }
    return this.#reads
      .read(key, () => this.#readDirect(namespace, name))
      .catch((err: unknown) => {
        const timedOut = err instanceof TimeoutError;
        this.#opts.metrics?.fallbackReads.inc({ result: timedOut ? 'timeout' : 'error' });
        this.#opts.log.warn(
          { namespace, serviceAccount: name, err },
          timedOut ? 'direct ServiceAccount read timed out' : 'direct ServiceAccount read failed',
        );
        throw new ServiceAccountUnavailable(
          namespace,
          name,
          timedOut
            ? `no answer from the API server in ${this.#opts.missTimeoutMs} ms`
            : `the API server answered: ${(err as Error).message}`,
        );
      });
  }

  /** The ServiceAccount from the API server; undefined when it does not exist. */
  async #readDirect(namespace: string, name: string): Promise<ServiceAccountView | undefined> {
    try {
      const view = this.#slim((await this.#api.readNamespacedServiceAccount({ name, namespace })) as Raw);
      this.#opts.metrics?.fallbackReads.inc({ result: 'found' });
      // The watch will deliver it too; keeping it now spares the next Pod a second read.
      if (view && !this.#items.has(`${namespace}/${name}`)) {
        this.#items.set(`${namespace}/${name}`, view);
        this.#opts.metrics?.cacheSize.set(this.#items.size);
      }
      return view;
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      this.#opts.metrics?.fallbackReads.inc({ result: 'not_found' });
      return undefined;
    }
  }

  #takeToken(): boolean {
    const now = Date.now();
    const rate = this.#opts.missReadsPerSecond;
    this.#tokens = Math.min(rate, this.#tokens + ((now - this.#lastRefill) / 1000) * rate);
    this.#lastRefill = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #slim(sa: Raw): ServiceAccountView | undefined {
    return slimServiceAccount(sa, this.#opts.annotationPrefixes);
  }
}
