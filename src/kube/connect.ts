// Where `serve` finds the API server, by kubeconfig.ts's precedence (the one client.ts loads too):
// --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config. In a Pod that is the service account's
// token and ca.crt and the service's address: no kubeconfig, no client-node. A kubeconfig file with
// static credentials (CA, client certificate, token: what tests and most admin kubeconfigs hold)
// is read here with the YAML parser (loaded by `serve` anyway, for Secret configs); one that needs more (an exec or auth-provider plugin, a proxy,
// several files in $KUBECONFIG) is handed to client-node, loaded only then.

import type { RequestOptions } from 'node:https';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { KubeApi, type KubeApiOptions, type KubeCredentials } from './api.ts';
import { defaultFile, kubeconfigSource, loadError, noCluster, noSuchContext, withContext } from './kubeconfig.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go rereads a token file this often; the kubelet rotates a projected token well before it expires. */
const TOKEN_REREAD_MS = 60_000;

/** A token file, read again once a minute has passed since the last read. */
export function tokenFile(path: string, now: () => number = Date.now): () => string {
  let token = '';
  let readAt = Number.NEGATIVE_INFINITY;
  return () => {
    if (now() - readAt >= TOKEN_REREAD_MS) {
      token = readFileSync(path, 'utf8').trim();
      readAt = now();
    }
    return token;
  };
}

/**
 * --kubeconfig, else in-cluster, else $KUBECONFIG or ~/.kube/config; with --context, that context
 * of the kubeconfig (never in-cluster credentials) instead of its current-context.
 */
export async function connectKube(path: string | undefined, context?: string): Promise<KubeApi> {
  const source = kubeconfigSource(path, context);
  try {
    if (source.kind === 'file') return await fromKubeconfigFile(source.path, context);
    if (source.kind === 'in-cluster') return new KubeApi(inCluster());
    // Several files are merged as client-go merges them: client-node's work.
    if (source.files.length > 1) return await fromClientNodeDefault(context);
    return await fromKubeconfigFile(defaultFile(source.files), context);
  } catch (err) {
    throw loadError(path, err);
  }
}

/** The Pod's own service account, as client-go's rest.InClusterConfig reads it (`dir`: its mount). */
export function inCluster(dir = SERVICE_ACCOUNT_DIR): KubeCredentials {
  const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: readFileSync(join(dir, 'ca.crt')),
    token: tokenFile(join(dir, 'token')),
  };
}

type Named<T> = { name?: string } & T;
interface Kubeconfig {
  'current-context'?: string;
  contexts?: Named<{ context?: { cluster?: string; user?: string } }>[];
  clusters?: Named<{ cluster?: Record<string, unknown> }>[];
  users?: Named<{ user?: Record<string, unknown> }>[];
}

/** What this file reads itself; anything else in a cluster or user entry goes to client-node. */
const CLUSTER_FIELDS = new Set([
  'server',
  'certificate-authority',
  'certificate-authority-data',
  'insecure-skip-tls-verify',
  'tls-server-name',
  'extensions',
]);
const USER_FIELDS = new Set([
  'client-certificate',
  'client-certificate-data',
  'client-key',
  'client-key-data',
  'token',
  'tokenFile',
  'extensions',
]);

async function fromKubeconfigFile(path: string, contextName?: string): Promise<KubeApi> {
  const doc = (parse(readFileSync(path, 'utf8')) ?? {}) as Kubeconfig;
  const named = doc.contexts?.find((c) => c.name === (contextName ?? doc['current-context']));
  if (contextName !== undefined && !named)
    throw noSuchContext(
      contextName,
      (doc.contexts ?? []).map((c) => c.name),
    );
  const context = named?.context;
  const cluster = doc.clusters?.find((c) => c.name === context?.cluster)?.cluster;
  if (!cluster?.server) throw noCluster();
  const user = doc.users?.find((u) => u.name === context?.user)?.user ?? {};
  if (Object.keys(cluster).some((k) => !CLUSTER_FIELDS.has(k)) || Object.keys(user).some((k) => !USER_FIELDS.has(k)))
    return fromClientNodeFile(path, contextName);
  const dir = dirname(path);
  const material = (data: unknown, file: unknown): Buffer | undefined => {
    if (typeof data === 'string' && data) return Buffer.from(data, 'base64');
    if (typeof file === 'string' && file) return readFileSync(isAbsolute(file) ? file : join(dir, file));
    return undefined;
  };
  const tokenPath = typeof user.tokenFile === 'string' && user.tokenFile ? user.tokenFile : undefined;
  return new KubeApi({
    server: String(cluster.server),
    ca: material(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert: material(user['client-certificate-data'], user['client-certificate']),
    key: material(user['client-key-data'], user['client-key']),
    token:
      typeof user.token === 'string' && user.token
        ? () => user.token as string
        : tokenPath
          ? tokenFile(isAbsolute(tokenPath) ? tokenPath : join(dir, tokenPath))
          : undefined,
    insecureSkipTlsVerify: cluster['insecure-skip-tls-verify'] === true,
    tlsServerName: typeof cluster['tls-server-name'] === 'string' ? cluster['tls-server-name'] : undefined,
  });
}

async function fromClientNodeFile(path: string, context?: string): Promise<KubeApi> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kubeApiOf(withContext(kc, context));
}

async function fromClientNodeDefault(context?: string): Promise<KubeApi> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kubeApiOf(withContext(kc, context));
}

/**
 * The API of a client-node KubeConfig (its current cluster and user): client-node applies the
 * credentials to each request, plugins included. The tests use it for configurations they change
 * in memory (another server address, a user without credentials).
 */
export function kubeApiOf(kc: KubeConfig, options: KubeApiOptions = {}): KubeApi {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw noCluster();
  return new KubeApi(
    {
      server: cluster.server,
      insecureSkipTlsVerify: cluster.skipTLSVerify,
      tlsServerName: cluster.tlsServerName,
      authenticate: async () => {
        const options: RequestOptions & { headers?: Record<string, string> } = {};
        await kc.applyToHTTPSOptions(options);
        return options;
      },
    },
    options,
  );
}
