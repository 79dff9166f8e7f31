// The AWS peer's metrics (aws/amazon-eks-pod-identity-webhook pkg/handler/middleware.go and
// handler.go), served beside ours so dashboards built on them keep working after a migration.
// The peer sees every Pod.
import { Counter, Histogram, type Metric, type Registry } from 'prom-client';
import type { PeerMetricsFactory } from '../types.ts';

type Labels = Record<string, string>;

/**
 * A summary without quantiles, as the peer's (client_golang, no Objectives): only `_sum` and
 * `_count` per label set, cumulative. prom-client's Summary would also feed every observation
 * into five t-digests that nothing reads (a twentieth of a review's CPU in a profile); this
 * writes the same exposition without them.
 */
export class SumCountSummary {
  readonly type = 'summary';
  readonly aggregator = 'sum';
  readonly #series = new Map<string, { labels: Labels; sum: number; count: number }>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string, registers: Registry[]) {
    this.name = name;
    this.help = help;
    // prom-client types a metric as one of its own classes; the registry only calls get() and the fields above.
    for (const registry of registers) registry.registerMetric(this as unknown as Metric);
  }

  observe(labels: Labels, value: number): void {
    const key = JSON.stringify(labels);
    let s = this.#series.get(key);
    if (!s) {
      s = { labels: { ...labels }, sum: 0, count: 0 };
      this.#series.set(key, s);
    }
    s.sum += value;
    s.count++;
  }

  get() {
    const values = [...this.#series.values()].flatMap((s) => [
      { metricName: `${this.name}_sum`, labels: s.labels, value: s.sum },
      { metricName: `${this.name}_count`, labels: s.labels, value: s.count },
    ]);
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's: each label set stays, at zero. */
  reset(): void {
    for (const s of this.#series.values()) {
      s.sum = 0;
      s.count = 0;
    }
  }
}

export const awsPeerMetrics: PeerMetricsFactory = (registry) => {
  const registers = [registry];
  const requests = new Counter({
    name: 'http_request_count',
    help: 'Counter of requests broken out for each verb, path, and response code.',
    labelNames: ['verb', 'path', 'code'] as const,
    registers,
  });
  const latencies = new Histogram({
    name: 'http_request_latencies',
    help: 'Response latency distribution in microseconds for each verb and path',
    labelNames: ['verb', 'path'] as const,
    // prometheus.ExponentialBuckets(125000, 2.0, 7)
    buckets: [125000, 250000, 500000, 1000000, 2000000, 4000000, 8000000],
    registers,
  });
  // The peer's MaxAge of an hour only ages quantiles, and it has none.
  const latencySummary = new SumCountSummary(
    'http_request_duration_microseconds',
    'Response latency summary in microseconds for each verb and path.',
    registers,
  );
  const pods = new Counter({
    name: 'pod_identity_webhook_pod_count',
    help: 'Indicator to how many pods are using sts web identity or container credentials',
    labelNames: ['method'] as const,
    registers,
  });
  const missingServiceAccount = new Counter({
    name: 'pod_identity_webhook_missing_sa_count',
    help: 'Service account did not have the right annotations or was not found in the cache.',
    registers,
  });
  return {
    observePod({ path, code, seconds, injections }) {
      const labels = { verb: 'POST', path };
      requests.inc({ ...labels, code: String(code) });
      latencies.observe(labels, seconds * 1e6);
      latencySummary.observe(labels, seconds * 1e6);
      const aws = injections.find((i) => i.provider === 'aws');
      if (!aws) missingServiceAccount.inc();
      else
        pods.inc({ method: aws.identity.mode === 'eks-pod-identity' ? 'container_credentials' : 'sts_web_identity' });
    },
  };
};
