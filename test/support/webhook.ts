// The webhook as production runs it: `serve` in a child process with a kubeconfig, registered
// with the API server through a MutatingWebhookConfiguration (url + caBundle).
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api, type V1MutatingWebhook } from '@kubernetes/client-node';
import { startCli, type LoggingOptions } from '../harness/cli-process.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import type { Managed } from '../harness/processes.ts';
import { GiveUp, until } from '../harness/until.ts';
import { httpsRequest } from './https-client.ts';

// `until` and `GiveUp` live in the harness; the benchmarks and scripts import them from here too.
export { GiveUp, until } from '../harness/until.ts';

let counter = 0;

export interface WebhookProcess {
  url: string;
  port: number;
  metricsPort: number;
  caPem: string;
  process: Managed;
  /** Parsed JSON log lines so far. */
  logs(): Record<string, unknown>[];
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/** `serve` on loopback with free ports and no drain: how the tests run it. */
export const LOOPBACK_SERVE_ARGS = [
  '--host',
  '127.0.0.1',
  '--port',
  '0',
  '--metrics-host',
  '127.0.0.1',
  '--metrics-port',
  '0',
  '--drain-seconds',
  '0',
];

const listenArgs = (host = '127.0.0.1') => LOOPBACK_SERVE_ARGS.map((a, i, all) => (all[i - 1] === '--host' ? host : a));

export interface StartOptions extends LoggingOptions {
  /** Serve these files instead of a self-signed certificate; `caPem` is what clients trust. */
  tls?: { certFile: string; keyFile: string; caPem: string };
  /** How long its caches may take to sync (the benchmark lists 50,000 ServiceAccounts); 20 s by default. */
  readyTimeoutMs?: number;
  /** The address it listens on, 127.0.0.1 by default (0.0.0.0: also on `hostAddress()`). */
  host?: string;
}

/**
 * A non-loopback IPv4 address of this host. kube-apiserver offers HTTP/2 only to a webhook whose
 * URL is localhost or loopback; to any other URL, and to every Service, it offers HTTP/1.1 alone
 * (k8s.io/apiserver pkg/util/webhook/client.go): a webhook registered at this address is spoken
 * to as one behind a Service is.
 */
export function hostAddress(): string {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('this host has no non-loopback IPv4 address (os.networkInterfaces()) to register a webhook at');
}

export async function startWebhook(
  cp: ControlPlane,
  extraArgs: string[] = [],
  options: StartOptions = {},
): Promise<WebhookProcess> {
  const n = ++counter;
  const caFile = join(cp.dir, `webhook-${n}-ca.pem`);
  const tlsArgs = options.tls
    ? ['--tls-cert-file', options.tls.certFile, '--tls-key-file', options.tls.keyFile]
    : ['--self-signed', '--ca-bundle-out', caFile];
  const cli = startCli(
    `webhook-${n}`,
    ['serve', '--kubeconfig', cp.kubeconfigPath, ...tlsArgs, ...listenArgs(options.host), ...extraArgs],
    join(cp.dir, `webhook-${n}.log`),
    options,
  );
  // A loaded machine (several suites at once) can take its time to start a process.
  const listening = await cli.waitForLog('listening', 'the webhook to listen', 60_000);
  const port = listening.port as number;
  const metricsPort = listening.metricsPort as number;
  const caPem = options.tls?.caPem ?? readFileSync(caFile, 'utf8');
  const url = `https://127.0.0.1:${port}`;
  await until(
    'the webhook to be ready',
    async () => {
      const proc = cli.process;
      if (proc.exitStatus() !== null) throw new GiveUp(`webhook exited (${proc.exitStatus()}):\n${proc.logTail(20)}`);
      return (await httpsRequest(`${url}/readyz`, { ca: caPem })).status === 200 || undefined;
    },
    options.readyTimeoutMs,
  );
  return {
    url,
    port,
    metricsPort,
    caPem,
    process: cli.process,
    logs: cli.logs,
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
    stop: cli.stop,
  };
}

export interface Registration {
  name: string;
  remove(): Promise<void>;
}

/**
 * Registers `webhooks` (clientConfig filled in from `wh` unless given) and waits until the API
 * server calls the webhook: configuration changes reach the admission chain asynchronously.
 */
export async function registerWebhook(
  cp: ControlPlane,
  wh: { url: string; caPem: string; logs(): Record<string, unknown>[] } | undefined,
  name: string,
  webhooks: Partial<V1MutatingWebhook>[],
  probeNamespace: string,
): Promise<Registration> {
  const api = cp.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
  await api.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: webhooks.map((w, i) => ({
        name: `w${i}.${name}.workload-identity-webhook.io`,
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        timeoutSeconds: 10,
        failurePolicy: 'Fail',
        reinvocationPolicy: 'IfNeeded',
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        ...w,
        clientConfig: w.clientConfig ?? {
          url: `${wh!.url}/mutate`,
          caBundle: Buffer.from(wh!.caPem).toString('base64'),
        },
      })) as V1MutatingWebhook[],
    },
  });
  if (wh) await waitForWebhook(cp, wh, probeNamespace);
  return { name, remove: async () => void (await api.deleteMutatingWebhookConfiguration({ name })) };
}

/**
 * Dry-run Pod creations until one shows up in the webhook's decision log: any of them, for a
 * decision line goes out with its batch, up to 250 ms after the create was answered (log.ts).
 */
export async function waitForWebhook(
  cp: ControlPlane,
  wh: { logs(): Record<string, unknown>[] },
  namespace: string,
): Promise<void> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const probes = new Set<unknown>();
  await until(
    'the API server to call the webhook',
    async () => {
      const name = `probe-${Date.now()}-${probes.size}`;
      probes.add(name);
      await core.createNamespacedPod({
        namespace,
        dryRun: 'All',
        body: { metadata: { name }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      });
      return wh.logs().some((l) => l.msg === 'admission' && probes.has(l.name)) || undefined;
    },
    30_000,
  );
}
