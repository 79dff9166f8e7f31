// Self-managed certificates: the webhook keeps its own CA and serving certificate in a Secret
// that every replica shares (layout and plan: certificate-state.ts), and keeps the caBundle of its
// MutatingWebhookConfiguration current (ca-bundle.ts).
//
// A rotation never drops a request: the new CA joins the caBundle first; only after
// --cert-propagation-seconds does any replica serve the new certificate; the old CA stays in
// the bundle until it expires, by which time every replica serves the new one. Writers use
// optimistic concurrency on resourceVersion, so of replicas racing, one wins and the others
// adopt its certificates. No CA key is stored: each rotation makes a fresh CA.

import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ConfigError, WebhookError } from '../errors.ts';
import { apiPath, type KubeApi } from '../kube/api.ts';
import { ListWatch, statusOf } from '../kube/list-watch.ts';
import { CONFLICT_RETRIES, syncCaBundle } from './ca-bundle.ts';
import {
  applyPlan,
  fingerprint,
  parseState,
  planFor,
  secretFor,
  type Plan,
  type State,
  type Timing,
} from './certificate-state.ts';
import type { KeyPair } from './reloader.ts';

interface CertificateManagerOptions {
  api: KubeApi;
  log: Logger;
  namespace: string;
  secretName: string;
  /** MutatingWebhookConfiguration whose caBundle is kept current; none: only the Secret is managed. */
  webhookConfiguration?: string;
  /** DNS names and IP addresses the serving certificate covers. */
  hosts: readonly string[];
  validitySeconds: number;
  renewBeforeSeconds: number;
  propagationSeconds: number;
  resyncSeconds: number;
}

export class CertificateManager {
  readonly #o: CertificateManagerOptions;
  readonly #api: KubeApi;
  readonly #secretPath: string;
  readonly #watch: ListWatch;
  readonly #configWatch: ListWatch | undefined;
  #serving: KeyPair | undefined;
  #listeners: ((pair: KeyPair) => void)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(options: CertificateManagerOptions) {
    this.#o = options;
    this.#api = options.api;
    const { namespace, secretName } = options;
    this.#secretPath = apiPath('api', 'v1', 'namespaces', namespace, 'secrets', secretName);
    // The one Secret, by name: a change by another replica (a rotation, a replacement) is
    // reconciled at once rather than at the next resync. Its contents are read afresh there.
    this.#watch = new ListWatch({
      api: options.api,
      log: options.log,
      what: 'certificate Secret',
      path: apiPath('api', 'v1', 'namespaces', namespace, 'secrets'),
      query: { fieldSelector: `metadata.name=${secretName}` },
      onList: (items) => {
        if (items.length > 0) this.#trigger();
      },
      onEvent: (type) => {
        if (type !== 'DELETED') this.#trigger();
      },
    });
    // The webhook configuration too, by name: an entry added later (helm upgrade, kubectl apply)
    // arrives without a caBundle, and is given one at once rather than at the next resync.
    const configuration = options.webhookConfiguration;
    if (configuration) {
      this.#configWatch = new ListWatch({
        api: options.api,
        log: options.log,
        what: 'MutatingWebhookConfiguration',
        path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
        query: { fieldSelector: `metadata.name=${configuration}` },
        // start() has just reconciled; a relist after a failure reconciles again.
        onList: (items) => {
          if (items.length > 0 && this.#serving) this.#trigger();
        },
        onEvent: (type) => {
          if (type !== 'DELETED') this.#trigger();
        },
      });
    }
  }

  /** Fills the Secret if needed and returns the pair to serve; then keeps it current. */
  async start(): Promise<KeyPair> {
    await this.#reconcile(true);
    void this.#watch.start();
    void this.#configWatch?.start();
    // biome-ignore lint/style/noNonNullAssertion: #reconcile(true) sets it or throws.
    return this.#serving!;
  }

  /** Called with each new serving pair (a rotation was promoted, or another replica replaced it). */
  onChange(listener: (pair: KeyPair) => void): void {
    this.#listeners.push(listener);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#watch.stop();
    this.#configWatch?.stop();
  }

  /** Runs reconciles one at a time; a trigger during a run causes exactly one more run. */
  #trigger(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#reconcile(false)
      .catch((err: Error) => {
        this.#o.log.warn({ err, secret: this.#o.secretName }, 'certificate reconcile failed; retrying');
        this.#schedule(Math.min(5_000, this.#o.resyncSeconds * 1000));
      })
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.#trigger();
        }
      });
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#trigger(), Math.max(100, delayMs));
    this.#timer.unref();
  }

  async #reconcile(first: boolean): Promise<void> {
    const o = this.#o;
    const timing = { renewBeforeMs: o.renewBeforeSeconds * 1000, propagationMs: o.propagationSeconds * 1000 };
    let state: State | undefined;
    for (let attempt = 0; ; attempt++) {
      const secret = await this.#readSecret(first);
      state = parseState(secret);
      const plan = planFor(state, o.hosts, timing);
      if (plan.action === 'none') break;
      const written = await this.#write(state, plan);
      if (written) {
        state = written;
        break;
      }
      // 409: another replica wrote first; its result is re-read and re-planned.
      if (attempt >= CONFLICT_RETRIES)
        throw new WebhookError('WIW_CERT_CONFLICT', `Secret ${o.namespace}/${o.secretName} kept changing under us`);
      o.log.info({ secret: o.secretName }, 'certificate Secret changed by another replica; adopting its contents');
    }

    if (o.webhookConfiguration) {
      const added = await syncCaBundle(this.#api, o.webhookConfiguration, state, o.log);
      if (added && state.next) {
        // The pending CA reached the API server only now (its writer may have died before
        // patching): count the propagation time from here.
        state = (await this.#write(state, { action: 'none' }, Date.now())) ?? state;
      }
    }

    // biome-ignore lint/style/noNonNullAssertion: After the write above the state has a current pair (a missing one is generated).
    const current = state.current!;
    if (this.#serving?.cert !== current.cert) {
      const previous = this.#serving;
      this.#serving = { cert: current.cert, key: current.key };
      if (previous) {
        o.log.info(
          { fingerprint: fingerprint(current.x509), notAfter: current.x509.validTo },
          'serving the new certificate',
        );
        for (const listener of this.#listeners) listener(this.#serving);
      }
    }

    this.#schedule(this.#nextWakeMs(state, timing));
  }

  #nextWakeMs(state: State, timing: Timing): number {
    const now = Date.now();
    const resync = this.#o.resyncSeconds * 1000;
    const deadlines = [now + resync];
    if (state.next && state.nextSince !== undefined) deadlines.push(state.nextSince + timing.propagationMs);
    else if (state.current) deadlines.push(state.current.notAfter - timing.renewBeforeMs);
    return Math.min(...deadlines) - now;
  }

  async #readSecret(first: boolean): Promise<V1Secret> {
    const { namespace, secretName } = this.#o;
    try {
      return await this.#api.request<V1Secret>('GET', this.#secretPath);
    } catch (err) {
      const code = statusOf(err);
      if (first && code === 404) {
        throw new ConfigError(
          `--cert-secret: Secret ${namespace}/${secretName} does not exist; create it empty (the chart does) and start again`,
        );
      }
      if (first && code === 403) {
        throw new ConfigError(
          `--cert-secret: no permission to read Secret ${namespace}/${secretName}; grant get, list, watch and update on it`,
        );
      }
      throw err;
    }
  }

  /** Writes the planned change with the read resourceVersion; undefined on a conflict. */
  async #write(state: State, plan: Plan, touchNextSince?: number): Promise<State | undefined> {
    const o = this.#o;
    const contents = await applyPlan(state, plan, o, Date.now(), touchNextSince);
    let saved: V1Secret;
    try {
      saved = await this.#api.request<V1Secret>('PUT', this.#secretPath, { body: secretFor(state.secret, contents) });
    } catch (err) {
      if (statusOf(err) === 409) return undefined;
      throw err;
    }
    const { bundle, current, next } = contents;
    const fields = {
      secret: `${o.namespace}/${o.secretName}`,
      serving: fingerprint(current.x509),
      next: next && fingerprint(next.x509),
      caBundle: bundle.map(fingerprint),
    };
    if (plan.action === 'replace') o.log.info({ ...fields, why: plan.why }, 'created a CA and serving certificate');
    else if (plan.action === 'start-rotation')
      o.log.info(fields, 'certificate rotation started: new CA published, not served yet');
    else if (plan.action === 'promote') o.log.info(fields, 'certificate rotation: new certificate promoted');
    else if (plan.action === 'drop-next') o.log.warn({ ...fields, why: plan.why }, 'dropped the pending certificate');
    else if (touchNextSince !== undefined)
      o.log.info(fields, 'pending CA published to the caBundle just now; propagation counted from now');
    return parseState(saved);
  }
}
