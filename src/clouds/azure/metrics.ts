// The Azure peer's metric (Azure/azure-workload-identity pkg/webhook/stats_reporter.go, with
// OpenTelemetry's default buckets), served beside ours. The peer sees only the Pods labelled
// azure.workload.identity/use. Its namespace label takes only namespaces the cluster has (the
// caller bounds it), and a namespace's series go when the namespace does.
import { Histogram } from 'prom-client';
import type { PeerMetricsFactory } from '../types.ts';
import { AZURE_USE_LABEL } from './pod.ts';

const BUCKETS = [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000];

export const azurePeerMetrics: PeerMetricsFactory = (registry, { namespaceLabel }) => {
  const histogram = new Histogram({
    name: 'azwi_mutation_request',
    help: 'Distribution of how long it took for the azure-workload-identity mutation request',
    labelNames: namespaceLabel ? ['namespace'] : [],
    buckets: BUCKETS,
    registers: [registry],
  });
  return {
    observePod({ labels, namespace, seconds }) {
      if (labels?.[AZURE_USE_LABEL] !== 'true') return;
      if (namespaceLabel) histogram.observe({ namespace: namespace ?? '' }, seconds);
      else histogram.observe(seconds);
    },
    forgetNamespace(namespace) {
      if (namespaceLabel) histogram.remove({ namespace });
    },
  };
};
