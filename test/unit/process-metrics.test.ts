// Node's process metrics: prom-client's standard names, the event loop sampled every 100 ms rather
// than prom-client's 10 ms (100 wake-ups a second of an idle server), each value how late a
// sample ran.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { until } from '../harness/until.ts';
import { EVENT_LOOP_SAMPLE_MS, collectProcessMetrics, type LoopHistogram } from '../../src/process-metrics.ts';

const names = async (registry: Registry) => (await registry.getMetricsAsJSON()).map((m) => m.name).sort();

/** A histogram whose samples the test sets (ns, as node:perf_hooks reports them). */
function fakeHistogram(samplesMs: number[]) {
  const ns = samplesMs.map((ms) => ms * 1e6).sort((a, b) => a - b);
  const state = { resets: 0, enabled: false };
  const h: LoopHistogram = {
    get count() {
      return ns.length;
    },
    get min() {
      return ns[0];
    },
    get max() {
      return ns.at(-1) ?? 0;
    },
    get mean() {
      return ns.reduce((a, b) => a + b, 0) / ns.length;
    },
    stddev: 2e6,
    percentile: (p) => ns[Math.min(ns.length - 1, Math.ceil((p / 100) * ns.length) - 1)],
    enable: () => {
      state.enabled = true;
      return true;
    },
    reset: () => {
      state.resets++;
      ns.length = 0;
    },
  };
  return { h, state };
}

const value = async (registry: Registry, name: string) =>
  (await registry.getSingleMetric(name)?.get())?.values[0]?.value;

describe('process metrics', () => {
  test("the names are prom-client's default metrics', every one", async () => {
    const theirs = new Registry();
    collectDefaultMetrics({ register: theirs });
    const ours = new Registry();
    collectProcessMetrics(ours);
    assert.deepEqual(await names(ours), await names(theirs));
    assert.ok((await names(ours)).includes('nodejs_eventloop_lag_p99_seconds'));
  });

  test('the loop is sampled every 100 ms, and a value is how late a sample ran', async () => {
    const registry = new Registry();
    const { h, state } = fakeHistogram([100.5, 101, 102, 130]);
    let asked = 0;
    collectProcessMetrics(registry, (resolution) => {
      asked = resolution;
      return h;
    });
    assert.equal(asked, EVENT_LOOP_SAMPLE_MS);
    assert.equal(EVENT_LOOP_SAMPLE_MS, 100);
    assert.ok(state.enabled, 'the histogram is enabled at once');
    await registry.metrics();
    const close = (a: number | undefined, b: number) =>
      assert.ok(a !== undefined && Math.abs(a - b) < 1e-9, `${a} ≠ ${b}`);
    close(await value(registry, 'nodejs_eventloop_lag_min_seconds'), 0.0005);
    close(await value(registry, 'nodejs_eventloop_lag_max_seconds'), 0.03);
    close(await value(registry, 'nodejs_eventloop_lag_p99_seconds'), 0.03);
    close(await value(registry, 'nodejs_eventloop_lag_p50_seconds'), 0.001);
    close(await value(registry, 'nodejs_eventloop_lag_mean_seconds'), (0.5 + 1 + 2 + 30) / 4 / 1000);
    close(await value(registry, 'nodejs_eventloop_lag_stddev_seconds'), 0.002);
    assert.ok(state.resets >= 1, 'each scrape starts a new window');
  });

  test('a scrape with no sample since the last keeps the last values (not an empty histogram read as lag)', async () => {
    const registry = new Registry();
    const { h } = fakeHistogram([100, 140]);
    collectProcessMetrics(registry, () => h);
    await registry.metrics();
    const first = await value(registry, 'nodejs_eventloop_lag_max_seconds');
    assert.ok(first !== undefined && Math.abs(first - 0.04) < 1e-9);
    assert.equal(h.count, 0);
    await registry.metrics();
    assert.equal(await value(registry, 'nodejs_eventloop_lag_max_seconds'), first);
  });

  test("node:perf_hooks' own monitor, idle: a few ms at most, not the 100 ms interval", async () => {
    const registry = new Registry();
    let real: ReturnType<typeof monitorEventLoopDelay> | undefined;
    collectProcessMetrics(registry, (resolution) => {
      real = monitorEventLoopDelay({ resolution });
      return real;
    });
    await registry.metrics(); // the window starts here
    await until('three samples of the loop', () => ((real?.count ?? 0) >= 3 ? true : undefined), 5000);
    await registry.metrics();
    const p50 = await value(registry, 'nodejs_eventloop_lag_p50_seconds');
    // Unsubtracted, an idle loop's p50 is the interval itself, 0.1 s; a busy test runner adds
    // some ms, not tens.
    assert.ok(p50 !== undefined && p50 >= 0 && p50 < 0.05, `p50 ${p50}`);
  });

  test('a sample on time reads 0, never below', async () => {
    const registry = new Registry();
    const { h } = fakeHistogram([99.2, 99.5]);
    collectProcessMetrics(registry, () => h);
    await registry.metrics();
    assert.equal(await value(registry, 'nodejs_eventloop_lag_min_seconds'), 0);
    assert.equal(await value(registry, 'nodejs_eventloop_lag_max_seconds'), 0);
  });
});
