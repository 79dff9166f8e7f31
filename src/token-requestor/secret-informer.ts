import { apiPath, type KubeApi } from '../kube/api.ts';
import { ListWatch } from '../kube/list-watch.ts';
import type { Logger } from 'pino';
import { readTokenClaims, type TokenClaims } from './schedule.ts';
import { secretShapeError } from '../admission/secrets.ts';
import { MAX_SECRET_TOKEN_BYTES } from '../bounds.ts';
import { RENEW_ANNOTATION, SECRET_LABELS, SERVICE_ACCOUNT_ANNOTATION, TOKEN_PATH_ANNOTATION } from '../model.ts';

/**
 * What the requestor keeps of a labelled Secret: identity, the labels that select it, the
 * annotations it reads, `config` and the claims of its token, each within the sizes admission
 * holds them to (src/bounds.ts). The token itself and every other key are dropped on arrival, so a
 * Secret's author cannot make the requestor hold more than about 64 KiB per Secret.
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
  /**
   * Why admission would refuse to read the Secret at all (a value over its size): then no
   * annotation and no config are kept, and the requestor refuses it with that message.
   */
  unreadable?: string;
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

/** The annotations the Secret core reads; the renew annotation is read for its presence only. */
const READ_ANNOTATIONS = [SERVICE_ACCOUNT_ANNOTATION, TOKEN_PATH_ANNOTATION];

function pick(given: Record<string, string> | null | undefined, keys: readonly string[]): Record<string, string> {
  const kept: Record<string, string> = {};
  if (!given) return kept;
  for (const key of keys) if (Object.hasOwn(given, key) && typeof given[key] === 'string') kept[key] = given[key];
  return kept;
}

export function trackSecret(raw: Raw): TrackedSecret | undefined {
  const m = raw.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const token = raw.data?.token;
  const base = {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    labels: pick(m.labels, SECRET_LABELS),
  };
  // Admission's own check of what the Secret core reads, sizes included: a Secret it would refuse
  // keeps only why, and the requestor refuses it with admission's message.
  const shape = secretShapeError(raw);
  if (shape)
    return {
      ...base,
      annotations: {},
      config: undefined,
      claims: undefined,
      unreadable: `the Secret cannot be read: ${shape}`,
    };
  const annotations = pick(m.annotations, READ_ANNOTATIONS);
  // Its value, any length, is not kept.
  if (m.annotations && Object.hasOwn(m.annotations, RENEW_ANNOTATION)) annotations[RENEW_ANNOTATION] = '';
  const config = raw.data?.config;
  return {
    ...base,
    annotations,
    config,
    // A token too long to be one a TokenRequest returns is no token of ours: not decoded, replaced.
    claims:
      token && token.length <= (MAX_SECRET_TOKEN_BYTES * 4) / 3
        ? readTokenClaims(Buffer.from(token, 'base64').toString('utf8'))
        : undefined,
  };
}

export interface SecretInformerOptions {
  /** Shared by every informer of a term: over HTTP/2 their watches share a few connections. */
  api: KubeApi;
  labelSelector: string;
  /** One namespace (namespace-scoped access); undefined: every namespace (cluster-wide access). */
  namespace?: string;
  /**
   * A cluster-wide watch serving some namespaces only: a Secret of any other is dropped on
   * arrival, so it costs no memory and gets no token. Undefined: every namespace.
   */
  served?: ReadonlySet<string>;
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
  readonly #o: Required<Omit<SecretInformerOptions, 'namespace' | 'served'>>;
  readonly #served: ReadonlySet<string> | undefined;
  readonly #listWatch: ListWatch;
  readonly #keys = new Set<string>();

  constructor(options: SecretInformerOptions) {
    const { namespace, served, ...rest } = options;
    this.#o = { watchIdleTimeoutMs: 90_000, ...rest };
    this.#served = served;
    this.#listWatch = new ListWatch({
      api: options.api,
      what: 'labelled Secret',
      path: namespace === undefined ? '/api/v1/secrets' : apiPath('api', 'v1', 'namespaces', namespace, 'secrets'),
      query: { labelSelector: options.labelSelector },
      // Slimmed as each arrives: a list never holds the Secrets whole (their tokens, other keys).
      keep: (raw) => this.#track(raw as Raw),
      onList: (kept) => {
        const items = kept as TrackedSecret[];
        const seen = new Set(items.map((s) => `${s.namespace}/${s.name}`));
        for (const key of this.#keys) if (!seen.has(key)) this.#emit(key, undefined);
        for (const s of items) this.#emit(`${s.namespace}/${s.name}`, s);
        this.#o.log.info({ secrets: items.length, namespace }, 'labelled Secrets listed');
      },
      onEvent: (type, obj) => {
        const tracked = this.#track(obj as Raw);
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

  /** What is kept of a Secret: nothing outside the served namespaces. */
  #track(raw: Raw): TrackedSecret | undefined {
    const namespace = raw.metadata?.namespace;
    if (this.#served && (namespace === undefined || !this.#served.has(namespace))) return undefined;
    return trackSecret(raw);
  }

  #emit(key: string, secret: TrackedSecret | undefined): void {
    if (secret) this.#keys.add(key);
    else this.#keys.delete(key);
    this.#o.onChange(key, secret);
  }
}
