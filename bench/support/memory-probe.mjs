// Preloaded into `serve` by the benchmarks (NODE_OPTIONS="--expose-gc --import .../memory-probe.mjs"):
// on SIGUSR2 it runs a full garbage collection and writes the process's memory figures as one
// JSON line to $WIW_MEMORY_PROBE_OUT, so live data can be told apart from garbage and headroom.
// With $WIW_HEAP_SNAPSHOT_DIR set it also writes a heap snapshot there. No inspector, no port:
// nothing of this is in the image or the chart.
import { appendFileSync } from 'node:fs';
import { getHeapStatistics, writeHeapSnapshot } from 'node:v8';

const out = process.env.WIW_MEMORY_PROBE_OUT;
const snapshots = process.env.WIW_HEAP_SNAPSHOT_DIR;
const gc = globalThis.gc;

if (out) {
  process.on('SIGUSR2', () => {
    const before = process.memoryUsage();
    gc?.({ type: 'major', execution: 'sync' });
    gc?.({ type: 'major', execution: 'sync' });
    const after = process.memoryUsage();
    const heap = getHeapStatistics();
    const snapshot = snapshots ? writeHeapSnapshot(`${snapshots}/serve-${process.pid}-${Date.now()}.heapsnapshot`) : undefined;
    appendFileSync(
      out,
      `${JSON.stringify({
        at: Date.now(),
        rss: before.rss,
        heapUsedBeforeGc: before.heapUsed,
        heapUsed: after.heapUsed,
        heapTotal: after.heapTotal,
        external: after.external,
        arrayBuffers: after.arrayBuffers,
        rssAfterGc: after.rss,
        heapLimit: heap.heap_size_limit,
        gcExposed: gc !== undefined,
        snapshot,
      })}\n`,
    );
  });
}
