import type { Logger } from 'pino';
import { judgeSecret } from '../admission/judge-secret.ts';
import { denial, type Denial, isDenial, WebhookError } from '../errors.ts';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import { planSecret, type SecretCoreOptions } from '../mutate/secret.ts';
import type { ServiceAccountReference } from '../mutate/secret-reference.ts';
import type { ProviderName } from '../clouds/registry.ts';
import { RENEW_ANNOTATION } from '../model.ts';
import { apiMessage, type RequestorApi } from './api.ts';
import type { RequestorMetrics } from './metrics.ts';
import { readTokenClaims, renewal, renewalFraction } from './schedule.ts';
import type { TrackedSecret } from './secret-informer.ts';
import { WorkQueue } from './work-queue.ts';

export interface TokenRequestorOptions {
  core: SecretCoreOptions;
  api: RequestorApi;
  log: Logger;
  metrics: RequestorMetrics;
  expirationSeconds: number;
  /** The namespaces it serves (its RBAC and admission policy allow no other); empty: all. */
  namespaces?: readonly string[];
  now?: () => number;
  /** Secrets handled at once (default MAX_CONCURRENT_STEPS). */
  concurrency?: number;
}

interface Entry {
  secret: TrackedSecret;
  timer?: NodeJS.Timeout;
  /** Waiting in the work queue. */
  queued: boolean;
  running: boolean;
  again: boolean;
  failures: number;
  lastWarning?: string;
}

/** What admission allows the Secret: the reference, and the audience and provider its config derives. */
interface Judged {
  ref: ServiceAccountReference;
  audience: string;
  provider: ProviderName;
}

/** setTimeout's limit is about 24.8 days; longer waits are re-evaluated after a day. */
const MAX_DELAY_MS = 86_400_000;
const MAX_BACKOFF_MS = 300_000;
/** The API server's minimum token lifetime: what a token that cannot be bound to its Secret gets. */
export const UNBOUND_TOKEN_SECONDS = 600;
/**
 * Secrets handled at once (each reads a ServiceAccount, requests a token, patches the Secret): a
 * new leader's 20,000 are worked through at this pace, the soonest due first, not all at once.
 */
export const MAX_CONCURRENT_STEPS = 8;
/** Refusals that mean a ServiceAccount no longer lends its tokens to this Secret. */
const WITHDRAWN = new Set(['ReferenceNotGranted', 'NamespaceNotServed']);

/**
 * Keeps a fresh token in every Secret carrying the project's label: a TokenRequest for the
 * referenced ServiceAccount with the provider's audience, written to `token`, renewed at about
 * half its lifetime, or at once when the renew annotation is set. Before every token it judges
 * the Secret with admission's own `judgeSecret` (config, reference, grant), reading the target
 * itself: a Secret the webhook would refuse gets no token, with the webhook's message.
 */
export class TokenRequestor {
  readonly #o: TokenRequestorOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #queue: WorkQueue;
  #stopped = false;

  constructor(options: TokenRequestorOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#queue = new WorkQueue(options.concurrency ?? MAX_CONCURRENT_STEPS);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Secrets waiting for their turn (a diagnostic). */
  get waiting(): number {
    return this.#queue.waiting;
  }

  /** From the informer: a Secret added, changed (secret set) or deleted (undefined). */
  onChange(key: string, secret: TrackedSecret | undefined): void {
    if (this.#stopped) return;
    const entry = this.#entries.get(key);
    if (!secret) {
      if (entry) clearTimeout(entry.timer);
      this.#entries.delete(key);
    } else if (entry) {
      // A uid change is a new Secret under the same name: start over.
      if (entry.secret.uid !== secret.uid) entry.failures = 0;
      entry.secret = secret;
    } else {
      this.#entries.set(key, { secret, queued: false, running: false, again: false, failures: 0 });
    }
    this.#o.metrics.secrets.set(this.#entries.size);
    if (secret) this.#reconcile(key);
  }

  stop(): void {
    this.#stopped = true;
    this.#queue.stop();
    for (const entry of this.#entries.values()) clearTimeout(entry.timer);
    this.#entries.clear();
    this.#o.metrics.secrets.set(0);
  }

  /** Queues the Secret's next step (once), in order of when its token is due. */
  #reconcile(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry || this.#stopped) return;
    if (entry.running) {
      entry.again = true;
      return;
    }
    if (entry.queued) return;
    entry.queued = true;
    this.#queue.add(dueEstimate(entry.secret), () => this.#run(key, entry));
  }

  async #run(key: string, entry: Entry): Promise<void> {
    entry.queued = false;
    if (this.#stopped || this.#entries.get(key) !== entry) return;
    entry.running = true;
    clearTimeout(entry.timer);
    try {
      await this.#step(key, entry);
    } catch (err) {
      this.#o.log.error({ secret: key, err }, 'token requestor step failed');
      this.#backoff(key, entry);
    } finally {
      entry.running = false;
      if (entry.again && this.#entries.get(key) === entry) {
        entry.again = false;
        this.#reconcile(key);
      }
    }
  }

  async #step(key: string, entry: Entry): Promise<void> {
    // The Secret as this step found it: the informer may bring a newer one while it awaits.
    const s = entry.secret;
    const judged = await this.#judge(key, entry, s);
    if (!judged) return;
    const { ref, audience, provider } = judged;
    const subject = `system:serviceaccount:${ref.namespace}:${ref.name}`;
    // The API server binds a token only to a Secret of the ServiceAccount's own namespace, so a
    // cross-namespace token cannot be bound: it gets the shortest lifetime instead, and a
    // withdrawn grant ends it within UNBOUND_TOKEN_SECONDS (the admission policy enforces both).
    const bound = ref.namespace === s.namespace && s.uid !== '';
    const expirationSeconds = bound
      ? this.#o.expirationSeconds
      : Math.min(this.#o.expirationSeconds, UNBOUND_TOKEN_SECONDS);
    const plan = () =>
      renewal({
        claims: entry.secret.claims,
        subject,
        audience,
        expirationSeconds,
        now: this.#now() / 1000,
        jitterSeed: entry.secret.uid,
        forced: entry.secret.annotations[RENEW_ANNOTATION] !== undefined,
      });
    const due = plan();
    if (!due.now) return this.#schedule(key, entry, due.at * 1000 - this.#now());

    const token = await this.#requestToken(key, entry, ref, {
      audience,
      expirationSeconds,
      boundSecret: bound ? { name: s.name, uid: s.uid } : undefined,
    });
    if (token === undefined || this.#stopped || this.#entries.get(key) !== entry) return;
    if (!(await this.#writeToken(key, entry, s, token, due.reason === 'forced'))) return;
    entry.failures = 0;
    entry.lastWarning = undefined;
    this.#o.metrics.issued.inc({ provider, reason: due.reason });
    const claims = entry.secret.claims;
    this.#o.log.info(
      {
        secret: key,
        serviceAccount: `${ref.namespace}/${ref.name}`,
        audience,
        reason: due.reason,
        expiresAt: claims?.exp ? new Date(claims.exp * 1000).toISOString() : undefined,
      },
      'token written',
    );
    const next = plan();
    this.#schedule(key, entry, next.now ? 1000 : next.at * 1000 - this.#now());
  }

  /**
   * Admission's verdict on the Secret, the target read by the requestor itself: the reference
   * and what the provider derives, or undefined when this step ends here (refused, backed off, or
   * not the project's Secret).
   */
  async #judge(key: string, entry: Entry, s: TrackedSecret): Promise<Judged | undefined> {
    if (s.unreadable) {
      // Kept as a marker: refused as admission refuses it (a Warning event, a log line).
      await this.#refuse(key, entry, denial('MalformedObject', s.unreadable));
      return undefined;
    }
    const secret: Secret = {
      metadata: { name: s.name, namespace: s.namespace, labels: s.labels, annotations: s.annotations },
      data: s.config === undefined ? {} : { config: s.config },
    };
    const planned = planSecret(secret, s.namespace);
    if (isDenial(planned)) {
      await this.#refuse(key, entry, planned);
      return undefined;
    }
    // Gardener's token requestor writes Secrets that carry only Gardener's labels.
    if (!planned.selection?.project) return undefined;
    const verdict = await judgeSecret(this.#o.core, planned, {
      serviceAccount: (namespace, name) => this.#readReferenced(key, namespace, name),
    });
    if (!verdict.allowed) {
      // Not read (logged and counted by the read): try again later rather than refuse.
      if (verdict.denial.reason === 'ServiceAccountUnavailable') this.#backoff(key, entry);
      else await this.#refuse(key, entry, verdict.denial);
      return undefined;
    }
    if (!verdict.selected || !verdict.reference) return undefined;
    const { audience, provider } = verdict.derivation;
    return { ref: verdict.reference, audience, provider };
  }

  /** A TokenRequest; undefined when it failed (warned, and backed off). */
  async #requestToken(
    key: string,
    entry: Entry,
    ref: ServiceAccountReference,
    request: { audience: string; expirationSeconds: number; boundSecret: { name: string; uid: string } | undefined },
  ): Promise<string | undefined> {
    try {
      return await this.#o.api.requestToken({ namespace: ref.namespace, name: ref.name, ...request });
    } catch (err) {
      this.#o.metrics.failures.inc({ stage: 'tokenrequest' });
      await this.#warn(
        entry,
        'TokenRequestFailed',
        `TokenRequest for ServiceAccount ${ref.namespace}/${ref.name} failed: ${apiMessage(err)}`,
      );
      this.#backoff(key, entry);
      return undefined;
    }
  }

  /** Writes the token into the Secret at the version this step read; false when it was not written. */
  async #writeToken(key: string, entry: Entry, s: TrackedSecret, token: string, forced: boolean): Promise<boolean> {
    try {
      const resourceVersion = await this.#o.api.writeToken(s, token, forced);
      const annotations = { ...entry.secret.annotations };
      if (forced) delete annotations[RENEW_ANNOTATION];
      entry.secret = { ...entry.secret, resourceVersion, annotations, claims: readTokenClaims(token) };
      return true;
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 404) return false; // deleted; the watch removes it
      if (code === 409) {
        // Someone wrote in between: the watch brings the new version; check again soon regardless.
        this.#schedule(key, entry, 1000);
        return false;
      }
      this.#o.metrics.failures.inc({ stage: 'write' });
      await this.#warn(entry, 'TokenWriteFailed', `writing the token failed: ${apiMessage(err)}`);
      this.#backoff(key, entry);
      return false;
    }
  }

  /** The target of a cross-namespace reference, only in the namespaces this requestor serves. */
  async #readReferenced(
    key: string,
    namespace: string,
    name: string,
  ): Promise<ServiceAccountView | undefined | Denial> {
    const served = this.#o.namespaces ?? [];
    if (served.length && !served.includes(namespace)) {
      return denial(
        'NamespaceNotServed',
        `ServiceAccount ${namespace}/${name} is in namespace ${namespace}, which the token requestor does not serve (it serves ${served.join(', ')}; tokenRequestor.namespaces in the chart)`,
      );
    }
    try {
      return await this.#o.api.readServiceAccount(namespace, name);
    } catch (err) {
      this.#o.metrics.failures.inc({ stage: 'serviceaccount' });
      this.#o.log.warn(
        { secret: key, serviceAccount: `${namespace}/${name}`, err },
        'cannot read the referenced ServiceAccount',
      );
      throw new WebhookError(
        'WIW_SERVICEACCOUNT_UNAVAILABLE',
        `ServiceAccount ${namespace}/${name} cannot be read: ${apiMessage(err)}`,
      );
    }
  }

  async #refuse(key: string, entry: Entry, d: Denial): Promise<void> {
    this.#o.metrics.refused.inc({ reason: d.reason });
    this.#o.log.warn(
      { secret: key, reason: d.reason, message: d.message },
      'no token: the webhook would refuse this Secret',
    );
    await this.#warn(entry, 'TokenRefused', `no token issued: ${d.message}`);
    if (WITHDRAWN.has(d.reason)) await this.#removeToken(key, entry);
    // A grant may be added to the ServiceAccount later, which raises no event on the Secret.
    this.#backoff(key, entry);
  }

  /**
   * A withdrawn grant: the token still in the Secret cannot be revoked (a cross-namespace token
   * is not bound to it; it expires within UNBOUND_TOKEN_SECONDS), but Pods that mount the Secret
   * and readers of it stop getting it now.
   */
  async #removeToken(key: string, entry: Entry): Promise<void> {
    const exp = entry.secret.claims?.exp;
    if (exp === undefined || exp * 1000 <= this.#now()) return;
    try {
      const resourceVersion = await this.#o.api.writeToken(entry.secret, null, false);
      entry.secret = { ...entry.secret, resourceVersion, claims: undefined };
      this.#o.log.info({ secret: key }, 'token removed: the reference is no longer granted');
    } catch (err) {
      // 409/404: the watch brings the new state; the next refusal tries again.
      this.#o.log.warn({ secret: key, err }, 'could not remove the token');
    }
  }

  async #warn(entry: Entry, reason: string, message: string): Promise<void> {
    const fingerprint = `${reason}:${message}`;
    if (entry.lastWarning === fingerprint) return;
    entry.lastWarning = fingerprint;
    try {
      await this.#o.api.warn(entry.secret, reason, message);
    } catch (err) {
      this.#o.log.warn({ secret: `${entry.secret.namespace}/${entry.secret.name}`, err }, 'could not record an event');
    }
  }

  #backoff(key: string, entry: Entry): void {
    entry.failures++;
    const base = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(entry.failures, 10));
    this.#schedule(key, entry, base / 2 + Math.random() * (base / 2));
  }

  #schedule(key: string, entry: Entry, delayMs: number): void {
    if (this.#stopped || this.#entries.get(key) !== entry) return;
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => this.#reconcile(key), Math.max(0, Math.min(delayMs, MAX_DELAY_MS)));
    entry.timer.unref?.();
  }
}

/**
 * When the Secret's token is due by its claims alone (seconds since the epoch), to order the work
 * queue: 0 (first) for a missing or unreadable token or a renewal asked for. The step itself
 * decides, with the judged subject and audience.
 */
export function dueEstimate(s: TrackedSecret): number {
  const { claims } = s;
  if (s.annotations[RENEW_ANNOTATION] !== undefined || claims?.iat === undefined || claims.exp === undefined) return 0;
  if (claims.exp <= claims.iat) return 0;
  return claims.iat + (claims.exp - claims.iat) * renewalFraction(s.uid, claims.iat);
}
