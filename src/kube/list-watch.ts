import { type KubeApi, KubeResponseTooLarge, type OpenWatch } from './api.ts';
import type { Lifecycle } from './lifecycle.ts';
import type { Logger } from 'pino';

/** One page of a list call. */
interface ListPage {
  items?: unknown[] | null;
  metadata?: { continue?: string; resourceVersion?: string };
}

interface ListWatchOptions {
  api: KubeApi;
  /** For log lines: "Namespace", "WorkloadIdentityPolicy". */
  what: string;
  /** The collection listed and watched, e.g. /api/v1/namespaces. */
  path: string;
  /** Parameters of both the list and the watch, e.g. a field or label selector. */
  query?: Record<string, string>;
  /**
   * What is kept of each listed object, applied page by page as pages arrive (undefined: dropped),
   * so a list of 50,000 objects never holds them all whole. Default: the object itself.
   */
  keep?: (raw: unknown) => unknown;
  /** A (re)list starts: `keep` is called for its objects from now on (a budget counts from here). */
  listing?: () => void;
  /** The whole collection (as `keep` made it), after each (re)list. */
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
  /** How long the API server keeps one watch open (timeoutSeconds); a random 5 to 10 min by default. */
  watchTimeoutSeconds?: () => number;
  /**
   * List by streaming (a watch with sendInitialEvents: the API server's cache sends each object as
   * an event, then a bookmark) where the API server offers it; else, or false, list page by page.
   */
  streamingList?: boolean;
  pageSize?: number;
  /**
   * A page's answer longer than this is asked for again with half as many objects (the same
   * continue token), down to one: objects of hundreds of KiB (a tenant's ServiceAccounts) never
   * make a page of tens of MiB. Default 8 MiB.
   */
  maxPageBytes?: number;
  /**
   * Each restart after a real failure, by cause (for a metric). A watch that ends normally (the
   * API server's timeout) is resumed at once and not counted.
   */
  onRestart?: (cause: RestartCause) => void;
}

type RestartCause = 'gone' | 'idle' | 'watch_error' | 'list_error';

/**
 * List, then watch from the list's resourceVersion. A watch that ends normally is resumed at once
 * from the last resourceVersion; 410 Gone relists; errors and silence back off (reset as soon as a
 * watch is established again). `synced` turns true after the first list and stays true.
 *
 * Where the API server streams lists (Kubernetes 1.27+ with WatchList, on by default since 1.32),
 * the list is one watch: the objects arrive one per line from the API server's cache, each slimmed
 * as it comes, and the same connection goes on as the watch. That is quicker than pages read from
 * etcd, and no page is ever held whole. A server that refuses it gets pages instead.
 */
export class ListWatch implements Lifecycle {
  readonly #o: Required<ListWatchOptions>;
  #resourceVersion = '';
  #synced = false;
  #stopped = false;
  #abort: OpenWatch | undefined;
  #seq = 0;
  #connects = 0;
  #idleTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #waiters: (() => void)[] = [];
  /** Whether to list by streaming; asked of the API server (its version) once. */
  #streaming: boolean | undefined;

  constructor(options: ListWatchOptions) {
    this.#o = {
      absentStatus: 0,
      absentRetryMs: 30_000,
      watchIdleTimeoutMs: 90_000,
      // Spread the reconnects of many replicas, as client-go's reflector does (5 to 10 min).
      watchTimeoutSeconds: () => 300 + Math.floor(Math.random() * 300),
      pageSize: 500,
      maxPageBytes: 8 * 2 ** 20,
      streamingList: true,
      onRestart: () => {},
      listing: () => {},
      query: {},
      keep: (raw) => raw,
      // An option passed as undefined (a cache handing on its own unset option) keeps the default.
      ...(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as ListWatchOptions),
    };
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Watch connections established so far (a diagnostic: each normal end opens another). */
  get connects(): number {
    return this.#connects;
  }

  /** Whether lists stream (undefined until the first list): a diagnostic. */
  get streaming(): boolean | undefined {
    return this.#streaming;
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
        this.#streaming ??= this.#o.streamingList && (await this.#o.api.streamsLists());
        if (this.#streaming) {
          await this.#startWatch(true);
          return;
        }
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
    const { path, query, keep } = this.#o;
    const items: unknown[] = [];
    let cont: string | undefined;
    let rv = '';
    let limit = this.#o.pageSize;
    this.#o.listing();
    try {
      for (;;) {
        const page = await this.#page(path, { ...query, limit, continue: cont }).catch((err: unknown) => {
          if (!(err instanceof KubeResponseTooLarge) || limit <= 1) throw err;
          limit = Math.max(1, Math.floor(limit / 2));
          return undefined;
        });
        if (!page) continue;
        // Each page is slimmed as it arrives and then dropped: only what `keep` keeps adds up.
        for (const raw of page.items ?? []) {
          const kept = keep(raw);
          if (kept !== undefined) items.push(kept);
        }
        cont = page.metadata?.continue || undefined;
        rv = page.metadata?.resourceVersion ?? rv;
        if (!cont) break;
      }
    } catch (err) {
      if (this.#absent(err)) return true;
      throw err;
    }
    this.#o.onList(items);
    this.#resourceVersion = rv;
    this.#markSynced();
    return false;
  }

  /** One page; one object alone is read whatever its size (the API server bounds it). */
  #page(path: string, query: Record<string, string | number | undefined>): Promise<ListPage> {
    const maxBytes = query.limit === 1 ? undefined : this.#o.maxPageBytes;
    return this.#o.api.request<ListPage>('GET', path, { query, maxBytes });
  }

  /** A collection that is absent (absentStatus: a CRD not installed) is an empty list, asked for again later. */
  #absent(err: unknown): boolean {
    if (!this.#o.absentStatus || statusOf(err) !== this.#o.absentStatus) return false;
    if (!this.#synced)
      this.#o.log.warn(
        { what: this.#o.what, status: statusOf(err) },
        `${this.#o.what} API not found; treating it as empty and checking again later`,
      );
    this.#o.onList([]);
    this.#markSynced();
    return true;
  }

  #markSynced(): void {
    if (this.#synced) return;
    this.#synced = true;
    for (const resolve of this.#waiters.splice(0)) resolve();
  }

  /** A watch from the last resourceVersion; `listing`: one that streams the list first (sendInitialEvents). */
  async #startWatch(listing = false): Promise<void> {
    let ended = false;
    const seq = ++this.#seq;
    // The list as it streams in; undefined once it is all in (or when not listing).
    let initial: unknown[] | undefined = listing ? [] : undefined;
    if (listing) this.#o.listing();
    const onEnd = (err: unknown) => {
      if (ended) return;
      ended = true;
      if (seq === this.#seq) this.#watchEnded(err, initial !== undefined);
    };
    this.#armIdle();
    const onInitial = (type: string, obj: WatchObject | undefined) => {
      if (type === 'ADDED') {
        const kept = this.#o.keep(obj);
        if (kept !== undefined) initial?.push(kept);
      } else if (type === 'BOOKMARK' && obj?.metadata?.annotations?.[INITIAL_EVENTS_END] === 'true') {
        const items = initial ?? [];
        initial = undefined;
        this.#o.onList(items);
        this.#resourceVersion = obj.metadata.resourceVersion ?? '';
        this.#markSynced();
      }
    };
    let open: OpenWatch;
    try {
      open = await this.#o.api.watch(this.#o.path, this.#watchQuery(listing), (type, obj) => {
        if (initial && type !== 'ERROR') {
          if (!this.#stopped) this.#armIdle();
          onInitial(type, obj as WatchObject);
        } else this.#event(type, obj as WatchObject, onEnd);
      });
    } catch (err) {
      // Refused (410 Gone: relist; 403: RBAC) or unreachable: as an end with that error.
      if (!this.#listingRefused(err, listing)) onEnd(err);
      return;
    }
    void open.ended.then(onEnd);
    if (this.#stopped || ended || seq !== this.#seq) open.abort();
    else {
      // Established (the API server answered 200): the next failure starts a fresh backoff.
      this.#abort = open;
      this.#backoffMs = 0;
      this.#connects++;
    }
  }

  #watchQuery(listing: boolean) {
    return {
      ...this.#o.query,
      allowWatchBookmarks: true,
      ...(listing
        ? { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' }
        : { resourceVersion: this.#resourceVersion }),
      timeoutSeconds: this.#o.watchTimeoutSeconds(),
    };
  }

  /** A streamed list the API server cannot give (WatchList off) or whose resource is not there yet: what comes next is scheduled, true. */
  #listingRefused(err: unknown, listing: boolean): boolean {
    if (!listing) return false;
    const status = statusOf(err);
    if (status === 400 || status === 422) {
      // This API server does not stream lists (WatchList off): pages from now on.
      this.#o.log.info({ what: this.#o.what, status }, `${this.#o.what}: streaming lists refused; listing in pages`);
      this.#streaming = false;
      this.#seq++;
      this.#schedule(0);
      return true;
    }
    if (!this.#absent(err)) return false;
    this.#seq++;
    this.#schedule(this.#o.absentRetryMs);
    return true;
  }

  /** What follows the end of the current watch; `midList`: its streamed list was not all in. */
  #watchEnded(err: unknown, midList: boolean): void {
    this.#abort = undefined;
    clearTimeout(this.#idleTimer);
    if (this.#stopped) return;
    if (midList && err && !endedNormally(err) && statusOf(err) !== 410) {
      // The list did not come in whole: as a failed list, started over with a backoff.
      this.#o.onRestart('list_error');
      this.#retry(err);
    } else if (err && statusOf(err) === 410) {
      this.#resourceVersion = '';
      this.#o.onRestart('gone');
      this.#schedule(0);
    } else if (err && !endedNormally(err)) {
      this.#o.onRestart('watch_error');
      this.#retry(err);
    } else {
      // The API server's timeout: resume at once.
      this.#schedule(0);
    }
  }

  #event(type: string, obj: WatchObject | undefined, onEnd: (err: unknown) => void): void {
    if (this.#stopped) return;
    this.#armIdle();
    this.#backoffMs = 0;
    if (type === 'ERROR') {
      if (obj?.code === 410) this.#resourceVersion = '';
      this.#abort?.abort();
      onEnd(obj?.code === 410 ? { statusCode: 410 } : new Error(obj?.message ?? 'watch error event'));
      return;
    }
    const rv = obj?.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') this.#o.onEvent(type, obj);
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

type WatchObject = {
  code?: number;
  message?: string;
  metadata?: { resourceVersion?: string; annotations?: Record<string, string> };
};

/** The annotation of the bookmark that ends a streamed list. */
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

/** An end that is not a failure: an abort of ours. */
function endedNormally(err: unknown): boolean {
  return (err as Error).name === 'AbortError';
}

/** The HTTP status of an API error (KubeApiError.code, client-node's ApiException.code) or a watch error. */
export function statusOf(err: unknown): number | undefined {
  // DOMException has a numeric `code` too (23 for TimeoutError): that is no HTTP status.
  if (err instanceof DOMException) return undefined;
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  if (typeof e?.code === 'number') return e.code;
  if (typeof e?.statusCode === 'number') return e.statusCode;
  return undefined;
}
