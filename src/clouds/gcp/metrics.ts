// pfnet's webhook metrics: controller-runtime's (pkg/webhook/internal/metrics), path
// /mutate-v1-pod, served beside ours. pfnet sees every Pod.
import { Counter, Gauge, Histogram } from 'prom-client';
import type { PeerMetricsFactory } from '../types.ts';

const PFNET_PATH = '/mutate-v1-pod';

export const gcpPeerMetrics: PeerMetricsFactory = (registry) => {
  const registers = [registry];
  const requests = new Counter({
    name: 'controller_runtime_webhook_requests_total',
    help: 'Total number of admission requests by HTTP status code.',
    labelNames: ['webhook', 'code'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'controller_runtime_webhook_latency_seconds',
    help: 'Histogram of the latency of processing admission requests',
    labelNames: ['webhook'] as const,
    registers,
  });
  const inFlight = new Gauge({
    name: 'controller_runtime_webhook_requests_in_flight',
    help: 'Current number of admission requests being served.',
    labelNames: ['webhook'] as const,
    registers,
  });
  inFlight.set({ webhook: PFNET_PATH }, 0);
  return {
    observePod({ code, seconds }) {
      requests.inc({ webhook: PFNET_PATH, code: String(code) });
      latency.observe({ webhook: PFNET_PATH }, seconds);
    },
  };
};
