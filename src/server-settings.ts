// The server's own settings: listeners, certificates, limits, logging, caches; `serve` reads
// them, and src/config.ts joins them with the identity and policy settings. Apart from config.ts
// so that file reads as the one list of what the commands share.
import { isIP } from 'node:net';
import { ConfigError, errorMessage } from './errors.ts';
import { DEFAULT_LIMITS } from './limits.ts';
import { LOG_FORMATS, type LogFormat } from './log.ts';
import { DEFAULT_TLS12_SUITES, parseCipherSuites, parseTlsVersion, type TlsVersion } from './tls/policy.ts';
import { bool, integer, oneOf, optionalString, type Setting, string } from './settings.ts';

/** Addresses and CIDRs (a.b.c.d[/n], IPv6 likewise), comma-separated; each checked. */
function cidrList(raw: string, flag: string): string[] {
  const entries = hostList(raw);
  for (const entry of entries) {
    const [address, prefix, ...rest] = entry.split('/');
    const family = isIP(address);
    const bits = family === 6 ? 128 : 32;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (family === 0 || !prefixOk || rest.length > 0)
      throw new ConfigError(
        `--${flag}: ${JSON.stringify(entry.slice(0, 64))} is not an IP address or CIDR (a.b.c.d, a.b.c.d/n, or IPv6 likewise)`,
      );
  }
  return entries;
}

function hostList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** 0 (off), or a whole number from min to max. */
function zeroOrInteger(min: number, max: number) {
  const within = integer(min, max);
  return (raw: string, flag: string): number => {
    if (raw.trim() === '0') return 0;
    try {
      return within(raw, flag);
    } catch (err) {
      throw new ConfigError(`${errorMessage(err)} (or 0: off)`);
    }
  };
}

/** The server's own settings: listeners, certificates, limits, logging, caches; `serve` reads them. */
export const serverSettings = {
  host: { flag: 'host', description: 'Address the admission server listens on', parse: string, default: '0.0.0.0' },
  port: { flag: 'port', description: 'HTTPS port of the admission server', parse: integer(0, 65535), default: 8443 },
  metricsPort: {
    flag: 'metrics-port',
    description: 'Plain-HTTP port for /metrics (0: a free port; -1 is not allowed)',
    parse: integer(0, 65535),
    default: 9090,
  },
  metricsHost: {
    flag: 'metrics-host',
    description: 'Address of the metrics listener',
    parse: string,
    default: '0.0.0.0',
  },
  metricsNamespaceLabel: {
    flag: 'metrics-namespace-label',
    description:
      "Label the Azure peer's azwi_mutation_request by namespace, as the peer does (only namespaces the cluster has; about 18 series each); false: one series, for clusters with thousands of namespaces",
    parse: bool,
    default: true,
    boolean: true,
  },
  tlsCertFile: {
    flag: 'tls-cert-file',
    description: 'Serving certificate (PEM); reloaded when the file changes',
    parse: optionalString,
    default: undefined,
  },
  tlsKeyFile: {
    flag: 'tls-key-file',
    description: 'Serving key (PEM); reloaded when the file changes',
    parse: optionalString,
    default: undefined,
  },
  selfSigned: {
    flag: 'self-signed',
    description: 'Development: generate a CA and serving certificate at start-up',
    parse: bool,
    default: false,
    boolean: true,
  },
  selfSignedHosts: {
    flag: 'self-signed-hosts',
    description: 'DNS names and IPs of the self-signed serving certificate (comma-separated)',
    parse: hostList,
    default: ['localhost', '127.0.0.1'],
  },
  caBundleOut: {
    flag: 'ca-bundle-out',
    description: 'With --self-signed: write the CA certificate (PEM) to this file',
    parse: optionalString,
    default: undefined,
  },
  certSecret: {
    flag: 'cert-secret',
    description:
      'Self-managed certificates: Secret (existing, may be empty) where the webhook keeps its CA and serving certificate, for hosts --self-signed-hosts; rotated before expiry',
    parse: optionalString,
    default: undefined,
  },
  certSecretNamespace: {
    flag: 'cert-secret-namespace',
    description: "Namespace of --cert-secret (default: the webhook's own, in a cluster)",
    parse: optionalString,
    default: undefined,
  },
  certWebhookConfiguration: {
    flag: 'cert-webhook-configuration',
    description: 'With --cert-secret: MutatingWebhookConfiguration whose caBundle the webhook keeps current',
    parse: optionalString,
    default: undefined,
  },
  certValiditySeconds: {
    flag: 'cert-validity-seconds',
    description: 'With --cert-secret: lifetime of each generated CA and serving certificate',
    parse: integer(10, 10 * 365 * 86400),
    default: 365 * 86400,
  },
  certRenewBeforeSeconds: {
    flag: 'cert-renew-before-seconds',
    description: 'With --cert-secret: start a rotation this long before the serving certificate expires',
    parse: integer(5, 10 * 365 * 86400),
    default: 60 * 86400,
  },
  certPropagationSeconds: {
    flag: 'cert-propagation-seconds',
    description:
      'With --cert-secret: how long a new CA sits in the caBundle before any replica serves a certificate it signed',
    parse: integer(1, 86400),
    default: 60,
  },
  certResyncSeconds: {
    flag: 'cert-resync-seconds',
    description: 'With --cert-secret: re-check the Secret and caBundle at least this often (changes are also watched)',
    parse: integer(1, 86400),
    default: 60,
  },
  tlsMinVersion: {
    flag: 'tls-min-version',
    description: 'Lowest TLS version served: 1.2 or 1.3 (also VersionTLS12, VersionTLS13)',
    parse: parseTlsVersion,
    default: 'TLSv1.2' as TlsVersion,
  },
  tlsCipherSuites: {
    flag: 'tls-cipher-suites',
    description: 'TLS 1.2 cipher suites, IANA names (comma-separated); only forward-secret AEAD suites are accepted',
    parse: parseCipherSuites,
    default: DEFAULT_TLS12_SUITES,
  },
  clientCaFile: {
    flag: 'client-ca-file',
    description:
      "CA (PEM) of the API server's client certificate (its admission kubeconfig): /mutate then requires a certificate it signed",
    parse: optionalString,
    default: undefined,
  },
  maxRequestBytes: {
    flag: 'max-request-bytes',
    description: 'Largest AdmissionReview accepted (413 beyond)',
    parse: integer(64 * 1024, 64 * 1024 * 1024),
    default: DEFAULT_LIMITS.maxRequestBytes,
  },
  maxInflightRequestBytes: {
    flag: 'max-inflight-request-bytes',
    description:
      'Bytes of reviews in progress across connections: request bodies, answers until written (twice), 16 KiB a review (503 and retry beyond)',
    parse: integer(64 * 1024, 1024 * 1024 * 1024),
    default: DEFAULT_LIMITS.maxInflightRequestBytes,
  },
  maxContainers: {
    flag: 'max-containers',
    description: 'Containers (all kinds) of one Pod the webhook admits',
    parse: integer(1, 100_000),
    default: DEFAULT_LIMITS.maxContainers,
  },
  maxPatchBytes: {
    flag: 'max-patch-bytes',
    description: 'Largest JSON Patch answered; an object needing more is denied',
    parse: integer(1024, 64 * 1024 * 1024),
    default: DEFAULT_LIMITS.maxPatchBytes,
  },
  maxConnections: {
    flag: 'max-connections',
    description: 'Open connections at once',
    parse: integer(1, 1_000_000),
    default: DEFAULT_LIMITS.maxConnections,
  },
  maxConnectionsPerSource: {
    flag: 'max-connections-per-source',
    description:
      'Connections doing nothing one client address keeps when --max-connections is reached; the address most over it then gives one up to the newcomer',
    parse: integer(1, 1_000_000),
    default: DEFAULT_LIMITS.maxConnectionsPerSource,
  },
  firstRequestTimeoutMs: {
    flag: 'first-request-timeout-ms',
    description: 'Time a new connection has to finish TLS and send its first request',
    parse: integer(100, 600_000),
    default: DEFAULT_LIMITS.firstRequestTimeoutMs,
  },
  proxySources: {
    flag: 'proxy-sources',
    description:
      'Addresses or CIDRs (comma-separated) of a proxy kube-apiserver comes through (Konnectivity agents): not held to --max-connections-per-source',
    parse: cidrList,
    default: [] as string[],
  },
  http2: {
    flag: 'http2',
    description:
      'Offer HTTP/2 (ALPN h2) beside HTTP/1.1, for HTTP/2 clients (kube-apiserver offers h2 only to a localhost URL webhook; behind a Service it speaks HTTP/1.1)',
    parse: bool,
    default: true,
    boolean: true,
  },
  maxConcurrentStreams: {
    flag: 'max-concurrent-streams',
    description:
      'Reviews in progress on one HTTP/2 connection (its SETTINGS_MAX_CONCURRENT_STREAMS; a stream the client resets counts until its work is done)',
    parse: integer(1, 1000),
    default: DEFAULT_LIMITS.maxConcurrentStreams,
  },
  maxConnectionAgeSeconds: {
    flag: 'max-connection-age-seconds',
    description:
      'End a connection after this long, less up to a tenth (HTTP/1.1: Connection: close, HTTP/2: GOAWAY), so kube-apiserver redials and a Service spreads reviews over the replicas, new ones included; 0: never',
    parse: integer(0, 86_400),
    default: DEFAULT_LIMITS.maxConnectionAgeMs / 1000,
  },
  recordKeyFile: {
    flag: 'record-key-file',
    description:
      'File of at least 32 random bytes that signs the injection record; replicas must share it (default: derived from the serving key)',
    parse: optionalString,
    default: undefined,
  },
  drainSeconds: {
    flag: 'drain-seconds',
    description: 'On SIGTERM, keep serving this long while reporting not-ready',
    parse: integer(0, 600),
    default: 5,
  },
  logLevel: {
    flag: 'log-level',
    description: 'Log level',
    parse: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const),
    default: 'info' as const,
  },
  logFormat: {
    flag: 'log-format',
    description:
      'numeric: pino\'s "level":30 and "time" in epoch milliseconds; named: "level":"info" and "time" in ISO 8601 UTC, as Cloud Logging and Loki pipelines expect',
    parse: oneOf(LOG_FORMATS),
    default: 'numeric' as LogFormat,
  },
  kubeconfig: {
    flag: 'kubeconfig',
    description: 'Kubeconfig file; default: in-cluster, then $KUBECONFIG, then ~/.kube/config',
    parse: optionalString,
    default: undefined,
  },
  kubeContext: {
    flag: 'context',
    description:
      "The kubeconfig's context to use (default: its current-context); given, a kubeconfig is read even in a cluster",
    parse: optionalString,
    default: undefined,
  },
  cacheMissTimeoutMs: {
    flag: 'cache-miss-timeout-ms',
    description: 'Timeout of the direct API read when a ServiceAccount or Namespace is not yet cached',
    parse: integer(50, 10000),
    default: 2000,
  },
  failurePolicy: {
    flag: 'failure-policy',
    description:
      "The Pod webhook's failurePolicy, to act alike when a ServiceAccount cannot be read: Fail refuses the Pod (retryably), Ignore admits it without identity and with a warning",
    parse: oneOf(['Fail', 'Ignore'] as const),
    default: 'Fail' as const,
  },
  cacheMissRate: {
    flag: 'cache-miss-reads-per-second',
    description: 'Rate limit of direct reads on cache misses, per cache (ServiceAccounts, Namespaces)',
    parse: integer(1, 10000),
    default: 50,
  },
  slippedPodsIntervalSeconds: {
    flag: 'slipped-pods-interval-seconds',
    description:
      'Every this many seconds, the replica holding a Lease counts the running Pods that slipped past the webhook (wiw_slipped_pods; a paginated list of all Pods, which needs list on pods); 0: off',
    parse: zeroOrInteger(60, 86400),
    default: 0,
  },
  slippedPodsLeaseNamespace: {
    flag: 'slipped-pods-lease-namespace',
    description:
      "Namespace of the Lease that elects the replica counting the Pods that slipped past (default: the webhook's own, in a cluster)",
    parse: optionalString,
    default: undefined,
  },
} satisfies Record<string, Setting<unknown>>;
