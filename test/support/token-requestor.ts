// The token requestor as production runs it (a child process with exactly its RBAC), and a
// Secrets-only registration, for the e2e tests.
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CoordinationV1Api, RbacAuthorizationV1Api, type V1Secret } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { type LoggingOptions, startCli } from '../harness/cli-process.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import { createServiceAccount, requestToken } from '../harness/control-plane.ts';
import type { Managed } from '../harness/processes.ts';
import { until } from '../harness/until.ts';
import { labelledSecret } from './secrets.ts';

let requestors = 0;

export interface RequestorProcess {
  identity: string;
  metricsPort: number;
  process: Managed;
  logs(): Record<string, unknown>[];
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/** `token-requestor` in a child process, with the given kubeconfig (e.g. one with exactly its RBAC). */
export async function startTokenRequestor(
  cp: ControlPlane,
  kubeconfigPath: string,
  args: string[] = [],
  /** A wrapper (a memory cgroup) and environment (NODE_OPTIONS), as for the webhook. */
  options: LoggingOptions = {},
): Promise<RequestorProcess> {
  const n = ++requestors;
  const identity = `requestor-${n}`;
  const cli = startCli(
    identity,
    [
      'token-requestor',
      '--kubeconfig',
      kubeconfigPath,
      '--metrics-host',
      '127.0.0.1',
      '--metrics-port',
      '0',
      '--identity',
      identity,
      ...args,
    ],
    join(cp.dir, `token-requestor-${n}.log`),
    options,
  );
  const started = await cli.waitForLog('token requestor started', 'the token requestor to start');
  const metricsPort = started.metricsPort as number;
  return {
    identity,
    metricsPort,
    process: cli.process,
    logs: cli.logs,
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
    stop: cli.stop,
  };
}

/**
 * The rules of the chart's token-requestor ClusterRole. Bound cluster-wide here (the requestor
 * without --namespaces); the chart binds them per served namespace and adds an admission policy,
 * which test/e2e/token-requestor-privileges.test.ts runs exactly as rendered.
 */
export const REQUESTOR_CLUSTER_RULES = [
  { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch', 'patch'] },
  { apiGroups: [''], resources: ['serviceaccounts'], verbs: ['get'] },
  { apiGroups: [''], resources: ['serviceaccounts/token'], verbs: ['create'] },
  { apiGroups: [''], resources: ['events'], verbs: ['create'] },
];
export function requestorLeaseRules(leaseName: string) {
  return [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [leaseName], verbs: ['get', 'update'] },
  ];
}

/**
 * A ServiceAccount with exactly the requestor's RBAC, and a kubeconfig that authenticates as it
 * with a TokenRequest token: the e2e tests prove that RBAC is enough.
 */
export async function requestorKubeconfig(cp: ControlPlane, namespace: string, leaseName: string): Promise<string> {
  const name = 'token-requestor';
  await createServiceAccount(cp, namespace, name);
  const rbac = cp.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
  const subjects = [{ kind: 'ServiceAccount', name, namespace }];
  await rbac.createClusterRole({ body: { metadata: { name: 'wiw-token-requestor' }, rules: REQUESTOR_CLUSTER_RULES } });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'wiw-token-requestor' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'wiw-token-requestor' },
      subjects,
    },
  });
  await rbac.createNamespacedRole({
    namespace,
    body: { metadata: { name: 'wiw-token-requestor-lease' }, rules: requestorLeaseRules(leaseName) },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'wiw-token-requestor-lease' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'wiw-token-requestor-lease' },
      subjects,
    },
  });
  const token = await requestToken(cp, namespace, name, cp.issuer, 7200);
  const path = join(cp.dir, 'token-requestor.kubeconfig');
  writeFileSync(
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
      users: [{ name, user: { token } }],
      contexts: [{ name: 'cp', context: { cluster: 'cp', user: name } }],
      'current-context': 'cp',
    }),
    { mode: 0o600 },
  );
  return path;
}

/** Dry-run creations of a labelled Secret until the API server returns it mutated. */
export async function waitForSecretWebhook(cp: ControlPlane, namespace: string, serviceAccount: string): Promise<void> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  let i = 0;
  await until(
    'the API server to call the webhook for Secrets',
    async () => {
      const probe = labelledSecret('aws', { name: `probe-${i++}`, namespace, serviceAccount });
      const res = await core.createNamespacedSecret({ namespace, dryRun: 'All', body: probe as V1Secret });
      return res.data?.roleARN !== undefined || undefined;
    },
    30_000,
  );
}

export async function leaseHolder(cp: ControlPlane, namespace: string, name: string): Promise<string | undefined> {
  try {
    const lease = await cp.kubeConfig().makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace, name });
    return lease.spec?.holderIdentity || undefined;
  } catch {
    return undefined;
  }
}

/** The process's established TCP connections to `port` (its sockets matched in /proc/net/tcp*). */
export function connectionsTo(pid: number, port: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  let n = 0;
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // f[2]: remote address:port; f[3]: state (01 established); f[9]: inode.
      if (f.length > 9 && f[3] === '01' && f[2].endsWith(`:${hexPort}`) && inodes.has(f[9])) n++;
    }
  }
  return n;
}

/** Runs `each` over `items`, `concurrency` at a time (creating hundreds of namespaces one by one is slow). */
export async function inParallel<T>(items: readonly T[], concurrency: number, each: (item: T) => Promise<unknown>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await each(items[next++]);
    }),
  );
}
