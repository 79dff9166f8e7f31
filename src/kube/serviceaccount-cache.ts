// The cluster-wide ServiceAccount cache: name, namespace and only the annotation keys the
// providers read, each within its bound, so a cluster of 200,000 ServiceAccounts stays small in
// memory and a tenant who may create ServiceAccounts cannot fill it: a ServiceAccount with a read
// annotation over its bound is kept as a marker, and the annotations kept within a byte budget,
// each namespace within its share of it, so one namespace's annotations never push another's
// ServiceAccounts out. An ObjectCache with this slimming; a miss (or an object left out by the
// budget) is read directly.

import { getHeapStatistics } from 'node:v8';
import { type AnnotationBound, keepBounded } from '../annotation-bounds.ts';
import { apiPath, type KubeApi } from './api.ts';
import type { Logger } from 'pino';
import { WebhookError } from '../errors.ts';
import { isNamespaceName, isObjectName } from '../model.ts';
import type { Metrics } from '../metrics.ts';
import type { ListWatch } from './list-watch.ts';
import { Watched } from './lifecycle.ts';
import { ObjectCache, type CacheIndex } from './object-cache.ts';
import type { ServiceAccountView } from './types.ts';

interface ServiceAccountCacheOptions {
  api: KubeApi;
  /** The annotation keys worth keeping, each with its bound; everything else is dropped on arrival. */
  annotations: readonly AnnotationBound[];
  log: Logger;
  metrics?: Metrics;
  /** Timeout of a direct read on a cache miss. */
  missTimeoutMs?: number;
  /** Direct reads per second at most (token bucket, burst of the same size). */
  missReadsPerSecond?: number;
  /** A watch silent this long (no event, no bookmark) is restarted. */
  watchIdleTimeoutMs?: number;
  pageSize?: number;
  /** A page answer longer than this is asked for again with fewer objects (default 8 MiB). */
  maxPageBytes?: number;
  /** The annotations' byte budget; default: an eighth of the V8 heap limit (CACHE_BUDGET_SHARE). */
  maxBytes?: number;
  /** One namespace's share of it; default: maxBytes × NAMESPACE_SHARE. */
  maxNamespaceBytes?: number;
}

/**
 * The share of the heap limit the annotations beyond the plain entries' may hold (lists of roles,
 * of client ids, of providers): 17.5 MiB of the chart's 140 MiB heap. The rest is the plain
 * entries' (a role ARN or a client id included: 200,000 ordinary ServiceAccounts take about 40 MiB
 * of heap, bench/serviceaccounts.ts) and the reviews'.
 */
const CACHE_BUDGET_SHARE = 1 / 8;

/**
 * One namespace's share of that budget: 560 KiB in the chart's limit (four role-arns lists at
 * their bound). Until 32 namespaces hold their share at once, no namespace's annotations leave
 * another namespace's ServiceAccount out; plain entries never are.
 */
const NAMESPACE_SHARE = 1 / 32;

/** The default budget: a share of this process's heap limit, so it follows the memory limit. */
function defaultCacheBudget(): number {
  return Math.floor(getHeapStatistics().heap_size_limit * CACHE_BUDGET_SHARE);
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

/** A ServiceAccount as the API server sends it: only the fields slimServiceAccount reads. */
export type RawServiceAccount = {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string> | null;
  };
};

const NO_ANNOTATIONS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * What the cache keeps of one ServiceAccount; undefined for an object without name or namespace.
 * Small by construction: the uid is not kept (admission never reads it), only the keys `bounds`
 * names are read (never a loop over what the author wrote), a ServiceAccount without them shares
 * one empty object, and one with a value over its bound is a marker that keeps no value. (Strings
 * need no interning: V8's JSON parser already hands out one copy of a repeated namespace name;
 * measured, no gain.)
 */
export function slimServiceAccount(
  sa: RawServiceAccount,
  bounds: readonly AnnotationBound[],
): ServiceAccountView | undefined {
  const m = sa.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const read = keepBounded(m.annotations, bounds);
  if ('oversize' in read)
    return Object.freeze({
      namespace: m.namespace,
      name: m.name,
      annotations: NO_ANNOTATIONS,
      oversize: Object.freeze(read.oversize),
    });
  return Object.freeze({
    namespace: m.namespace,
    name: m.name,
    annotations: read.kept ? Object.freeze(read.kept) : NO_ANNOTATIONS,
  });
}

/**
 * What one entry costs the heap, counted from above: the map's entry, the frozen view and its
 * objects, the key, and the strings' UTF-8 bytes (at least what V8 stores for them). Measured for
 * 50,000 entries: 165 bytes of heap each without annotations (counted 228), 277 with a role ARN
 * (counted 291).
 */
const ENTRY_OVERHEAD_BYTES = 200;

/** What an entry costs the heap (the cache_bytes metric): its plain part and its annotations. */
export function viewBytes(view: ServiceAccountView): number {
  return plainBytes(view) + budgetedBytes(view);
}

/**
 * The annotation bytes of an entry that count as plain: a role ARN, a client and tenant id, a
 * Google service account's email, with their keys (an ordinary ServiceAccount's).
 */
const PLAIN_ANNOTATION_BYTES = 256;

/**
 * A plain entry: name, namespace, a marker's few fields, and annotations up to
 * PLAIN_ANNOTATION_BYTES; at most about 1.3 KB by the API server's name lengths. Kept whatever
 * the budget: their number is the cluster's (ResourceQuota's count/serviceaccounts), not what a
 * ServiceAccount's author writes in it.
 */
function plainBytes(view: ServiceAccountView): number {
  const bytes = ENTRY_OVERHEAD_BYTES + 2 * (view.namespace.length + view.name.length) + 1;
  const annotations = Math.min(annotationBytes(view), PLAIN_ANNOTATION_BYTES);
  return (view.oversize ? bytes + view.oversize.key.length + 64 : bytes) + annotations;
}

/** The annotations kept (each within its bound) beyond an entry's plain part: what the budget and a namespace's share count. */
export function budgetedBytes(view: ServiceAccountView): number {
  return Math.max(0, annotationBytes(view) - PLAIN_ANNOTATION_BYTES);
}

/** The annotations kept, keys and values. */
function annotationBytes(view: ServiceAccountView): number {
  let bytes = 0;
  for (const key in view.annotations) bytes += key.length + Buffer.byteLength(view.annotations[key], 'utf8');
  return bytes;
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;
/** A namespace has no "/"; a name from a Pod may (it is refused as not found, unasked: apiPath). */
const splitKey = (key: string): [string, string] => {
  const slash = key.indexOf('/');
  return [key.slice(0, slash), key.slice(slash + 1)];
};

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

  constructor({
    api,
    annotations,
    maxBytes = defaultCacheBudget(),
    maxNamespaceBytes,
    ...options
  }: ServiceAccountCacheOptions) {
    super();
    this.#cache = this.source = new ObjectCache({
      ...options,
      api,
      bytes: viewBytes,
      budget: {
        group: (view) => view.namespace,
        groupIs: 'namespace',
        bytes: budgetedBytes,
        maxBytes,
        share: maxNamespaceBytes ?? Math.floor(maxBytes * NAMESPACE_SHARE),
      },
      what: 'ServiceAccount',
      path: '/api/v1/serviceaccounts',
      read: (key) => {
        const [namespace, name] = splitKey(key);
        return api.request('GET', apiPath('api', 'v1', 'namespaces', namespace, 'serviceaccounts', name));
      },
      slim: (raw) => slimServiceAccount(raw as RawServiceAccount, annotations),
      possible: (key) => {
        const [namespace, name] = splitKey(key);
        return isNamespaceName(namespace) && isObjectName(name);
      },
      index: this.#namespaces,
      key: (view) => keyOf(view.namespace, view.name),
      unavailable: (key, why) => {
        const [namespace, name] = splitKey(key);
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

  /** What the cache's entries cost the heap, as counted (plain entries and annotations). */
  get bytes(): number {
    return this.#cache.bytes;
  }

  /** The annotations kept beyond the plain entries, as counted against the budget: a namespace's, or all of them. */
  budgeted(namespace?: string): number {
    return this.#cache.held(namespace);
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
