// Node's process metrics under their standard names (process_*, nodejs_*), where generic
// dashboards and alerts look for them: prom-client's default collectors, all but its event-loop
// one. That one samples the loop every 10 ms: 100 wake-ups a second of an idle process, about 2 ms
// of its CPU a second (issue 30: bench:apiserver's idle figure, 5.0 ms/s before, 3.0 after). Here
// the loop is sampled every 100 ms, under the same eight names, and each value is how late a
// sample ran: the interval is subtracted (prom-client's values include its 10 ms).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';
import gc from 'prom-client/lib/metrics/gc.js';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';

/** How often the event loop is sampled. */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** prom-client's lib/defaultMetrics.js list, its eventLoopLag left out. */
const COLLECTORS = [
  processCpuTotal,
  processStartTime,
  osMemoryHeap,
  processOpenFileDescriptors,
  processMaxFileDescriptors,
  processResources,
  processHandles,
  processRequests,
  heapSizeAndUsed,
  heapSpacesSizeAndUsed,
  version,
  gc,
];

/** What the event-loop gauges read: node:perf_hooks' IntervalHistogram, or a stand-in in a test. */
export interface LoopHistogram {
  readonly count: number;
  readonly min: number;
  readonly max: number;
  readonly mean: number;
  readonly stddev: number;
  percentile(p: number): number;
  enable(): boolean;
  reset(): void;
}

export function collectProcessMetrics(
  registry: Registry,
  monitor: (resolutionMs: number) => LoopHistogram = (resolution) => monitorEventLoopDelay({ resolution }),
): void {
  for (const collect of COLLECTORS) collect(registry, {});
  eventLoopMetrics(registry, monitor(EVENT_LOOP_SAMPLE_MS));
}

const STATS = {
  min: (h: LoopHistogram) => h.min,
  max: (h: LoopHistogram) => h.max,
  mean: (h: LoopHistogram) => h.mean,
  p50: (h: LoopHistogram) => h.percentile(50),
  p90: (h: LoopHistogram) => h.percentile(90),
  p99: (h: LoopHistogram) => h.percentile(99),
} as const;

/** The eight nodejs_eventloop_lag_* gauges, read from `histogram` at each scrape, then reset. */
function eventLoopMetrics(registry: Registry, histogram: LoopHistogram): void {
  histogram.enable();
  const registers = [registry];
  const late = (ns: number) => Math.max(0, ns / 1e9 - EVENT_LOOP_SAMPLE_MS / 1000);
  const gauges = Object.entries(STATS).map(
    ([stat, read]) =>
      [
        new Gauge({
          name: `nodejs_eventloop_lag_${stat}_seconds`,
          help: `The ${stat} of how late the event loop ran its ${EVENT_LOOP_SAMPLE_MS} ms samples since the last scrape`,
          registers,
        }),
        read,
      ] as const,
  );
  const stddev = new Gauge({
    name: 'nodejs_eventloop_lag_stddev_seconds',
    help: 'The standard deviation of the event loop delays since the last scrape',
    registers,
  });
  const lag: Gauge = new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers,
    collect() {
      const start = process.hrtime.bigint();
      // Seen at the next scrape, as prom-client's: this one is being read now.
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      // No sample since the last scrape (two scrapes within one interval): the gauges stay.
      if (histogram.count === 0) return;
      for (const [gauge, read] of gauges) gauge.set(late(read(histogram)));
      stddev.set(histogram.stddev / 1e9);
      histogram.reset();
    },
  });
}
