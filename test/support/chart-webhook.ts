// The webhook as the chart runs it, but as a local process: self-managed certificates kept in a
// Secret, optionally with the environment of the chart's rendered Deployment and a kubeconfig
// for the chart's ServiceAccount (so its RBAC is what the process gets).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { stringify } from 'yaml';
import { startCli } from '../harness/cli-process.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import { requestToken } from '../harness/control-plane.ts';
import type { Managed } from '../harness/processes.ts';

let counter = 0;

export interface LocalWebhook {
  url: string;
  port: number;
  process: Managed;
  logs(): Record<string, unknown>[];
  stop(): Promise<void>;
}

export interface LocalWebhookOptions {
  /** `serve` (default) or `token-requestor`. */
  command?: 'serve' | 'token-requestor';
  /** Flags after the command; --metrics-host 127.0.0.1 and --metrics-port 0 are added (and for serve --host 127.0.0.1). */
  args: string[];
  /** Extra environment (e.g. the chart Deployment's WIW_* variables). */
  env?: Record<string, string>;
  kubeconfigPath: string;
  /** Whether to wait for the start-up line (default true). */
  waitListening?: boolean;
}

export async function startLocalWebhook(cp: ControlPlane, options: LocalWebhookOptions): Promise<LocalWebhook> {
  const n = ++counter;
  const command = options.command ?? 'serve';
  const serve = command === 'serve';
  const cli = startCli(
    `local-webhook-${n}`,
    [
      command,
      '--kubeconfig',
      options.kubeconfigPath,
      '--metrics-host',
      '127.0.0.1',
      '--metrics-port',
      '0',
      ...(serve ? ['--host', '127.0.0.1', '--drain-seconds', '0'] : []),
      ...options.args,
    ],
    join(cp.dir, `local-webhook-${process.pid}-${n}.log`),
    // Only the chart's WIW_* variables: the runner's own never leak in.
    { env: options.env },
  );
  let port = 0;
  if (options.waitListening !== false) {
    const started = await cli.waitForLog(
      serve ? 'listening' : 'token requestor started',
      `the ${command} process to start`,
      30_000,
    );
    port = (started.port as number | undefined) ?? 0;
  }
  return { url: `https://127.0.0.1:${port}`, port, process: cli.process, logs: cli.logs, stop: cli.stop };
}

/** A kubeconfig that authenticates as a ServiceAccount (token from the TokenRequest API). */
export async function serviceAccountKubeconfig(cp: ControlPlane, namespace: string, name: string): Promise<string> {
  const token = await requestToken(cp, namespace, name, cp.issuer, 3600);
  const path = join(cp.dir, `kubeconfig-${namespace}-${name}`);
  await writeFile(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'cp',
          cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') },
        },
      ],
      users: [{ name: `${namespace}-${name}`, user: { token } }],
      contexts: [{ name: 'cp', context: { cluster: 'cp', user: `${namespace}-${name}` } }],
      'current-context': 'cp',
    }),
    { mode: 0o600 },
  );
  return path;
}

/** SHA-256 fingerprint of the certificate a TLS server presents right now. */
export function servedCertificate(port: number, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const socket = connect({ host, port, rejectUnauthorized: false, servername: undefined }, () => {
      const cert = socket.getPeerCertificate();
      socket.end();
      resolvePromise(cert.fingerprint256);
    });
    socket.on('error', reject);
  });
}
