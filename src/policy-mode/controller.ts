// The policy mode's controller: watches ServiceAccounts and keeps each namespace's parameter object
// (./parameters.ts) current, written with server-side apply; a ServiceAccount change reaches its
// namespace's object after a short debounce. Leader election is the caller's (./run.ts): one
// writer at a time.
import type { Logger } from 'pino';
import type { AnnotationBound } from '../annotation-bounds.ts';
import type { PodProvider } from '../clouds/types.ts';
import { apiPath, type KubeApi } from '../kube/api.ts';
import { ListWatch } from '../kube/list-watch.ts';
import { type RawServiceAccount, slimServiceAccount } from '../kube/serviceaccount-cache.ts';
import type { ServiceAccountView } from '../kube/types.ts';
import type { InjectionPolicy } from '../policy/gate.ts';
import { renderParameters, MAX_PARAMETERS_BYTES, type LeftOut } from './parameters.ts';
import {
  PARAMETERS_GROUP,
  PARAMETERS_NAME,
  PARAMETERS_PLURAL,
  PARAMETERS_VERSION,
  parametersObject,
} from './policy.ts';

const FIELD_MANAGER = 'workload-identity-webhook';

export interface ParametersControllerOptions {
  api: KubeApi;
  providers: readonly PodProvider[];
  /** The ServiceAccount annotations the providers read: all the watch keeps of each. */
  annotations: readonly AnnotationBound[];
  /** Tenant policy's judgement for a namespace (undefined: none in force). */
  judge?: (namespace: string) => Promise<InjectionPolicy | undefined>;
  /**
   * Tenant policy's current set (a new object whenever a policy changes): polled every
   * `policyPollMs`, a change renders every namespace again.
   */
  policyVersion?: () => unknown;
  policyPollMs?: number;
  /**
   * Every namespace is rendered again this often (what a judgement reads besides the policies,
   * a namespace's labels, has no event here); only a changed object is written.
   */
  resyncMs?: number;
  log: Logger;
  /** How long changes gather before a namespace is rendered (default 200 ms). */
  debounceMs?: number;
  /** A failed write is retried after this long (default 5 s). */
  retryMs?: number;
  budget?: number;
}

export class ParametersController {
  readonly #o: Required<Omit<ParametersControllerOptions, 'judge' | 'policyVersion'>> &
    Pick<ParametersControllerOptions, 'judge' | 'policyVersion'>;
  readonly #byNamespace = new Map<string, Map<string, ServiceAccountView>>();
  /** What was last written per namespace: an unchanged rendering is not written again. */
  readonly #written = new Map<string, string>();
  /** Why each ServiceAccount is left out ("ns/name"), as last reported: an Event once per reason. */
  readonly #reported = new Map<string, string>();
  #poll: NodeJS.Timeout | undefined;
  #resync: NodeJS.Timeout | undefined;
  readonly #dirty = new Set<string>();
  readonly #watch: ListWatch;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #stopped = false;
  /** Writes done, for tests and the log. */
  writes = 0;

  constructor(options: ParametersControllerOptions) {
    this.#o = {
      debounceMs: 200,
      retryMs: 5000,
      budget: MAX_PARAMETERS_BYTES,
      policyPollMs: 1000,
      resyncMs: 30_000,
      ...options,
    };
    this.#watch = new ListWatch({
      api: options.api,
      what: 'ServiceAccount',
      path: '/api/v1/serviceaccounts',
      // The watch of /api/v1/serviceaccounts: the API server's ServiceAccounts.
      keep: (raw) => slimServiceAccount(raw as RawServiceAccount, options.annotations),
      log: options.log,
      onList: (items) => this.#onList(items as (ServiceAccountView | undefined)[]),
      onEvent: (type, obj) => this.#onEvent(type, obj),
    });
  }

  /** Lists, renders every namespace, then keeps them current; resolves after the first list. */
  start(): Promise<void> {
    const { policyVersion } = this.#o;
    if (policyVersion) {
      let seen = policyVersion();
      this.#poll = setInterval(() => {
        const now = policyVersion();
        if (now === seen) return;
        seen = now;
        this.renderAll();
      }, this.#o.policyPollMs);
    }
    this.#resync = setInterval(() => this.renderAll(), this.#o.resyncMs);
    return this.#watch.start();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#poll);
    clearInterval(this.#resync);
    clearTimeout(this.#timer);
    this.#watch.stop();
    await this.#flushing;
  }

  /** Renders every namespace again (tenant policy changed). */
  renderAll(): void {
    for (const ns of this.#byNamespace.keys()) this.#dirty.add(ns);
    this.#schedule(0);
  }

  #onList(items: (ServiceAccountView | undefined)[]): void {
    const before = new Set(this.#byNamespace.keys());
    this.#byNamespace.clear();
    for (const sa of items) if (sa) this.#accounts(sa.namespace).set(sa.name, sa);
    for (const ns of new Set([...before, ...this.#byNamespace.keys()])) this.#dirty.add(ns);
    this.#schedule(0);
  }

  #onEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: unknown): void {
    const sa = slimServiceAccount(obj as RawServiceAccount, this.#o.annotations);
    if (!sa) return;
    const accounts = this.#accounts(sa.namespace);
    const before = accounts.get(sa.name);
    if (type === 'DELETED') accounts.delete(sa.name);
    else accounts.set(sa.name, sa);
    // Only what the providers read counts: a label or another annotation changes nothing.
    if (type !== 'DELETED' && before && sameView(before, sa)) return;
    this.#dirty.add(sa.namespace);
    this.#schedule(this.#o.debounceMs);
  }

  #accounts(namespace: string): Map<string, ServiceAccountView> {
    let m = this.#byNamespace.get(namespace);
    if (!m) {
      m = new Map();
      this.#byNamespace.set(namespace, m);
    }
    return m;
  }

  #schedule(delayMs: number): void {
    if (this.#stopped || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      // One flush at a time: the running one schedules another for what turned dirty meanwhile.
      if (this.#flushing) return;
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = undefined;
        if (this.#dirty.size > 0) this.#schedule(this.#o.debounceMs);
      });
    }, delayMs);
  }

  /** Renders and writes the dirty namespaces, one at a time; a failed one is tried again later. */
  async #flush(): Promise<void> {
    const namespaces = [...this.#dirty];
    this.#dirty.clear();
    for (const ns of namespaces) {
      if (this.#stopped) return;
      try {
        await this.#write(ns);
      } catch (err) {
        // A namespace being deleted takes its object with it: nothing to retry. (A missing CRD is
        // a 404 too, but not this one: it is retried and logged.)
        if (/being terminated|namespaces? "[^"]*" not found/.test(String(err))) continue;
        this.#o.log.warn({ err, namespace: ns }, 'could not write the policy parameters; trying again');
        setTimeout(() => {
          this.#dirty.add(ns);
          this.#schedule(0);
        }, this.#o.retryMs).unref();
      }
    }
  }

  /**
   * A ServiceAccount left out gets a warning in the log and an Event on itself, once per reason; an
   * Event that cannot be written is logged, never retried (the log line stands).
   */
  async #report(namespace: string, leftOut: readonly LeftOut[]): Promise<void> {
    const now = new Set<string>();
    for (const l of leftOut) {
      const key = `${namespace}/${l.serviceAccount}`;
      now.add(key);
      if (this.#reported.get(key) === l.reason) continue;
      this.#reported.set(key, l.reason);
      this.#o.log.warn(
        { namespace, serviceAccount: l.serviceAccount, reason: l.reason },
        'a ServiceAccount is left out of the policy parameters: its Pods get no identity from the policy',
      );
      await this.#o.api
        .request('POST', apiPath('api', 'v1', 'namespaces', namespace, 'events'), { body: leftOutEvent(namespace, l) })
        .catch((err: Error) => this.#o.log.warn({ err, namespace }, 'could not write the Event'));
    }
    for (const key of this.#reported.keys())
      if (key.startsWith(`${namespace}/`) && !now.has(key)) this.#reported.delete(key);
  }

  async #write(namespace: string): Promise<void> {
    const accounts = [...(this.#byNamespace.get(namespace)?.values() ?? [])];
    const judge = await this.#o.judge?.(namespace);
    const { spec, leftOut, bytes } = renderParameters(this.#o.providers, namespace, accounts, judge, this.#o.budget);
    await this.#report(namespace, leftOut);
    const object = parametersObject(namespace, spec);
    const json = JSON.stringify(object);
    if (this.#written.get(namespace) === json) return;
    const path = apiPath(
      'apis',
      PARAMETERS_GROUP,
      PARAMETERS_VERSION,
      'namespaces',
      namespace,
      PARAMETERS_PLURAL,
      PARAMETERS_NAME,
    );
    await this.#o.api.request('PATCH', path, {
      query: { fieldManager: FIELD_MANAGER, force: true },
      contentType: 'application/apply-patch+yaml',
      // JSON is YAML: the whole object, so the apply owns every field and drops what went.
      body: object,
    });
    this.#written.set(namespace, json);
    this.writes++;
    this.#o.log.debug(
      { namespace, bytes, serviceAccounts: Object.keys(spec.serviceAccounts).length },
      'policy parameters written',
    );
  }
}

/** An Event's message holds at most this many characters (the reason names an annotation and a bound). */
const MAX_EVENT_MESSAGE = 1024;

function leftOutEvent(namespace: string, l: LeftOut): Record<string, unknown> {
  return {
    metadata: { generateName: `${l.serviceAccount.slice(0, 200)}.`, namespace },
    involvedObject: { apiVersion: 'v1', kind: 'ServiceAccount', namespace, name: l.serviceAccount },
    type: 'Warning',
    reason: 'LeftOutOfPolicyParameters',
    message: `its Pods get no identity from the MutatingAdmissionPolicy: ${l.reason}`.slice(0, MAX_EVENT_MESSAGE),
    source: { component: FIELD_MANAGER },
    reportingComponent: FIELD_MANAGER,
    firstTimestamp: new Date().toISOString(),
    lastTimestamp: new Date().toISOString(),
    count: 1,
  };
}

function sameView(a: ServiceAccountView, b: ServiceAccountView): boolean {
  return JSON.stringify([a.annotations, a.oversize]) === JSON.stringify([b.annotations, b.oversize]);
}
