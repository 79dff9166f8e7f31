import { readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AdmitContext } from '../admission/handler.ts';
import { buildApp, type AppOptions } from './app.ts';
import { sourceList } from './connection-limits.ts';
import { admitPod } from '../admission/pods.ts';
import { admitSecret } from '../admission/secrets.ts';
import { allowed, type AdmissionRequest, type Decision } from '../admission/review.ts';
import type { PodReviewObservation } from '../clouds/types.ts';
import { ConfigError } from '../errors.ts';
import type { ServerLimits } from '../limits.ts';
import type { Config } from '../config.ts';
import type { KubeApi } from '../kube/api.ts';
import { connectKube } from '../kube/connect.ts';
import { together } from '../kube/lifecycle.ts';
import { ServiceAccountCache } from '../kube/serviceaccount-cache.ts';
import { createMetrics, serveMetrics, UNKNOWN_NAMESPACE_LABEL, type Metrics } from '../metrics.ts';
import {
  serviceAccountAnnotations,
  createPeerMetrics,
  createProviders,
  createSecretProviders,
  startClouds,
} from '../clouds/index.ts';
import { SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../model.ts';
import { RecordKeys } from '../mutate/injection-record.ts';
import { memoryReducingGc, releaseWhenQuiet } from './memory-release.ts';
import { tlsPolicy, type TlsPolicy } from '../tls/policy.ts';
import { certificateNotAfter, readKeyPair, watchKeyPair, type KeyPair } from '../tls/reloader.ts';

/** How long the server is idle after work before it hands pooled memory back (src/http/memory-release.ts). */
const MEMORY_RELEASE_QUIET_MS = 10_000;

interface RunningServer {
  port: number;
  metricsPort: number;
  /** Not ready, keep serving for the drain period, then close once requests in flight finish. */
  shutdown(): Promise<void>;
}

async function loadTls(
  config: Config,
  api: KubeApi,
  log: Logger,
): Promise<{ pair: KeyPair; watch?: (apply: (p: KeyPair) => void) => () => void }> {
  if (config.selfSigned) {
    const { generateCertificates } = await import('../tls/self-signed.ts');
    const certs = await generateCertificates(config.selfSignedHosts);
    if (config.caBundleOut) await writeFile(config.caBundleOut, certs.caPem);
    log.info(
      { hosts: config.selfSignedHosts, caBundle: config.caBundleOut },
      'generated a self-signed CA and serving certificate',
    );
    return { pair: { cert: certs.certPem, key: certs.keyPem } };
  }
  if (config.tlsCertFile && config.tlsKeyFile) {
    const { tlsCertFile, tlsKeyFile } = config;
    const pair = await readKeyPair(tlsCertFile, tlsKeyFile).catch((err: Error) => {
      throw new ConfigError(`cannot load --tls-cert-file/--tls-key-file: ${err.message}`);
    });
    return { pair, watch: (apply) => watchKeyPair(tlsCertFile, tlsKeyFile, pair, apply, log) };
  }
  if (config.certSecret) {
    // Loaded only in this mode: the certificate manager, and certificate generation when it must make one.
    const { selfManagedTls } = await import('../tls/self-managed.ts');
    return selfManagedTls(config, api, log);
  }
  throw new ConfigError(
    'serve needs a certificate: --tls-cert-file and --tls-key-file, --cert-secret, or --self-signed',
  );
}

/**
 * The keys that sign injection records. Every replica must hold the same one: a key file, or
 * else one derived from the serving key, which replicas share through their certificate Secret.
 * After a certificate rotation the previous key still verifies.
 */
interface RotatingRecordKeys {
  current: RecordKeys;
  rotate(p: KeyPair): void;
}

async function injectionRecordKeys(config: Config, pair: KeyPair, log: Logger): Promise<RotatingRecordKeys> {
  if (config.recordKeyFile) {
    const file = config.recordKeyFile;
    const material = await readFile(file).catch((err: Error) => {
      throw new ConfigError(`cannot read --record-key-file: ${err.message}`);
    });
    if (material.length < 32)
      throw new ConfigError(
        `--record-key-file ${file} holds ${material.length} bytes; at least 32 random bytes are needed`,
      );
    return { current: RecordKeys.derive(material), rotate: () => {} };
  }
  if (config.selfSigned)
    log.info('injection records are signed with a key of this process: run one replica, or set --record-key-file');
  let last = pair.key;
  const keys = {
    current: RecordKeys.derive(pair.key),
    rotate(next: KeyPair) {
      if (next.key === last) return;
      keys.current = RecordKeys.derive(next.key, last);
      last = next.key;
    },
  };
  return keys;
}

/** What admission reads and judges with: providers, the ServiceAccount cache, tenant policy. */
async function admission(config: Config, api: KubeApi, root: Logger, metrics: Metrics, recordKeys: RotatingRecordKeys) {
  const providers = createProviders(config);
  const secretCore = { providers: createSecretProviders(config), defaultTokenPath: config.secretTokenPath };
  const cache = new ServiceAccountCache({
    api,
    annotations: [...serviceAccountAnnotations(providers), ...SECRET_SERVICE_ACCOUNT_ANNOTATIONS],
    log: root.child({ component: 'serviceaccount-cache' }),
    metrics,
    missTimeoutMs: config.cacheMissTimeoutMs,
    missReadsPerSecond: config.cacheMissRate,
  });
  // Tenant policy (CEL, the YAML parser, the namespace cache) is loaded only when configured.
  const tenantPolicy =
    config.watchPolicies || config.policyFile
      ? (await import('../policy/runtime.ts')).createTenantPolicy(
          config,
          api,
          root.child({ component: 'tenant-policy' }),
          metrics,
        )
      : undefined;
  const lookup = (ns: string, name: string) => cache.lookup(ns, name);
  const admit = async (request: AdmissionRequest, context: AdmitContext): Promise<Decision> => {
    if (request.kind.kind === 'Pod' && request.kind.group === '')
      return admitPod(providers, lookup, request, tenantPolicy?.judges, {
        onUnresolved: context.failurePolicy ?? config.failurePolicy,
        recordKeys: recordKeys.current,
        maxContainers: config.maxContainers,
      });
    if (request.kind.kind === 'Secret' && request.kind.group === '')
      return admitSecret(secretCore, lookup, request, tenantPolicy?.judges);
    return allowed();
  };
  // Everything list-watched beside the server: ready once all are synced.
  return { admit, cache, providers, tenantPolicy, watched: together([cache, ...(tenantPolicy?.parts ?? [])]) };
}

/** The peers' metrics, their namespace label bounded: only a namespace the cluster has is a label value. */
function boundedPeerMetrics(config: Config, metrics: Metrics, cache: ServiceAccountCache) {
  const peerMetrics = createPeerMetrics(metrics.registry, { namespaceLabel: config.metricsNamespaceLabel });
  cache.onNamespaceGone(peerMetrics.forgetNamespace);
  return (review: PodReviewObservation) =>
    peerMetrics.observePod({
      ...review,
      namespace: cache.hasNamespace(review.namespace) ? review.namespace : UNKNOWN_NAMESPACE_LABEL,
    });
}

const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The leader's count of the Pods that slipped past, when asked for (loaded only then). */
async function slippedGauge(
  config: Config,
  api: KubeApi,
  root: Logger,
  metrics: Metrics,
  { providers, cache, watched }: Awaited<ReturnType<typeof admission>>,
): Promise<{ stop(): Promise<void> } | undefined> {
  if (config.slippedPodsIntervalSeconds === 0) return undefined;
  const leaseNamespace =
    config.slippedPodsLeaseNamespace ??
    (await readFile(IN_CLUSTER_NAMESPACE_FILE, 'utf8').then(
      (ns) => ns.trim(),
      () => {
        throw new ConfigError(
          '--slipped-pods-lease-namespace is needed outside a cluster (no service account namespace file to default to)',
        );
      },
    ));
  const { startSlippedGauge } = await import('../doctor/slipped-gauge.ts');
  return startSlippedGauge({
    api,
    providers,
    lookup: (ns, name) => cache.lookup(ns, name),
    ready: () => watched.synced,
    intervalSeconds: config.slippedPodsIntervalSeconds,
    leaseNamespace,
    gauge: metrics.slippedPods,
    log: root.child({ component: 'slipped-pods' }),
  });
}

export async function serve(config: Config, root: Logger): Promise<RunningServer> {
  // One child logger per component, made here where the components are built.
  const log = root.child({ component: 'server' });
  const api = await connectKube(config.kubeconfig, config.kubeContext);
  const tls = await loadTls(config, api, root.child({ component: 'tls' }));
  const metrics = createMetrics();
  metrics.servingCertificateExpiry.set(certificateNotAfter(tls.pair.cert));
  const recordKeys = await injectionRecordKeys(config, tls.pair, log);
  const core = await admission(config, api, root, metrics, recordKeys);
  const { cache, watched } = core;
  // The pages a burst of reviews (or the first list) left pooled go back once the server idles.
  const quiet = releaseWhenQuiet(MEMORY_RELEASE_QUIET_MS, memoryReducingGc());
  const parameters = await policyParameters(config, api, core, root);
  let draining = false;
  const clientCa = await readClientCa(config);
  const policy = tlsPolicy(config.tlsMinVersion, config.tlsCipherSuites);
  const app = httpFace(config, root, {
    tls,
    metrics,
    admit: (request, context) => {
      quiet.worked();
      return core.admit(request, context);
    },
    isReady: () => !draining && watched.synced,
    isDraining: () => draining,
    clientCa,
    policy,
    cache,
  });
  void watched.start().then(quiet.worked);
  const stopClouds = startClouds(config, log);
  const slipped = await slippedGauge(config, api, root, metrics, core);
  await app.listen({ port: config.port, host: config.host });
  const port = (app.server.address() as AddressInfo).port;
  const stopWatching = tls.watch?.((pair) => {
    setSecureContext(app.server, { ...pair, minVersion: policy.minVersion, ciphers: policy.ciphers, ca: clientCa });
    recordKeys.rotate(pair);
    metrics.servingCertificateExpiry.set(certificateNotAfter(pair.cert));
  });
  const scrape = await serveMetrics(metrics.registry, config.metricsHost, config.metricsPort);
  log.info({ port, metricsPort: scrape.port }, 'listening');
  const shutdown = once(() =>
    drainThenStop(
      config.drainSeconds,
      log,
      () => (draining = true),
      async () => {
        stopWatching?.();
        stopClouds();
        await parameters?.stop();
        await slipped?.stop();
        quiet.stop();
        watched.stop();
        await Promise.all([app.close(), new Promise((resolve) => scrape.server.close(resolve))]);
      },
    ),
  );
  return { port, metricsPort: scrape.port, shutdown };
}

/** Handshakes from now on get this certificate (and client CA); connections already open keep theirs. */
function setSecureContext(server: unknown, context: KeyPair & { minVersion?: string; ciphers?: string; ca?: string }) {
  const { ca, ...rest } = context;
  // fastify types its server as the plain HTTP one; with `https` it is a tls.Server, which has this.
  (server as { setSecureContext(o: object): void }).setSecureContext({ ...rest, ...(ca ? { ca } : {}) });
}

/** The HTTPS server admission answers on, with its limits and TLS. */
function httpFace(
  config: Config,
  root: Logger,
  parts: Pick<AppOptions, 'metrics' | 'admit' | 'isReady' | 'isDraining' | 'clientCa'> & {
    tls: { pair: KeyPair };
    policy: TlsPolicy;
    cache: ServiceAccountCache;
  },
) {
  const { tls, policy, cache, ...rest } = parts;
  return buildApp({
    ...rest,
    https: tls.pair,
    log: root.child({ component: 'admission' }),
    limits: serverLimits(config),
    http2: config.http2,
    proxySources: config.proxySources.length > 0 ? sourceList(config.proxySources) : undefined,
    tls: policy,
    observePod: boundedPeerMetrics(config, rest.metrics, cache),
  });
}

/** The policy mode's parameters, written by one replica (loaded only when asked for). */
async function policyParameters(
  config: Config,
  api: KubeApi,
  { providers, tenantPolicy }: Awaited<ReturnType<typeof admission>>,
  root: Logger,
) {
  if (!config.policyParameters) return undefined;
  const { startPolicyParameters } = await import('../policy-mode/run.ts');
  return startPolicyParameters(
    config,
    api,
    providers,
    tenantPolicy?.judges,
    tenantPolicy && (() => tenantPolicy.gate.current()),
    root,
  );
}

/**
 * Reports not ready and keeps serving for the drain period, then stops. Keep-alive clients learn
 * it from their next answer (Connection: close; over HTTP/2 a GOAWAY: streams in progress finish,
 * the client opens its next one elsewhere). Idle connections are not cut now: a client may be
 * sending on one, and a POST cut mid-flight is not retried.
 */
async function drainThenStop(seconds: number, log: Logger, markDraining: () => void, stop: () => Promise<void>) {
  markDraining();
  log.info({ drainSeconds: seconds }, 'draining: reporting not ready');
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  await stop();
  log.info('stopped');
}

/** `fn` run on the first call only; later calls get the same promise. */
function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}

async function readClientCa(config: Config): Promise<string | undefined> {
  if (!config.clientCaFile) return undefined;
  return readFile(config.clientCaFile, 'utf8').catch((err: Error) => {
    throw new ConfigError(`cannot read --client-ca-file: ${err.message}`);
  });
}

/** The HTTP face's limits, from the flags. */
function serverLimits(config: Config): Partial<ServerLimits> {
  return {
    maxRequestBytes: config.maxRequestBytes,
    maxInflightRequestBytes: config.maxInflightRequestBytes,
    maxContainers: config.maxContainers,
    maxPatchBytes: config.maxPatchBytes,
    maxConnections: config.maxConnections,
    maxConnectionsPerSource: config.maxConnectionsPerSource,
    firstRequestTimeoutMs: config.firstRequestTimeoutMs,
    maxConcurrentStreams: config.maxConcurrentStreams,
    maxConnectionAgeMs: config.maxConnectionAgeSeconds * 1000,
  };
}
