import { CoreV1Api, Watch, type KubeConfig, type V1ServiceAccount } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.ts';
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

type Raw = { metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string> | null; resourceVersion?: string } };

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
  return Object.freeze({ namespace: m.namespace, name: m.name, uid: m.uid ?? '', annotations: Object.freeze(annotations) });
}

/**
 * A cluster-wide, slimmed copy of ServiceAccounts: name, namespace, uid and only the
 * annotations the providers read. List, then watch from the list's resourceVersion; a watch that
 * ends, errors or goes silent is restarted (with backoff after errors), relisting on 410 Gone.
 */
export class ServiceAccountCache {
  readonly #opts: Required<Omit<ServiceAccountCacheOptions, 'metrics'>> & { metrics?: Metrics };
  readonly #api: CoreV1Api;
  readonly #watch: Watch;
  readonly #items = new Map<string, ServiceAccountView>();
  readonly #inflight = new Map<string, Promise<ServiceAccountView | undefined>>();
  #resourceVersion = '';
  #synced = false;
  #stopped = false;
  #abort: AbortController | undefined;
  /** Bumped when a watch is abandoned on purpose, so its late end is not taken for a failure. */
  #watchSeq = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #tokens: number;
  #lastRefill = Date.now();
  #syncWaiters: (() => void)[] = [];

  constructor(options: ServiceAccountCacheOptions) {
    this.#opts = {
      missTimeoutMs: 2000,
      missReadsPerSecond: 50,
      watchIdleTimeoutMs: 90_000,
      pageSize: 500,
      ...options,
    };
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#watch = new Watch(options.kubeConfig);
    this.#tokens = this.#opts.missReadsPerSecond;
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** A watch connection is open (the list is in and events are flowing). */
  get watching(): boolean {
    return this.#abort !== undefined && !this.#stopped;
  }

  get size(): number {
    return this.#items.size;
  }

  /** Starts list-and-watch; resolves once the first list is in. */
  start(): Promise<void> {
    void this.#run();
    return this.waitForSync();
  }

  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#retryTimer);
    this.#abort?.abort();
  }

  /** The cached view, synchronously; undefined on a miss. */
  get(namespace: string, name: string): ServiceAccountView | undefined {
    return this.#items.get(`${namespace}/${name}`);
  }

  /**
   * The cached view, or on a miss a direct read (deduplicated per ServiceAccount, rate-limited,
   * with a short timeout): a Pod created right after its ServiceAccount still gets its identity.
   */
  lookup(namespace: string, name: string): ServiceAccountView | undefined | Promise<ServiceAccountView | undefined> {
    const key = `${namespace}/${name}`;
    const hit = this.#items.get(key);
    if (hit) return hit;
    this.#opts.metrics?.cacheMisses.inc();
    const pending = this.#inflight.get(key);
    if (pending) return pending;
    if (!this.#takeToken()) {
      this.#opts.metrics?.fallbackReads.inc({ result: 'rate_limited' });
      this.#opts.log.warn({ namespace, serviceAccount: name }, 'ServiceAccount not cached and direct reads are rate-limited');
      return undefined;
    }
    const read = this.#readDirect(namespace, name).finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, read);
    return read;
  }

  async #readDirect(namespace: string, name: string): Promise<ServiceAccountView | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#opts.missTimeoutMs);
    });
    try {
      const result = await Promise.race([this.#api.readNamespacedServiceAccount({ name, namespace }), timeout]);
      if (result === 'timeout') {
        this.#opts.metrics?.fallbackReads.inc({ result: 'timeout' });
        this.#opts.log.warn({ namespace, serviceAccount: name, timeoutMs: this.#opts.missTimeoutMs }, 'direct ServiceAccount read timed out');
        return undefined;
      }
      this.#opts.metrics?.fallbackReads.inc({ result: 'found' });
      const view = this.#slim(result as Raw);
      // The watch will deliver it too; keeping it now spares the next Pod a second read.
      if (view && !this.#items.has(`${namespace}/${name}`)) this.#put(view);
      return view;
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 404) {
        this.#opts.metrics?.fallbackReads.inc({ result: 'not_found' });
        return undefined;
      }
      this.#opts.metrics?.fallbackReads.inc({ result: 'error' });
      this.#opts.log.warn({ namespace, serviceAccount: name, err: (err as Error).message }, 'direct ServiceAccount read failed');
      return undefined;
    } finally {
      clearTimeout(timer);
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

  #put(view: ServiceAccountView): void {
    this.#items.set(`${view.namespace}/${view.name}`, view);
    this.#opts.metrics?.cacheSize.set(this.#items.size);
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    try {
      if (!this.#resourceVersion) await this.#list();
      await this.#startWatch();
    } catch (err) {
      this.#retry('list_error', err);
    }
  }

  async #list(): Promise<void> {
    const fresh = new Map<string, ServiceAccountView>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.#api.listServiceAccountForAllNamespaces({ limit: this.#opts.pageSize, _continue: cont });
      for (const item of page.items) {
        const view = this.#slim(item as V1ServiceAccount as Raw);
        if (view) fresh.set(`${view.namespace}/${view.name}`, view);
      }
      cont = page.metadata?._continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);
    this.#items.clear();
    for (const [k, v] of fresh) this.#items.set(k, v);
    this.#opts.metrics?.cacheSize.set(this.#items.size);
    this.#resourceVersion = rv;
    if (!this.#synced) {
      this.#synced = true;
      this.#opts.log.info({ serviceAccounts: this.#items.size }, 'ServiceAccount cache synced');
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
  }

  async #startWatch(): Promise<void> {
    let ended = false;
    const seq = ++this.#watchSeq;
    const onEnd = (err: unknown) => {
      if (ended) return;
      ended = true;
      if (seq !== this.#watchSeq) return;
      this.#abort = undefined;
      clearTimeout(this.#idleTimer);
      if (this.#stopped) return;
      const status = (err as { statusCode?: number; code?: number } | null)?.statusCode ?? (err as { code?: number } | null)?.code;
      if (err && status === 410) {
        this.#resourceVersion = '';
        this.#restartNow('gone');
      } else if (err && (err as Error).name !== 'AbortError') {
        this.#retry('watch_error', err);
      } else {
        // A watch the server (or the client library's own timeout) closed: resume at once.
        this.#restartNow('closed');
      }
    };
    this.#armIdle();
    const abort = await this.#watch.watch(
      '/api/v1/serviceaccounts',
      { allowWatchBookmarks: true, resourceVersion: this.#resourceVersion },
      (phase, obj) => {
        if (this.#stopped) return;
        this.#armIdle();
        this.#backoffMs = 0;
        const rv = obj?.metadata?.resourceVersion;
        if (phase === 'ERROR') {
          // A 410 arrives as an ERROR event carrying a Status object.
          if (obj?.code === 410) this.#resourceVersion = '';
          this.#abort?.abort();
          onEnd(obj?.code === 410 ? { statusCode: 410 } : new Error(obj?.message ?? 'watch error event'));
          return;
        }
        if (rv) this.#resourceVersion = rv;
        if (phase === 'BOOKMARK') return;
        const view = this.#slim(obj);
        if (!view) return;
        if (phase === 'DELETED') {
          this.#items.delete(`${view.namespace}/${view.name}`);
          this.#opts.metrics?.cacheSize.set(this.#items.size);
        } else {
          this.#put(view);
        }
      },
      onEnd,
    );
    // stop() may have run while the request was being made.
    if (this.#stopped || ended) abort.abort();
    else this.#abort = abort;
  }

  #armIdle(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      this.#opts.log.warn({ idleMs: this.#opts.watchIdleTimeoutMs }, 'ServiceAccount watch silent; restarting it');
      this.#opts.metrics?.watchRestarts.inc({ cause: 'idle' });
      this.#watchSeq++;
      const abort = this.#abort;
      this.#abort = undefined;
      abort?.abort();
      this.#restartNow('idle');
    }, this.#opts.watchIdleTimeoutMs);
    this.#idleTimer.unref();
  }

  #restartNow(cause: string): void {
    if (this.#stopped) return;
    if (cause !== 'idle') this.#opts.metrics?.watchRestarts.inc({ cause });
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => void this.#run(), 0);
  }

  #retry(cause: string, err: unknown): void {
    if (this.#stopped) return;
    this.#backoffMs = Math.min(30_000, this.#backoffMs ? this.#backoffMs * 2 : 250);
    const delay = this.#backoffMs / 2 + Math.random() * (this.#backoffMs / 2);
    this.#opts.metrics?.watchRestarts.inc({ cause });
    this.#opts.log.warn({ err: (err as Error)?.message ?? String(err), retryInMs: Math.round(delay) }, 'ServiceAccount list/watch failed; retrying');
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => void this.#run(), delay);
    this.#retryTimer.unref();
  }
}
