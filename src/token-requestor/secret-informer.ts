import type { KubeConfig } from '@kubernetes/client-node';
import { apiPath } from '../kube/api.ts';
import { kubeApiOf } from '../kube/connect.ts';
import { ListWatch } from '../kube/list-watch.ts';
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
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string> | null;
    annotations?: Record<string, string> | null;
  };
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
  /** One namespace (namespace-scoped access); undefined: every namespace (cluster-wide access). */
  namespace?: string;
  log: Logger;
  /** A Secret added or changed (`secret` set) or gone (undefined). Key: namespace/name. */
  onChange: (key: string, secret: TrackedSecret | undefined) => void;
  /** A watch silent this long (no event, no bookmark) is restarted. */
  watchIdleTimeoutMs?: number;
}

/**
 * The labelled Secrets of one namespace or all, for one label selector: the shared ListWatch (resume,
 * backoff, relist on 410 Gone, idle watchdog) plus the slimming above and change events.
 */
export class SecretInformer {
  readonly #o: Required<Omit<SecretInformerOptions, 'namespace'>>;
  readonly #listWatch: ListWatch;
  readonly #keys = new Set<string>();

  constructor(options: SecretInformerOptions) {
    this.#o = { watchIdleTimeoutMs: 90_000, ...options };
    const { namespace } = options;
    this.#listWatch = new ListWatch({
      api: kubeApiOf(options.kubeConfig),
      what: 'labelled Secret',
      path: namespace === undefined ? '/api/v1/secrets' : apiPath('api', 'v1', 'namespaces', namespace, 'secrets'),
      query: { labelSelector: options.labelSelector },
      onList: (raw) => {
        const items = raw.map((item) => trackSecret(item as Raw)).filter((s): s is TrackedSecret => s !== undefined);
        const seen = new Set(items.map((s) => `${s.namespace}/${s.name}`));
        for (const key of this.#keys) if (!seen.has(key)) this.#emit(key, undefined);
        for (const s of items) this.#emit(`${s.namespace}/${s.name}`, s);
        this.#o.log.info({ secrets: items.length, namespace }, 'labelled Secrets listed');
      },
      onEvent: (type, obj) => {
        const tracked = trackSecret(obj as Raw);
        if (!tracked) return;
        const key = `${tracked.namespace}/${tracked.name}`;
        this.#emit(key, type === 'DELETED' ? undefined : tracked);
      },
      log: options.log,
      watchIdleTimeoutMs: this.#o.watchIdleTimeoutMs,
      pageSize: 200,
    });
  }

  /** Resolves once the first list is in. */
  start(): Promise<void> {
    return this.#listWatch.start();
  }

  stop(): void {
    this.#listWatch.stop();
  }

  #emit(key: string, secret: TrackedSecret | undefined): void {
    if (secret) this.#keys.add(key);
    else this.#keys.delete(key);
    this.#o.onChange(key, secret);
  }
}
