// The webhook as production runs it: `serve` in a child process with a kubeconfig, registered
// with the API server through a MutatingWebhookConfiguration (url + caBundle).
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdmissionregistrationV1Api, CoreV1Api, type V1MutatingWebhook } from '@kubernetes/client-node';
import type { ControlPlane } from '../harness/control-plane.ts';
import { startProcess, type Managed } from '../harness/processes.ts';
import { httpsRequest } from './https-client.ts';

// WIW_CLI: another build of the CLI (the benchmark compares releases).
const CLI = process.env.WIW_CLI ?? resolve(import.meta.dirname, '../../dist/cli.js');
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

/** Thrown from an `until` check to stop waiting at once (the awaited thing can no longer happen). */
export class GiveUp extends Error {}

/** Polls `check` every 50 ms until it returns a value; throws with `what` after the deadline. */
export async function until<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}`);
    await sleep(50);
  }
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

export interface StartOptions {
  /** Serve these files instead of a self-signed certificate; `caPem` is what clients trust. */
  tls?: { certFile: string; keyFile: string; caPem: string };
  /** Start the process through a wrapper (the benchmark puts it in a memory cgroup). */
  wrap?: (command: string, args: string[]) => [string, string[]];
  env?: Record<string, string>;
}

export async function startWebhook(
  cp: ControlPlane,
  extraArgs: string[] = [],
  options: StartOptions = {},
): Promise<WebhookProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (scripts/dev.sh test does)`);
  const n = ++counter;
  const caFile = join(cp.dir, `webhook-${n}-ca.pem`);
  const logPath = join(cp.dir, `webhook-${n}.log`);
  const tlsArgs = options.tls
    ? ['--tls-cert-file', options.tls.certFile, '--tls-key-file', options.tls.keyFile]
    : ['--self-signed', '--ca-bundle-out', caFile];
  const [command, args] = (options.wrap ?? ((c, a) => [c, a]))(process.execPath, [
    CLI,
    'serve',
    '--kubeconfig',
    cp.kubeconfigPath,
    ...tlsArgs,
    ...LOOPBACK_SERVE_ARGS,
    ...extraArgs,
  ]);
  const proc = startProcess(`webhook-${n}`, command, args, logPath, options.env);
  const logs = (): Record<string, unknown>[] => {
    const text = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
    return text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  const listening = await until(
    'the webhook to listen',
    () => {
      if (proc.exitStatus() !== null) throw new GiveUp(`webhook exited (${proc.exitStatus()}):\n${proc.logTail(20)}`);
      return logs().find((l) => l.msg === 'listening');
      // A loaded machine (several suites at once) can take its time to start a process.
    },
    60_000,
  );
  const port = listening.port as number;
  const metricsPort = listening.metricsPort as number;
  const caPem = options.tls?.caPem ?? readFileSync(caFile, 'utf8');
  const url = `https://127.0.0.1:${port}`;
  await until(
    'the webhook to be ready',
    async () => (await httpsRequest(`${url}/readyz`, { ca: caPem })).status === 200 || undefined,
  );
  return {
    url,
    port,
    metricsPort,
    caPem,
    process: proc,
    logs,
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
    stop: () => proc.stop(),
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

/** Dry-run Pod creations until one shows up in the webhook's decision log. */
export async function waitForWebhook(
  cp: ControlPlane,
  wh: { logs(): Record<string, unknown>[] },
  namespace: string,
): Promise<void> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  let i = 0;
  await until(
    'the API server to call the webhook',
    async () => {
      const name = `probe-${Date.now()}-${i++}`;
      await core.createNamespacedPod({
        namespace,
        dryRun: 'All',
        body: { metadata: { name }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      });
      return wh.logs().some((l) => l.msg === 'admission' && l.name === name) || undefined;
    },
    30_000,
  );
}
