// The AWS peer's metrics (aws/amazon-eks-pod-identity-webhook pkg/handler/middleware.go and
// handler.go), served beside ours so dashboards built on them keep working after a migration.
// The peer sees every Pod.
import { Counter, Histogram, Summary } from 'prom-client';
import type { PeerMetricsFactory } from '../types.ts';

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
  const latencySummary = new Summary({
    name: 'http_request_duration_microseconds',
    help: 'Response latency summary in microseconds for each verb and path.',
    labelNames: ['verb', 'path'] as const,
    percentiles: [],
    maxAgeSeconds: 3600,
    ageBuckets: 5,
    registers,
  });
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
