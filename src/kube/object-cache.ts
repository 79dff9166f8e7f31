// A slimmed copy of one kind of object, kept current by ListWatch, with a direct read on a miss:
// an object created a moment ago (a Pod right after its ServiceAccount, a namespace just made) is
// read from the API server once, deduplicated per key, rate-limited, with a short timeout. The
// ServiceAccount and Namespace caches are this with their own slimming and options.

import { safeMessage } from '../log.ts';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.ts';
import type { KubeApi } from './api.ts';
import { DirectReads, TimeoutError } from './direct-read.ts';
import { ListWatch, statusOf } from './list-watch.ts';
import type { Lifecycle } from './lifecycle.ts';
import { TokenBucket } from './rate-limit.ts';

/** The kinds cached: the `what` label of the cache metrics, so a closed set. */
type CachedKind = 'ServiceAccount' | 'Namespace';

interface ObjectCacheOptions<T> {
  api: KubeApi;
  log: Logger;
  metrics?: Metrics;
  what: CachedKind;
  /** The collection listed and watched, e.g. /api/v1/namespaces, and its query (a field or label selector). */
  path: string;
  query?: Record<string, string>;
  /** One object by key, from the API server; rejects with the API's error (404: absent). */
  read(key: string): Promise<unknown>;
  /** What is kept of an object; undefined for one that cannot be keyed. */
  slim(raw: unknown): T | undefined;
  key(view: T): string;
  /**
   * Whether an object could have this key (names as the API server validates them). A key no
   * object can have is not found at once: no read, no rate-limit token, whatever a caller sends.
   */
  possible?(key: string): boolean;
  /** The error for an object neither cached nor readable now; `why` is the cause, for people. */
  unavailable(key: string, why: string): Error;
  /** Timeout of a direct read on a miss. */
  missTimeoutMs?: number;
  /** Direct reads per second at most (token bucket, burst of the same size). */
  missReadsPerSecond?: number;
  /** A watch silent this long (no event, no bookmark) is restarted. */
  watchIdleTimeoutMs?: number;
  pageSize?: number;
  /** ListWatch's maxPageBytes and streamingList (tests list in pages with small objects). */
  maxPageBytes?: number;
  streamingList?: boolean;
  /** Told of every object the cache gains and loses (an index kept beside it). */
  index?: CacheIndex<T>;
  /** What a view costs the heap, about: the cache_bytes metric (nothing is left out for it alone). */
  bytes?(view: T): number;
  /** A byte budget on what views hold beyond a plain entry: see ByteBudget. */
  budget?: ByteBudget<T>;
}

/**
 * What a view holds beyond a plain entry (`bytes`: for a ServiceAccount, its annotations) is
 * counted against its group's share (for a ServiceAccount, its namespace) and against a total.
 * A view that does not fit is not kept (a stale copy of it goes): a lookup reads it directly,
 * rate-limited, so the answer stays right and only slower. A plain view (0 bytes) always fits:
 * one group's bytes never push another group's plain views out, nor, until the total is spent
 * (maxBytes / share groups at their share at once), its other views. Lists count as they arrive.
 */
interface ByteBudget<T> {
  /** The group a view belongs to, and what it is called in the log (e.g. "namespace"). */
  group(view: T): string;
  groupIs: string;
  bytes(view: T): number;
  /** The most one group's views may hold together. */
  share: number;
  /** The most all views may hold together. */
  maxBytes: number;
}

/** Bytes counted per group and in total: the cache's, or the list's in progress. */
class Tally {
  readonly groups = new Map<string, number>();
  total = 0;

  of(group: string): number {
    return this.groups.get(group) ?? 0;
  }

  add(group: string, bytes: number): void {
    if (bytes === 0) return;
    const now = this.of(group) + bytes;
    if (now > 0) this.groups.set(group, now);
    else this.groups.delete(group);
    this.total += bytes;
  }

  clear(): void {
    this.groups.clear();
    this.total = 0;
  }
}

/** Why a view does not fit: its group's share is spent, or the whole budget; undefined if it fits. */
type Over = 'share' | 'budget' | undefined;

/** What a cache tells an index: objects added and removed, and a relist (everything replaced). */
export interface CacheIndex<T> {
  added(view: T): void;
  removed(view: T): void;
  /** Before a relist adds everything again; after it, `relisted`. */
  relisting(): void;
  relisted(): void;
}

export class ObjectCache<T> implements Lifecycle {
  readonly #o: ObjectCacheOptions<T> & { missTimeoutMs: number };
  readonly #items = new Map<string, T>();
  readonly #reads: DirectReads<T | undefined>;
  readonly #bucket: TokenBucket;
  readonly #listWatch: ListWatch;
  /** What the kept views cost (the metric). */
  #bytes = 0;
  /** What the kept views hold against the budget, per group and in total. */
  readonly #budgeted = new Tally();
  /** The same for the list in progress, before it replaces the cache. */
  readonly #listed = new Tally();
  /** Something was left out since the last warning: the total (`#full`) or a group's share (one warning per episode). */
  #full = false;
  readonly #fullGroups = new Set<string>();

  constructor(options: ObjectCacheOptions<T>) {
    const o = { ...options, missTimeoutMs: options.missTimeoutMs ?? 2000 };
    this.#o = o;
    this.#reads = new DirectReads(o.missTimeoutMs);
    this.#bucket = new TokenBucket(o.missReadsPerSecond ?? 50);
    const what = o.what;
    this.#listWatch = new ListWatch({
      api: o.api,
      log: o.log,
      what,
      path: o.path,
      query: o.query,
      // Slimmed page by page: the list's whole objects are never all held at once.
      keep: (raw) => this.#keepListed(raw),
      listing: () => {
        this.#listed.clear();
        this.#full = false;
        this.#fullGroups.clear();
      },
      onList: (views) => {
        this.#items.clear();
        this.#bytes = 0;
        this.#budgeted.clear();
        this.#listed.clear();
        o.index?.relisting();
        for (const view of views as T[]) this.#put(view);
        o.index?.relisted();
        this.#sized();
        o.log.info({ what, size: this.#items.size, bytes: this.#bytes }, `${what} cache listed`);
      },
      onEvent: (type, obj) => {
        const view = o.slim(obj);
        if (!view) return;
        if (type !== 'DELETED') this.#put(view);
        else this.#remove(o.key(view));
        this.#sized();
      },
      onRestart: (cause) => o.metrics?.watchRestarts.inc({ what, cause }),
      watchIdleTimeoutMs: o.watchIdleTimeoutMs,
      pageSize: o.pageSize,
      maxPageBytes: o.maxPageBytes,
      streamingList: o.streamingList,
    });
  }

  /** The first list is in (and stays so). */
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

  /** What the kept views cost, as `bytes` counts them (0 without it). */
  get bytes(): number {
    return this.#bytes;
  }

  /** What the kept views hold against the budget: a group's, or all of them together. */
  held(group?: string): number {
    return group === undefined ? this.#budgeted.total : this.#budgeted.of(group);
  }

  /** The list-watch underneath, for tests' diagnostics. */
  get listWatch(): ListWatch {
    return this.#listWatch;
  }

  /** Starts list-and-watch; resolves once the first list is in. */
  start(): Promise<void> {
    return this.#listWatch.start();
  }

  stop(): void {
    this.#listWatch.stop();
  }

  /** The cached view, synchronously; undefined on a miss. */
  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  /**
   * The cached view (synchronously: a hit costs no promise), or on a miss the direct read.
   * undefined: the object does not exist. A read that cannot be made (rate limit) or answered
   * (timeout, error) rejects with the `unavailable` error: whether the object exists is unknown.
   */
  lookup(key: string): T | Promise<T | undefined> {
    const hit = this.#items.get(key);
    if (hit) return hit;
    const { what, metrics, log } = this.#o;
    metrics?.cacheMisses.inc({ what });
    if (this.#o.possible && !this.#o.possible(key)) return Promise.resolve(undefined);
    // A caller joining a read in flight spends no token: the burst is one request.
    if (!this.#reads.has(key) && !this.#bucket.take()) {
      metrics?.fallbackReads.inc({ what, result: 'rate_limited' });
      log.warn({ what, key }, `${what} not cached and direct reads are rate-limited`);
      return Promise.reject(this.#o.unavailable(key, `more than ${this.#bucket.perSecond} direct reads per second`));
    }
    return this.#reads
      .read(key, () => this.#readDirect(key))
      .catch((err: unknown) => {
        const timedOut = err instanceof TimeoutError;
        metrics?.fallbackReads.inc({ what, result: timedOut ? 'timeout' : 'error' });
        log.warn({ what, key, err }, timedOut ? `direct ${what} read timed out` : `direct ${what} read failed`);
        throw this.#o.unavailable(
          key,
          timedOut
            ? `no answer from the API server in ${this.#o.missTimeoutMs} ms`
            : `the API server answered: ${safeMessage(err)}`,
        );
      });
  }

  async #readDirect(key: string): Promise<T | undefined> {
    const { what, metrics } = this.#o;
    let raw: unknown;
    try {
      raw = await this.#o.read(key);
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      metrics?.fallbackReads.inc({ what, result: 'not_found' });
      return undefined;
    }
    metrics?.fallbackReads.inc({ what, result: 'found' });
    const view = this.#o.slim(raw);
    // The watch will deliver it too; keeping it now spares the next admission a second read.
    if (view && !this.#items.has(key)) {
      this.#put(view);
      this.#sized();
    }
    return view;
  }

  #size(view: T): number {
    return this.#o.bytes?.(view) ?? 0;
  }

  /** What a view holds against the budget, and its group's share: 0 for a plain view (or no budget). */
  #counted(view: T): { group: string; bytes: number } {
    const b = this.#o.budget;
    return b ? { group: b.group(view), bytes: b.bytes(view) } : { group: '', bytes: 0 };
  }

  /** Whether `bytes` more fit the group and the total, `tally` holding what is counted already. */
  #over(group: string, bytes: number, tally: Tally, already = 0): Over {
    const b = this.#o.budget;
    if (!b || bytes === 0) return undefined;
    if (tally.of(group) - already + bytes > b.share) return 'share';
    if (tally.total - already + bytes > b.maxBytes) return 'budget';
    return undefined;
  }

  /** A listed object, slimmed; left out when its group's share or the budget is spent by the list so far. */
  #keepListed(raw: unknown): T | undefined {
    const view = this.#o.slim(raw);
    if (view === undefined) return undefined;
    const { group, bytes } = this.#counted(view);
    const over = this.#over(group, bytes, this.#listed);
    if (over) {
      this.#leftOut(this.#o.key(view), group, over, bytes, this.#listed);
      return undefined;
    }
    this.#listed.add(group, bytes);
    return view;
  }

  /** Keeps the view in place of its older copy, within the budget; a view that does not fit takes its older copy out. */
  #put(view: T): void {
    const key = this.#o.key(view);
    const old = this.#items.get(key);
    const { group, bytes } = this.#counted(view);
    // The key holds the group (a namespace): an older copy counted in the same one.
    const already = old === undefined ? 0 : this.#counted(old).bytes;
    const over = this.#over(group, bytes, this.#budgeted, already);
    if (over) {
      // A stale copy would answer for the object: it goes, and a lookup reads it directly.
      this.#remove(key);
      this.#leftOut(key, group, over, bytes, this.#budgeted);
      return;
    }
    this.#items.set(key, view);
    this.#bytes += this.#size(view) - (old === undefined ? 0 : this.#size(old));
    this.#budgeted.add(group, bytes - already);
    if (bytes < already) this.#roomAgain(group);
    if (old === undefined) this.#o.index?.added(view);
  }

  #remove(key: string): void {
    const old = this.#items.get(key);
    if (old === undefined) return;
    this.#items.delete(key);
    this.#bytes -= this.#size(old);
    const { group, bytes } = this.#counted(old);
    this.#budgeted.add(group, -bytes);
    this.#o.index?.removed(old);
    this.#roomAgain(group);
  }

  /** Room again (half the budget or the group's share free): the next object left out is worth a warning. */
  #roomAgain(group: string): void {
    const b = this.#o.budget;
    if (!b) return;
    if (this.#full && this.#budgeted.total < b.maxBytes / 2) this.#full = false;
    if (this.#fullGroups.has(group) && this.#budgeted.of(group) < b.share / 2) this.#fullGroups.delete(group);
  }

  /** Counted each time; logged once per episode (of the total, or of a group), naming the first object left out. */
  #leftOut(key: string, group: string, over: Over, bytes: number, tally: Tally): void {
    const { what, metrics, log } = this.#o;
    // biome-ignore lint/style/noNonNullAssertion: Only a cache with a budget leaves an object out.
    const b = this.#o.budget!;
    metrics?.cacheOverBudget.inc({ what });
    if (over === 'share') {
      if (this.#fullGroups.has(group)) return;
      this.#fullGroups.add(group);
      log.warn(
        { what, key, [b.groupIs]: group, bytes, held: tally.of(group), share: b.share },
        `${what} cache: ${b.groupIs} ${group} holds its share of the byte budget: its objects that do not fit are read directly when needed`,
      );
      return;
    }
    if (this.#full) return;
    this.#full = true;
    log.warn(
      { what, key, bytes, held: tally.total, maxBytes: b.maxBytes },
      `${what} cache is at its byte budget: objects that do not fit are read directly when needed`,
    );
  }

  #sized(): void {
    this.#o.metrics?.cacheSize.set({ what: this.#o.what }, this.#items.size);
    if (this.#o.bytes) this.#o.metrics?.cacheBytes.set({ what: this.#o.what }, this.#bytes);
  }
}
