import type { Logger } from 'pino';
import { type KubeApi, apiPath } from './api.ts';
import { statusOf } from './list-watch.ts';

/**
 * Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it: one
 * holder at a time; a lease is taken over only after it went unrenewed for its whole duration
 * as measured on this process's own clock (so clock skew between replicas does not matter); a
 * leader that cannot renew within the renew deadline stops leading before anyone else may
 * start. On stop, the lease is released so a standby takes over at once. The token requestor
 * elects its writer with it, and `serve` the replica that counts the Pods that slipped past.
 */
interface LeaderElectorOptions {
  api: KubeApi;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

/** A coordination.k8s.io/v1 Lease as this elector reads and writes it (times: RFC 3339 with microseconds). */
interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [key: string]: unknown };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** metav1.MicroTime's form: six digits of fraction, as the API server parses it. */
function microTime(ms = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #api: LeaseApi;
  readonly #retryMs: number;
  readonly #renewDeadlineMs: number;
  #leading = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #lastRenew = 0;
  #observed = '';
  #observedAt = 0;
  #loop: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#o = options;
    this.#api = new LeaseApi(options.api);
    const durationMs = options.leaseDurationSeconds * 1000;
    // client-go's defaults are 15 s / 10 s / 2 s; the same proportions for any duration.
    this.#renewDeadlineMs = Math.round(durationMs * (2 / 3));
    this.#retryMs = Math.max(200, Math.round(durationMs / 7.5));
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#loop ??= this.#tick();
  }

  /** Stops campaigning; a leader stops leading and releases the lease. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#loop;
    if (!this.#leading) return;
    this.#setLeading(false);
    await this.#release().catch((err: Error) => this.#o.log.warn({ err }, 'could not release the lease'));
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    let renewed = false;
    try {
      renewed = await this.#tryAcquireOrRenew();
    } catch (err) {
      this.#o.log.warn({ err, lease: `${this.#o.namespace}/${this.#o.name}` }, 'lease read or write failed');
    }
    if (this.#stopped) return;
    if (renewed) {
      this.#lastRenew = Date.now();
      if (!this.#leading) this.#setLeading(true);
    } else if (this.#leading && Date.now() - this.#lastRenew > this.#renewDeadlineMs) {
      this.#setLeading(false);
    }
    this.#timer = setTimeout(() => {
      this.#loop = this.#tick();
    }, this.#retryMs);
  }

  #setLeading(leading: boolean): void {
    this.#leading = leading;
    this.#o.log.info(
      { lease: `${this.#o.namespace}/${this.#o.name}`, identity: this.#o.identity },
      leading ? 'became the leader' : 'stopped leading',
    );
    if (leading) this.#o.onStartedLeading();
    else this.#o.onStoppedLeading();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.#o;
    const now = microTime();
    let lease: Lease;
    try {
      lease = await this.#api.read(namespace, name);
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      try {
        await this.#api.create(namespace, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: 0,
          },
        });
        return true;
      } catch (createErr) {
        if (statusOf(createErr) === 409) return false;
        throw createErr;
      }
    }
    const spec = lease.spec ?? {};
    const record = `${spec.holderIdentity ?? ''}|${spec.renewTime ? new Date(spec.renewTime).getTime() : ''}|${spec.leaseTransitions ?? 0}`;
    if (record !== this.#observed) {
      this.#observed = record;
      this.#observedAt = Date.now();
    }
    const holder = spec.holderIdentity ?? '';
    const durationMs = (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (holder !== '' && holder !== identity && this.#observedAt + durationMs > Date.now()) {
      if (this.#leading) this.#setLeading(false); // deposed: another holder renewed in between
      return false;
    }
    const ours = holder === identity;
    lease.spec = {
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: ours && spec.acquireTime ? microTime(new Date(spec.acquireTime).getTime()) : now,
      renewTime: now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
    try {
      await this.#api.replace(namespace, name, lease);
    } catch (err) {
      if (statusOf(err) === 409) return false;
      throw err;
    }
    return true;
  }

  async #release(): Promise<void> {
    const { namespace, name, identity } = this.#o;
    const lease = await this.#api.read(namespace, name);
    if (lease.spec?.holderIdentity !== identity) return;
    const now = microTime();
    lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now };
    await this.#api.replace(namespace, name, lease);
    this.#o.log.info({ lease: `${namespace}/${name}` }, 'released the lease');
  }
}

/** The three Lease calls, on the webhook's own client (no client-node in `serve`). */
class LeaseApi {
  readonly #api: KubeApi;
  constructor(api: KubeApi) {
    this.#api = api;
  }
  read(namespace: string, name: string): Promise<Lease> {
    return this.#api.request<Lease>('GET', this.#path(namespace, name));
  }
  create(namespace: string, lease: Lease): Promise<Lease> {
    return this.#api.request<Lease>('POST', this.#path(namespace), { body: lease });
  }
  replace(namespace: string, name: string, lease: Lease): Promise<Lease> {
    return this.#api.request<Lease>('PUT', this.#path(namespace, name), { body: lease });
  }
  #path(namespace: string, name?: string): string {
    const base = ['apis', 'coordination.k8s.io', 'v1', 'namespaces', namespace, 'leases'];
    return apiPath(...(name === undefined ? base : [...base, name]));
  }
}
