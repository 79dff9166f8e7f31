import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { collectProcessMetrics } from './process-metrics.ts';

// node:http through require: the ES module face of a built-in reads each of its exports, and
// node:http's lazy ones load Node's undici (about 30 ms of every start of `serve`).
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/**
 * The label value of a request namespace the cluster does not have: not a valid namespace name,
 * so it never collides with one. A caller cannot mint series by naming namespaces.
 */
export const UNKNOWN_NAMESPACE_LABEL = '_unknown';

/** One registry per server instance, so tests and the bench can run several side by side. */
export function createMetrics() {
  const registry = new Registry();
  // The target's labels tell this process's process_* and nodejs_* from others'.
  collectProcessMetrics(registry);
  return {
    registry,
    ...admissionMetrics(registry),
    ...connectionMetrics(registry),
    ...cacheMetrics(registry),
    servingCertificateExpiry: new Gauge({
      name: 'wiw_serving_certificate_expiry_timestamp_seconds',
      help: 'notAfter of the serving certificate this replica presents, in seconds since the epoch',
      registers: [registry],
    }),
    // Set by the leader of --slipped-pods-interval-seconds only: the others export no sample.
    slippedPods: new Gauge({
      name: 'wiw_slipped_pods',
      help: 'Running Pods whose ServiceAccount carries an identity the webhook would inject and which have none of it, by provider, as last counted by the leader (--slipped-pods-interval-seconds)',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The reviews: how many, how long, what they did. */
function admissionMetrics(registry: Registry) {
  return {
    requests: new Counter({
      name: 'wiw_admission_requests_total',
      help: 'Admission reviews by object kind, operation and result (mutated, allowed, denied, error)',
      labelNames: ['kind', 'operation', 'result'] as const,
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'wiw_admission_duration_seconds',
      help: 'Time from request body parsed to response ready',
      labelNames: ['kind'] as const,
      // Up to the longest webhook timeout (30 s), so latency near the configured timeout is measured.
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    denials: new Counter({
      name: 'wiw_denials_total',
      help: 'Objects refused, by reason',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    injections: new Counter({
      name: 'wiw_injections_total',
      help: 'Identities injected, by provider',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    shadowed: new Counter({
      name: 'wiw_user_env_shadowed_total',
      help: "Containers whose own value of an injected credential variable wins over the webhook's, by provider and variable",
      labelNames: ['provider', 'variable'] as const,
      registers: [registry],
    }),
  };
}

/** The connections and requests turned away before admission (src/http/connection-limits.ts, review budget). */
function connectionMetrics(registry: Registry) {
  return {
    rejected: new Counter({
      name: 'wiw_requests_rejected_total',
      help: 'Requests turned away before admission, by reason (too_large, busy, unauthenticated)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    connectionsClosed: new Counter({
      name: 'wiw_connections_closed_total',
      help: 'Connections the server closed to keep room for others, by reason (limit, per_source_limit, evicted, first_request_timeout, rapid_reset; max_age: ended past --max-connection-age-seconds)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    connections: new Counter({
      name: 'wiw_connections_total',
      help: 'Connections established (TLS done), by protocol (h2, http/1.1)',
      labelNames: ['protocol'] as const,
      registers: [registry],
    }),
    inflightBytes: new Gauge({
      name: 'wiw_inflight_bytes',
      help: 'Bytes held by reviews in progress (requests, answers not yet written, a share per review) against --max-inflight-request-bytes',
      registers: [registry],
    }),
  };
}

/** The object caches (src/kube/object-cache.ts) and their watches. */
function cacheMetrics(registry: Registry) {
  return {
    // The object caches (src/kube/object-cache.ts), by `what`: ServiceAccount or Namespace. The
    // names predate the Namespace cache and are kept so dashboards and alerts stay valid.
    cacheSize: new Gauge({
      name: 'wiw_serviceaccount_cache_size',
      help: 'Objects held by a cache, by kind (what: ServiceAccount, Namespace)',
      labelNames: ['what'] as const,
      registers: [registry],
    }),
    cacheBytes: new Gauge({
      name: 'wiw_serviceaccount_cache_bytes',
      help: 'Bytes a cache holds, as counted against its byte budget, by kind (what: ServiceAccount)',
      labelNames: ['what'] as const,
      registers: [registry],
    }),
    cacheOverBudget: new Counter({
      name: 'wiw_serviceaccount_cache_over_budget_total',
      help: 'Objects a cache left out because its byte budget was spent (read directly when needed), by kind (what: ServiceAccount)',
      labelNames: ['what'] as const,
      registers: [registry],
    }),
    cacheMisses: new Counter({
      name: 'wiw_serviceaccount_cache_misses_total',
      help: 'Lookups of an object not in the cache, by kind (what: ServiceAccount, Namespace)',
      labelNames: ['what'] as const,
      registers: [registry],
    }),
    fallbackReads: new Counter({
      name: 'wiw_serviceaccount_fallback_reads_total',
      help: 'Direct API reads after a cache miss, by kind and result (found, not_found, error, timeout, rate_limited)',
      labelNames: ['what', 'result'] as const,
      registers: [registry],
    }),
    watchRestarts: new Counter({
      name: 'wiw_serviceaccount_watch_restarts_total',
      help: 'Restarts of a cache watch after a real failure, by kind and cause (gone, idle, watch_error, list_error)',
      labelNames: ['what', 'cause'] as const,
      registers: [registry],
    }),
  };
}

/**
 * The plain-HTTP listener for Prometheus: `/metrics` from the registry, plus any extra routes
 * (the token requestor's /healthz). Resolves once listening, with the port it got.
 */
export async function serveMetrics(
  registry: Registry,
  host: string,
  port: number,
  routes: Record<string, () => unknown> = {},
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const route = req.url ? routes[req.url] : undefined;
    if (route) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(route()));
      return;
    }
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: Error) => res.writeHead(500).end(err.message),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return { server, port: (server.address() as AddressInfo).port };
}
