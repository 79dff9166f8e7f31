// The webhook as the chart runs it, but as a local process: self-managed certificates kept in a
// Secret, optionally with the environment of the chart's rendered Deployment and a kubeconfig
// for the chart's ServiceAccount (so its RBAC is what the process gets).
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { connect } from 'node:tls';
import { stringify } from 'yaml';
import type { ControlPlane } from '../harness/control-plane.ts';
import { requestToken } from '../harness/control-plane.ts';
import { startProcess, type Managed } from '../harness/processes.ts';
import { until } from './webhook.ts';

const CLI = resolve(import.meta.dirname, '../../dist/cli.js');
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
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (scripts/dev.sh test does)`);
  const n = ++counter;
  const logPath = join(cp.dir, `local-webhook-${process.pid}-${n}.log`);
  // startProcess spawns with process.env: swap in the wanted WIW_* variables for the spawn only
  // (spawn copies the environment synchronously), so the runner's own never leak in.
  const saved = { ...process.env };
  let proc: Managed;
  try {
    for (const k of Object.keys(process.env)) if (k.startsWith('WIW_')) delete process.env[k];
    Object.assign(process.env, options.env ?? {});
    const serve = (options.command ?? 'serve') === 'serve';
    proc = startProcess(
      `local-webhook-${n}`,
      process.execPath,
      [
        CLI,
        options.command ?? 'serve',
        '--kubeconfig',
        options.kubeconfigPath,
        '--metrics-host',
        '127.0.0.1',
        '--metrics-port',
        '0',
        ...(serve ? ['--host', '127.0.0.1', '--drain-seconds', '0'] : []),
        ...options.args,
      ],
      logPath,
    );
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
  const logs = (): Record<string, unknown>[] => {
    const text = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
    return text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  let port = 0;
  if (options.waitListening !== false) {
    const startedLine = (options.command ?? 'serve') === 'serve' ? 'listening' : 'token requestor started';
    const listening = await until(
      `the ${options.command ?? 'serve'} process to start`,
      () => {
        if (proc.exitStatus() !== null)
          throw new Error(`${options.command ?? 'serve'} exited (${proc.exitStatus()}):\n${proc.logTail(20)}`);
        return logs().find((l) => l.msg === startedLine);
      },
      30_000,
    );
    port = (listening.port as number | undefined) ?? 0;
  }
  return { url: `https://127.0.0.1:${port}`, port, process: proc, logs, stop: () => proc.stop() };
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
