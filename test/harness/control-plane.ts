// A throwaway kube-apiserver + etcd (the envtest shape: no kubelet, scheduler or controllers),
// each in its own temp folder on free loopback ports, so test files can run in parallel.
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { chosenKubeVersion, resolveBinaries, type KubeVersion } from './binaries.ts';
import { createCa, createClientCert, createServingCert } from './certs.ts';
import { httpsRequest } from './https.ts';
import type { RawResponse } from './https.ts';
import { guardDir, releaseDir, startProcess } from './processes.ts';
import type { Managed } from './processes.ts';

export { createNamespace, createServiceAccount, requestToken, verifyServiceAccountToken } from './kube.ts';

export interface ControlPlane {
  name: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** Admin kubeconfig (client certificate in group system:masters). */
  kubeconfigPath: string;
  /** CA that signed the API server's serving certificate and the client certificates. */
  caPem: string;
  clientCertPem: string;
  clientKeyPem: string;
  /** ServiceAccount token issuer (--service-account-issuer); equals `server` unless options.issuer says otherwise. */
  issuer: string;
  /** The public key files of --service-account-key-file, in order. */
  serviceAccountKeyFiles: string[];
  /** Temp folder holding certificates, etcd data, kubeconfig and the logs (etcd.log, kube-apiserver.log). */
  dir: string;
  pids: { etcd: number; kubeApiserver: number };
  /** The API server's own version, as /version gives it (gitVersion, e.g. v1.30.14). */
  kubeVersion: string;
  kubeConfig(): KubeConfig;
  /** A raw request as admin, e.g. request('GET', '/version'). `body` is sent as JSON. */
  request(method: string, path: string, body?: unknown): Promise<RawResponse>;
  /** A client certificate and key signed by the cluster's CA (for a kubelet, a controller). */
  issueClientCert(user: string, groups?: string[]): Promise<{ cert: string; key: string }>;
  /** Stops kube-apiserver, then etcd, and removes `dir`. Idempotent. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

export interface ControlPlaneOptions {
  name?: string;
  /** --service-account-issuer from the API server's URL; default: the URL itself. */
  issuer?: (server: string) => string;
  /** --service-account-jwks-uri, for an issuer hosted elsewhere. */
  jwksUri?: string;
  /**
   * A rotation: a second key pair signs new tokens. `published`: --service-account-key-file lists
   * its public key too (after the original's); otherwise only the original is listed.
   */
  rotatedSigningKey?: { published: boolean };
  /**
   * More kube-apiserver flags, e.g. --admission-control-config-file. A flag the harness sets is
   * replaced, not repeated (list flags such as admission plugins would add up).
   */
  extraArgs?: string[];
  /** More IP addresses in the serving certificate (a node's view of the API server). */
  servingIps?: string[];
  /**
   * The suite's kube-apiserver, the oldest or the newest (test/harness/binaries.ts). Unset: the one
   * WIW_KUBE_VERSION chooses (`tested` when unset), so a file runs against each version unchanged.
   */
  version?: KubeVersion;
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  // Free ports are found by binding port 0 and releasing it, so another process can take one
  // in between; start over on that (rare) collision.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options.name ?? 'control-plane', options);
    } catch (err) {
      if (attempt >= 3 || !/address already in use/i.test(String(err))) throw err;
    }
  }
}

async function startOnce(name: string, options: ControlPlaneOptions): Promise<ControlPlane> {
  const bins = await resolveBinaries(options.version ?? chosenKubeVersion());
  const dir = await mkdtemp(join(tmpdir(), `wiw-${name.replace(/[^\w.-]/g, '_')}-`));
  guardDir(dir);
  const started: Managed[] = [];
  const cleanup = async (): Promise<void> => {
    for (const proc of started.reverse()) await proc.stop();
    await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    releaseDir(dir);
  };

  try {
    const [etcdPort, peerPort, apiPort] = await freePorts(3);
    const server = `https://127.0.0.1:${apiPort}`;
    const issuer = options.issuer ? options.issuer(server) : server;

    const ca = await createCa(`${name}-ca`);
    const serving = await createServingCert(ca, 'kube-apiserver', {
      dns: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
      ips: ['127.0.0.1', '10.0.0.1', ...(options.servingIps ?? [])],
    });
    const admin = await createClientCert(ca, 'admin', ['system:masters']);
    const rsa = () =>
      generateKeyPairSync('rsa', {
        modulusLength: 2048,
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });
    const sa = rsa();
    const next = options.rotatedSigningKey ? rsa() : undefined;
    const file = (n: string): string => join(dir, n);
    await Promise.all([
      writeFile(file('ca.crt'), ca.cert),
      writeFile(file('apiserver.crt'), serving.cert),
      writeFile(file('apiserver.key'), serving.key, { mode: 0o600 }),
      writeFile(file('sa.pub'), sa.publicKey),
      writeFile(file('sa.key'), sa.privateKey, { mode: 0o600 }),
      ...(next
        ? [
            writeFile(file('sa-next.pub'), next.publicKey),
            writeFile(file('sa-next.key'), next.privateKey, { mode: 0o600 }),
          ]
        : []),
      mkdir(file('etcd-data'), { mode: 0o700 }),
      mkdir(file('cert-dir')),
    ]);

    const overridden = new Set((options.extraArgs ?? []).map((arg) => arg.split('=')[0]));
    const serviceAccountKeyFiles = [
      file('sa.pub'),
      ...(next && options.rotatedSigningKey?.published ? [file('sa-next.pub')] : []),
    ];
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const etcd = startProcess(
      'etcd',
      bins.etcd,
      [
        `--name=${name}`,
        `--data-dir=${file('etcd-data')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=${name}=${peerUrl}`,
        '--unsafe-no-fsync=true',
      ],
      file('etcd.log'),
    );
    started.push(etcd);
    await waitUntil(etcd, 'etcd /health', async () => (await fetch(`${etcdUrl}/health`)).ok);

    const kubeApiserver = startProcess(
      'kube-apiserver',
      bins.kubeApiserver,
      [
        `--etcd-servers=${etcdUrl}`,
        `--secure-port=${apiPort}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--cert-dir=${file('cert-dir')}`,
        `--tls-cert-file=${file('apiserver.crt')}`,
        `--tls-private-key-file=${file('apiserver.key')}`,
        `--client-ca-file=${file('ca.crt')}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--allow-privileged=true',
        '--authorization-mode=RBAC',
        `--service-account-issuer=${issuer}`,
        ...serviceAccountKeyFiles.map((f) => `--service-account-key-file=${f}`),
        `--service-account-signing-key-file=${file(next ? 'sa-next.key' : 'sa.key')}`,
        ...(options.jwksUri ? [`--service-account-jwks-uri=${options.jwksUri}`] : []),
        // Lets TokenRequest honour expirationSeconds up to a day instead of capping it.
        '--service-account-max-token-expiration=48h',
        // No controller-manager creates the `default` ServiceAccount this plugin would require.
        '--disable-admission-plugins=ServiceAccount',
        // The endpoint reconciler refuses a loopback address for the `kubernetes` Service and
        // logs an error every 10 s; nothing here needs that Service's endpoints.
        '--endpoint-reconciler-type=none',
      ]
        .filter((arg) => !overridden.has(arg.split('=')[0]))
        .concat(options.extraArgs ?? []),
      file('kube-apiserver.log'),
    );
    started.push(kubeApiserver);

    const tls = { server, caPem: ca.cert, clientCertPem: admin.cert, clientKeyPem: admin.key };
    await waitUntil(kubeApiserver, 'kube-apiserver /readyz', async () => {
      const res = await httpsRequest(tls, 'GET', '/readyz', undefined, 2000);
      return res.status === 200;
    });

    const version = await httpsRequest(tls, 'GET', '/version', undefined, 2000);
    const kubeVersion = (JSON.parse(version.body) as { gitVersion: string }).gitVersion;
    const kubeconfigPath = file('kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml(name, server, ca.cert, admin), { mode: 0o600 });

    let stopping: Promise<void> | undefined;
    return {
      name,
      ...tls, // server, caPem, clientCertPem, clientKeyPem
      kubeconfigPath,
      issuer,
      serviceAccountKeyFiles,
      dir,
      pids: { etcd: etcd.pid, kubeApiserver: kubeApiserver.pid },
      kubeVersion,
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfigPath);
        return kc;
      },
      request: (method, path, body) => httpsRequest(tls, method, path, body),
      issueClientCert: (user, groups = []) => createClientCert(ca, user, groups),
      stop: () => (stopping ??= cleanup()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** Polls `check` every 100 ms until it returns true; fails early if `proc` exits. */
async function waitUntil(proc: Managed, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    const status = proc.exitStatus();
    if (status !== null) throw startupError(proc, `exited (${status}) while waiting for ${what}`);
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw startupError(proc, `not ready: ${what} timed out after ${READY_TIMEOUT_MS} ms${detail}`);
    }
    await sleep(100);
  }
}

function startupError(proc: Managed, reason: string): Error {
  return new Error(`${proc.name} ${reason}\n--- last lines of ${proc.logPath} ---\n${proc.logTail(40)}`);
}

/** Distinct free loopback ports: all are held open together, then released. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, async () => {
      const srv = createServer();
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', resolve);
      });
      return srv;
    }),
  );
  const ports = servers.map((srv) => (srv.address() as { port: number }).port);
  await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(resolve))));
  return ports;
}

function kubeconfigYaml(name: string, server: string, caPem: string, user: { cert: string; key: string }): string {
  const b64 = (s: string): string => Buffer.from(s).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': b64(caPem) } }],
    users: [{ name: 'admin', user: { 'client-certificate-data': b64(user.cert), 'client-key-data': b64(user.key) } }],
    contexts: [{ name, context: { cluster: name, user: 'admin' } }],
    'current-context': name,
  });
}
