import { Counter, Gauge, Histogram, Summary, type Registry } from 'prom-client';

/**
 * The single-cloud webhooks' own metric names, served beside ours so that dashboards and alerts
 * built on them keep working after a migration. Each counts the reviews that peer would have
 * received: the AWS peer every Pod, the Azure peer the Pods labelled azure.workload.identity/use,
 * pfnet's every Pod (controller-runtime's webhook metrics, path /mutate-v1-pod).
 */
export function createPeerMetrics(registry: Registry) {
  const registers = [registry];
  const aws = {
    // aws/amazon-eks-pod-identity-webhook pkg/handler/middleware.go
    requests: new Counter({
      name: 'http_request_count',
      help: 'Counter of requests broken out for each verb, path, and response code.',
      labelNames: ['verb', 'path', 'code'] as const,
      registers,
    }),
    latencies: new Histogram({
      name: 'http_request_latencies',
      help: 'Response latency distribution in microseconds for each verb and path',
      labelNames: ['verb', 'path'] as const,
      // prometheus.ExponentialBuckets(125000, 2.0, 7)
      buckets: [125000, 250000, 500000, 1000000, 2000000, 4000000, 8000000],
      registers,
    }),
    latencySummary: new Summary({
      name: 'http_request_duration_microseconds',
      help: 'Response latency summary in microseconds for each verb and path.',
      labelNames: ['verb', 'path'] as const,
      percentiles: [],
      maxAgeSeconds: 3600,
      ageBuckets: 5,
      registers,
    }),
    pods: new Counter({
      name: 'pod_identity_webhook_pod_count',
      help: 'Indicator to how many pods are using sts web identity or container credentials',
      labelNames: ['method'] as const,
      registers,
    }),
    missingServiceAccount: new Counter({
      name: 'pod_identity_webhook_missing_sa_count',
      help: 'Service account did not have the right annotations or was not found in the cache.',
      registers,
    }),
  };
  // Azure/azure-workload-identity pkg/webhook/stats_reporter.go (OpenTelemetry's default buckets)
  const azure = new Histogram({
    name: 'azwi_mutation_request',
    help: 'Distribution of how long it took for the azure-workload-identity mutation request',
    labelNames: ['namespace'] as const,
    buckets: [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000],
    registers,
  });
  // controller-runtime pkg/webhook/internal/metrics, as pfnet's webhook exposes them
  const pfnet = {
    requests: new Counter({
      name: 'controller_runtime_webhook_requests_total',
      help: 'Total number of admission requests by HTTP status code.',
      labelNames: ['webhook', 'code'] as const,
      registers,
    }),
    latency: new Histogram({
      name: 'controller_runtime_webhook_latency_seconds',
      help: 'Histogram of the latency of processing admission requests',
      labelNames: ['webhook'] as const,
      registers,
    }),
    inFlight: new Gauge({
      name: 'controller_runtime_webhook_requests_in_flight',
      help: 'Current number of admission requests being served.',
      labelNames: ['webhook'] as const,
      registers,
    }),
  };
  pfnet.inFlight.set({ webhook: PFNET_PATH }, 0);

  return {
    /** One Pod review answered: HTTP status, seconds, request namespace, Azure opt-in, AWS method. */
    pod(review: {
      path: string;
      code: number;
      seconds: number;
      namespace: string;
      azureOptIn: boolean;
      /** The AWS peer's method label: web identity, or container credentials (EKS Pod Identity). */
      awsMethod: 'sts_web_identity' | 'container_credentials' | undefined;
    }): void {
      const labels = { verb: 'POST', path: review.path };
      aws.requests.inc({ ...labels, code: String(review.code) });
      aws.latencies.observe(labels, review.seconds * 1e6);
      aws.latencySummary.observe(labels, review.seconds * 1e6);
      if (review.awsMethod) aws.pods.inc({ method: review.awsMethod });
      else aws.missingServiceAccount.inc();
      if (review.azureOptIn) azure.observe({ namespace: review.namespace }, review.seconds);
      pfnet.requests.inc({ webhook: PFNET_PATH, code: String(review.code) });
      pfnet.latency.observe({ webhook: PFNET_PATH }, review.seconds);
    },
  };
}

const PFNET_PATH = '/mutate-v1-pod';
