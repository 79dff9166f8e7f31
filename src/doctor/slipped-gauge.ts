// serve's count of the Pods that slipped past (slipped.ts), opt-in (--slipped-pods-interval-seconds):
// one replica, the holder of a Lease, lists every unfinished Pod page by page at that interval
// and sets wiw_slipped_pods by provider (every provider, 0 included, so "none" is a sample). The
// other replicas export no sample, so a sum over replicas is the cluster's count. Losing the
// Lease drops the samples at once; a count in progress then is thrown away.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { ServiceAccountLookup } from '../admission/pods.ts';
import { PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import type { PodProvider } from '../clouds/types.ts';
import type { KubeApi } from '../kube/api.ts';
import { LeaderElector } from '../kube/lease.ts';
import type { Metrics } from '../metrics.ts';
import { scanPods } from './slipped.ts';

const SLIPPED_PODS_LEASE = 'workload-identity-webhook-slipped-pods';
const LEASE_DURATION_SECONDS = 15;

interface SlippedGaugeOptions {
  api: KubeApi;
  providers: readonly PodProvider[];
  lookup: ServiceAccountLookup;
  /** Whether the ServiceAccount cache has its first list: counting waits for it. */
  ready: () => boolean;
  intervalSeconds: number;
  leaseNamespace: string;
  gauge: Metrics['slippedPods'];
  log: Logger;
}

export function startSlippedGauge(o: SlippedGaugeOptions): { stop(): Promise<void> } {
  let term = 0;
  let timer: NodeJS.Timeout | undefined;
  const count = async (mine: number) => {
    if (mine !== term) return;
    if (!o.ready()) {
      timer = setTimeout(() => void count(mine), 1000);
      return;
    }
    try {
      const byProvider = new Map<ProviderName, number>(PROVIDER_NAMES.map((p) => [p, 0]));
      const read = await scanPods({
        api: o.api,
        providers: o.providers,
        lookup: o.lookup,
        // A Pod the webhook would refuse names no provider: doctor lists it, the gauge does not count it.
        onSlipped: (_pod, missing) => {
          for (const p of missing.providers) byProvider.set(p, (byProvider.get(p) ?? 0) + 1);
        },
      });
      if (mine !== term) return;
      for (const [provider, n] of byProvider) o.gauge.set({ provider }, n);
      o.log.info({ pods: read, slipped: Object.fromEntries(byProvider) }, 'counted the Pods that slipped past');
    } catch (err) {
      // The last count stays: a failed list says nothing new about the Pods.
      o.log.warn({ err }, 'cannot count the Pods that slipped past');
    }
    if (mine === term) timer = setTimeout(() => void count(mine), o.intervalSeconds * 1000);
  };
  const elector = new LeaderElector({
    api: o.api,
    namespace: o.leaseNamespace,
    name: SLIPPED_PODS_LEASE,
    identity: `${process.env.POD_NAME || hostname()}-${randomBytes(4).toString('hex')}`,
    leaseDurationSeconds: LEASE_DURATION_SECONDS,
    log: o.log,
    onStartedLeading: () => void count(++term),
    onStoppedLeading: () => {
      term++;
      clearTimeout(timer);
      o.gauge.reset();
    },
  });
  elector.start();
  return {
    stop: async () => {
      term++;
      clearTimeout(timer);
      await elector.stop();
    },
  };
}
