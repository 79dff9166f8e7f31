import type { Lifecycle } from './lifecycle.ts';
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';

/** One page of a list call, in the shape every generated list method returns. */
export interface ListPage {
  items: unknown[];
  metadata?: { _continue?: string; resourceVersion?: string };
}

export interface ListWatchOptions {
  kubeConfig: KubeConfig;
  /** For log lines: "Namespace", "WorkloadIdentityPolicy". */
  what: string;
  /** The watch path, e.g. /api/v1/namespaces. */
  path: string;
  /** Extra watch parameters, e.g. the labelSelector the list uses too. */
  watchQuery?: Record<string, string>;
  list(page: { limit: number; _continue?: string }): Promise<ListPage>;
  /** The whole collection, after each (re)list. */
  onList(items: unknown[]): void;
  onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: unknown): void;
  log: Logger;
  /**
   * A list that fails with this HTTP status counts as an empty collection and is retried slowly:
   * 404 for a custom resource whose CRD is not installed (yet).
   */
  absentStatus?: number;
  absentRetryMs?: number;
  watchIdleTimeoutMs?: number;
  /** The client library's own inactivity timeout; longer than the idle watchdog by default. */
  clientTimeoutMs?: number;
  pageSize?: number;
  /**
   * Each restart after a real failure, by cause (for a metric). A watch that ends normally (the
   * server's timeout, the client library's inactivity timeout) is resumed at once and not counted.
   */
  onRestart?: (cause: RestartCause) => void;
}

export type RestartCause = 'gone' | 'idle' | 'watch_error' | 'list_error';

/**
 * List, then watch from the list's resourceVersion. A watch that ends normally is resumed at once
 * from the last resourceVersion; 410 Gone relists; errors and silence back off (reset as soon as a
 * watch is established again). `synced` turns true after the first list and stays true.
 */
export class ListWatch implements Lifecycle {
  readonly #o: Required<ListWatchOptions>;
  readonly #watch: Watch;
  #resourceVersion = '';
  #synced = false;
  #stopped = false;
  #abort: AbortController | undefined;
  #seq = 0;
  #connects = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #waiters: (() => void)[] = [];

  constructor(options: ListWatchOptions) {
    const idle = options.watchIdleTimeoutMs ?? 90_000;
    this.#o = {
      absentStatus: 0,
      absentRetryMs: 30_000,
      watchIdleTimeoutMs: idle,
      clientTimeoutMs: idle + 30_000,
      pageSize: 500,
      onRestart: () => {},
      watchQuery: {},
      // An option passed as undefined (a cache handing on its own unset option) keeps the default.
      ...(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as ListWatchOptions),
    };
    this.#watch = new Watch(options.kubeConfig);
    // client-node aborts a watch after 30 s without a byte (its issue #3020), shorter than the
    // API server's bookmark interval; our own idle watchdog is the one that judges silence.
    (this.#watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = this.#o.clientTimeoutMs;
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Watch connections established so far (a diagnostic: each normal end opens another). */
  get connects(): number {
    return this.#connects;
  }

  /** A watch connection is open: the list is in and events are flowing. */
  get watching(): boolean {
    return this.#abort !== undefined && !this.#stopped;
  }

  start(): Promise<void> {
    void this.#run();
    return this.waitForSync();
  }

  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#retryTimer);
    this.#abort?.abort();
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    try {
      if (!this.#resourceVersion) {
        const absent = await this.#list();
        if (absent) {
          this.#schedule(this.#o.absentRetryMs);
          return;
        }
      }
      await this.#startWatch();
    } catch (err) {
      this.#o.onRestart('list_error');
      this.#retry(err);
    }
  }

  /** Returns true when the collection is absent (absentStatus). */
  async #list(): Promise<boolean> {
    const items: unknown[] = [];
    let cont: string | undefined;
    let rv = '';
    try {
      do {
        const page = await this.#o.list({ limit: this.#o.pageSize, _continue: cont });
        items.push(...page.items);
        cont = page.metadata?._continue || undefined;
        rv = page.metadata?.resourceVersion ?? rv;
      } while (cont);
    } catch (err) {
      if (this.#o.absentStatus && statusOf(err) === this.#o.absentStatus) {
        if (!this.#synced)
          this.#o.log.warn(
            { what: this.#o.what, status: statusOf(err) },
            `${this.#o.what} API not found; treating it as empty and checking again later`,
          );
        this.#o.onList([]);
        this.#markSynced();
        return true;
      }
      throw err;
    }
    this.#o.onList(items);
    this.#resourceVersion = rv;
    this.#markSynced();
    return false;
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    for (const resolve of this.#waiters.splice(0)) resolve();
  }

  async #startWatch(): Promise<void> {
    let ended = false;
    const seq = ++this.#seq;
    const onEnd = (err: unknown) => {
      if (ended) return;
      ended = true;
      if (seq !== this.#seq) return;
      this.#abort = undefined;
      clearTimeout(this.#idleTimer);
      if (this.#stopped) return;
      if (err && statusOf(err) === 410) {
        this.#resourceVersion = '';
        this.#o.onRestart('gone');
        this.#schedule(0);
      } else if (err && !endedNormally(err)) {
        this.#o.onRestart('watch_error');
        this.#retry(err);
      } else {
        // The server's timeout or the client library's inactivity timeout: resume at once.
        this.#schedule(0);
      }
    };
    this.#armIdle();
    const abort = await this.#watch.watch(
      this.#o.path,
      {
        ...this.#o.watchQuery,
        allowWatchBookmarks: true,
        resourceVersion: this.#resourceVersion,
        // Spread the reconnects of many replicas, as client-go's reflector does (5 to 10 min).
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      },
      (phase, obj) => {
        if (this.#stopped) return;
        this.#armIdle();
        this.#backoffMs = 0;
        if (phase === 'ERROR') {
          if (obj?.code === 410) this.#resourceVersion = '';
          this.#abort?.abort();
          onEnd(obj?.code === 410 ? { statusCode: 410 } : new Error(obj?.message ?? 'watch error event'));
          return;
        }
        const rv = obj?.metadata?.resourceVersion;
        if (rv) this.#resourceVersion = rv;
        if (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') this.#o.onEvent(phase, obj);
      },
      onEnd,
    );
    if (this.#stopped || ended) abort.abort();
    else {
      // Established (the API server answered 200): the next failure starts a fresh backoff.
      this.#abort = abort;
      this.#backoffMs = 0;
      this.#connects++;
    }
  }

  #armIdle(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      this.#o.log.warn(
        { what: this.#o.what, idleMs: this.#o.watchIdleTimeoutMs },
        `${this.#o.what} watch silent; restarting it`,
      );
      this.#o.onRestart('idle');
      this.#seq++;
      const abort = this.#abort;
      this.#abort = undefined;
      abort?.abort();
      this.#schedule(0);
    }, this.#o.watchIdleTimeoutMs);
    this.#idleTimer.unref();
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => void this.#run(), delayMs);
    if (delayMs > 0) this.#retryTimer.unref();
  }

  #retry(err: unknown): void {
    if (this.#stopped) return;
    this.#backoffMs = Math.min(30_000, this.#backoffMs ? this.#backoffMs * 2 : 250);
    const delay = this.#backoffMs / 2 + Math.random() * (this.#backoffMs / 2);
    const status = statusOf(err);
    this.#o.log[status === 403 ? 'error' : 'warn'](
      { what: this.#o.what, status, err, retryInMs: Math.round(delay) },
      status === 403
        ? `${this.#o.what} list/watch forbidden: the webhook's ServiceAccount needs get, list and watch on it`
        : `${this.#o.what} list/watch failed; retrying`,
    );
    this.#schedule(delay);
  }
}

/** An end that is not a failure: an abort of ours or a timeout of the client library. */
function endedNormally(err: unknown): boolean {
  const name = (err as Error).name;
  return name === 'AbortError' || name === 'TimeoutError';
}

/** The HTTP status of a client-library error (ApiException.code) or a watch error. */
export function statusOf(err: unknown): number | undefined {
  // DOMException has a numeric `code` too (23 for TimeoutError): that is no HTTP status.
  if (err instanceof DOMException) return undefined;
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  if (typeof e?.code === 'number') return e.code;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  return undefined;
}
