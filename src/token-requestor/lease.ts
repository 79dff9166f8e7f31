import type { Logger } from 'pino';
import { apiPath, type KubeApi } from '../kube/api.ts';
import { statusOf } from '../kube/list-watch.ts';

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: Record<string, unknown>;
  spec?: LeaseSpec;
}

/** A MicroTime as the API server reads it (RFC 3339, six fractional digits). */
function microTime(ms = Date.now()): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

/**
 * Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it: one
 * holder at a time; a lease is taken over only after it went unrenewed for its whole duration
 * as measured on this process's own clock (so clock skew between replicas does not matter); a
 * leader that cannot renew within the renew deadline stops leading before anyone else may
 * start. On stop, the lease is released so a standby takes over at once.
 */
export interface LeaderElectorOptions {
  /** The API (the requestor's HTTP/2 pool: no connection per renewal). */
  api: KubeApi;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  log: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #api: KubeApi;
  readonly #path: string;
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
    this.#api = options.api;
    this.#path = apiPath('apis', 'coordination.k8s.io', 'v1', 'namespaces', options.namespace, 'leases');
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
    const path = `${this.#path}${apiPath(name)}`;
    let lease: Lease;
    try {
      lease = await this.#api.request<Lease>('GET', path);
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      try {
        await this.#api.request('POST', this.#path, {
          body: {
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
      acquireTime: ours && spec.acquireTime ? spec.acquireTime : now,
      renewTime: now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (ours ? 0 : 1),
    };
    try {
      await this.#api.request('PUT', path, { body: lease });
    } catch (err) {
      if (statusOf(err) === 409) return false;
      throw err;
    }
    return true;
  }

  async #release(): Promise<void> {
    const { namespace, name, identity } = this.#o;
    const path = `${this.#path}${apiPath(name)}`;
    const lease = await this.#api.request<Lease>('GET', path);
    if (lease.spec?.holderIdentity !== identity) return;
    const now = microTime();
    lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now };
    await this.#api.request('PUT', path, { body: lease });
    this.#o.log.info({ lease: `${namespace}/${name}` }, 'released the lease');
  }
}
