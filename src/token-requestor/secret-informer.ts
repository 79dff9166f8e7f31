import { CoreV1Api, Watch, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { readTokenClaims, type TokenClaims } from './schedule.ts';

/**
 * What the requestor keeps of a labelled Secret: identity, labels, annotations, `config` and the
 * claims of its token. The token itself and every other data key are dropped on arrival.
 */
export interface TrackedSecret {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** `data.config`, base64 as stored. */
  config: string | undefined;
  claims: TokenClaims | undefined;
}

type Raw = {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string> | null; annotations?: Record<string, string> | null };
  data?: Record<string, string> | null;
};

export function trackSecret(raw: Raw): TrackedSecret | undefined {
  const m = raw.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const token = raw.data?.token;
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    labels: { ...m.labels },
    annotations: { ...m.annotations },
    config: raw.data?.config,
    claims: token ? readTokenClaims(Buffer.from(token, 'base64').toString('utf8')) : undefined,
  };
}

export interface SecretInformerOptions {
  kubeConfig: KubeConfig;
  labelSelector: string;
  log: Logger;
  /** A Secret added or changed (`secret` set) or gone (undefined). Key: namespace/name. */
  onChange: (key: string, secret: TrackedSecret | undefined) => void;
  /** A watch silent this long (no event, no bookmark) is restarted. */
  watchIdleTimeoutMs?: number;
}

/**
 * List, then watch from the list's resourceVersion, cluster-wide, for one label selector. A watch
 * that ends is resumed; one that errors is retried with backoff; 410 Gone relists.
 */
export class SecretInformer {
  readonly #o: Required<SecretInformerOptions>;
  readonly #api: CoreV1Api;
  readonly #watch: Watch;
  readonly #keys = new Set<string>();
  #resourceVersion = '';
  #stopped = false;
  #abort: AbortController | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #synced: (() => void) | undefined;

  constructor(options: SecretInformerOptions) {
    this.#o = { watchIdleTimeoutMs: 90_000, ...options };
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#watch = new Watch(options.kubeConfig);
  }

  /** Resolves once the first list is in. */
  start(): Promise<void> {
    const synced = new Promise<void>((resolve) => (this.#synced = resolve));
    void this.#run();
    return synced;
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
      if (!this.#resourceVersion) await this.#list();
      await this.#startWatch();
    } catch (err) {
      this.#retry(err);
    }
  }

  async #list(): Promise<void> {
    const seen = new Set<string>();
    const items = [];
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.#api.listSecretForAllNamespaces({ labelSelector: this.#o.labelSelector, limit: 200, _continue: cont });
      for (const item of page.items) {
        const tracked = trackSecret(item as Raw);
        if (tracked) items.push(tracked);
      }
      cont = page.metadata?._continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);
    if (this.#stopped) return;
    for (const s of items) seen.add(`${s.namespace}/${s.name}`);
    for (const key of this.#keys) if (!seen.has(key)) this.#emit(key, undefined);
    for (const s of items) this.#emit(`${s.namespace}/${s.name}`, s);
    this.#resourceVersion = rv;
    this.#o.log.info({ secrets: items.length }, 'labelled Secrets listed');
    this.#synced?.();
    this.#synced = undefined;
  }

  #emit(key: string, secret: TrackedSecret | undefined): void {
    if (secret) this.#keys.add(key);
    else this.#keys.delete(key);
    this.#o.onChange(key, secret);
  }

  async #startWatch(): Promise<void> {
    if (this.#stopped) return;
    let ended = false;
    const onEnd = (err: unknown) => {
      if (ended) return;
      ended = true;
      clearTimeout(this.#idleTimer);
      if (this.#stopped) return;
      const status = (err as { statusCode?: number; code?: number } | null)?.statusCode ?? (err as { code?: number } | null)?.code;
      if (err && status === 410) {
        this.#resourceVersion = '';
        this.#schedule(0);
      } else if (err && (err as Error).name !== 'AbortError') {
        this.#retry(err);
      } else {
        this.#schedule(0); // closed by the server or the client library's own timeout: resume
      }
    };
    this.#armIdle();
    this.#abort = await this.#watch.watch(
      '/api/v1/secrets',
      { labelSelector: this.#o.labelSelector, allowWatchBookmarks: true, resourceVersion: this.#resourceVersion },
      (phase, obj) => {
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
        if (phase === 'BOOKMARK') return;
        const tracked = trackSecret(obj as Raw);
        if (!tracked) return;
        this.#emit(`${tracked.namespace}/${tracked.name}`, phase === 'DELETED' ? undefined : tracked);
      },
      onEnd,
    );
  }

  #armIdle(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      this.#o.log.warn({ idleMs: this.#o.watchIdleTimeoutMs }, 'Secret watch silent; restarting it');
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
  }

  #retry(err: unknown): void {
    if (this.#stopped) return;
    this.#backoffMs = Math.min(30_000, this.#backoffMs ? this.#backoffMs * 2 : 250);
    const delay = this.#backoffMs / 2 + Math.random() * (this.#backoffMs / 2);
    this.#o.log.warn({ err: (err as Error)?.message ?? String(err), retryInMs: Math.round(delay) }, 'Secret list/watch failed; retrying');
    this.#schedule(delay);
  }
}
