// Preloaded into `serve` by the benchmarks (NODE_OPTIONS="--expose-gc --import .../memory-probe.mjs"):
// on SIGUSR2 it runs a full garbage collection and writes the process's memory figures as one
// JSON line to $WIW_MEMORY_PROBE_OUT, so live data can be told apart from garbage and headroom.
// With $WIW_HEAP_SNAPSHOT_DIR set it also writes a heap snapshot there. No inspector, no port:
// nothing of this is in the image or the chart.
import { appendFileSync, readFileSync } from 'node:fs';
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';

/** RssAnon, RssFile and RssShmem of this process, bytes: heap and malloc, mapped files (the node binary), shared. */
function rssParts() {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rssAnon: kb('RssAnon'), rssFile: kb('RssFile'), rssShmem: kb('RssShmem') };
}

/** Resident anonymous memory by mapping: brk's heap (malloc's main arena), and the other anonymous maps by size. */
function anonMaps() {
  const maps = { brk: 0, small: 0, large: 0 };
  let kind;
  for (const l of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(l);
    if (head) {
      const size = Number.parseInt(head[2], 16) - Number.parseInt(head[1], 16);
      kind = head[3] === '[heap]' ? 'brk' : head[3] === '' ? (size >= 2 ** 26 ? 'large' : 'small') : undefined;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(l);
    if (rss && kind) maps[kind] += Number(rss[1]) * 1024;
  }
  return maps;
}

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
        heapPhysical: heap.total_physical_size,
        mallocedMemory: heap.malloced_memory,
        peakMallocedMemory: heap.peak_malloced_memory,
        ...rssParts(),
        anonMaps: anonMaps(),
        spaces: Object.fromEntries(
          getHeapSpaceStatistics().map((sp) => [sp.space_name, { size: sp.space_size, used: sp.space_used_size }]),
        ),
        gcExposed: gc !== undefined,
        snapshot,
      })}\n`,
    );
  });
}
