// Builders for GEP-26 Secrets (golden, preview and e2e tests) and the e2e helpers for the
// token requestor.
import fastJsonPatch from 'fast-json-patch';
import type { Secret } from '../../src/kube/types.ts';
import type { PatchOperation } from '../../src/mutate/patch.ts';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CoreV1Api, CoordinationV1Api, RbacAuthorizationV1Api, type V1Secret } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import type { ControlPlane } from '../harness/control-plane.ts';
import { createServiceAccount, requestToken } from '../harness/control-plane.ts';
import { startProcess, type Managed } from '../harness/processes.ts';
import { until } from './webhook.ts';

export const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');
export const unb64 = (value: string | undefined): string | undefined =>
  value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');

export const ARN = 'arn:aws:iam::111122223333:role/s3-reader';
export const CLIENT = '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c';
export const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
export const SUBSCRIPTION = '0b1f6471-1bf0-4dda-aec3-cb9272f09590';
export const WIF_PROVIDER = 'projects/123456789012/locations/global/workloadIdentityPools/on-prem/providers/cluster-a';
export const GCP_AUDIENCE = `//iam.googleapis.com/${WIF_PROVIDER}`;
export const GCP_EMAIL = 'reader@my-project.iam.gserviceaccount.com';
export const IMPERSONATION_URL = `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${GCP_EMAIL}:generateAccessToken`;

export const awsConfig = { roleARN: ARN };
export const azureConfig = { clientID: CLIENT, tenantID: TENANT, subscriptionID: SUBSCRIPTION };
export const gcpCredentials = {
  universe_domain: 'googleapis.com',
  type: 'external_account',
  audience: GCP_AUDIENCE,
  subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
  token_url: 'https://sts.googleapis.com/v1/token',
  service_account_impersonation_url: IMPERSONATION_URL,
};
export const gcpConfig = { projectID: 'my-project', credentialsConfig: gcpCredentials };

export interface SecretOptions {
  name?: string;
  namespace?: string;
  /** The project's label value (default: the provider); null: none. */
  provider?: string | null;
  /** Gardener's two labels with this provider. */
  gardener?: string;
  labels?: Record<string, string>;
  /** The service-account annotation; null: none. Default: "app". */
  serviceAccount?: string | null;
  annotations?: Record<string, string>;
  /** The config: an object becomes JSON, a string is taken as is; null: no config key. */
  config?: unknown;
  /** Other data keys, as text. */
  data?: Record<string, string>;
}

export function labelledSecret(provider: string, options: SecretOptions = {}): Secret {
  const labels: Record<string, string> = { ...options.labels };
  const own = options.provider === undefined ? provider : options.provider;
  if (own !== null) labels['workload-identity-webhook.io/provider'] = own;
  if (options.gardener) {
    labels['security.gardener.cloud/purpose'] = 'workload-identity-token-requestor';
    labels['workloadidentity.security.gardener.cloud/provider'] = options.gardener;
  }
  const annotations: Record<string, string> = { ...options.annotations };
  const sa = options.serviceAccount === undefined ? (own !== null ? 'app' : null) : options.serviceAccount;
  if (sa !== null) annotations['workload-identity-webhook.io/service-account'] = sa;
  const data: Record<string, string> = {};
  const defaults: Record<string, unknown> = { aws: awsConfig, azure: azureConfig, gcp: gcpConfig };
  const config = options.config === undefined ? (defaults[provider] ?? {}) : options.config;
  if (config !== null) data.config = b64(typeof config === 'string' ? config : JSON.stringify(config));
  for (const [k, v] of Object.entries(options.data ?? {})) data[k] = b64(v);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: options.name ?? `${provider}-credentials`,
      namespace: options.namespace ?? 'team-a',
      labels,
      ...(Object.keys(annotations).length ? { annotations } : {}),
    },
    type: 'Opaque',
    data,
  };
}

/** Applies a patch the way the API server does: to a copy, validating every operation. */
export function applySecretPatch(secret: Secret, patch: PatchOperation[]): Secret {
  return fastJsonPatch.applyPatch(structuredClone(secret), patch as fastJsonPatch.Operation[], true, false).newDocument;
}

/** The Secret's data decoded to text. */
export function textData(secret: { data?: Record<string, string> | null } | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(secret?.data ?? {}).map(([k, v]) => [k, unb64(v)!]));
}

// ---- End to end: the token requestor as production runs it, and a Secrets-only registration ----
const CLI = resolve(import.meta.dirname, '../../dist/cli.js');
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
): Promise<RequestorProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (scripts/dev.sh test does)`);
  const n = ++requestors;
  const identity = `requestor-${n}`;
  const logPath = join(cp.dir, `token-requestor-${n}.log`);
  const proc = startProcess(
    identity,
    process.execPath,
    [
      CLI,
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
    logPath,
  );
  const logs = (): Record<string, unknown>[] => {
    const text = existsSync(logPath) ? readFileSync(logPath, 'utf8') : '';
    return text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  const started = await until('the token requestor to start', () => {
    if (proc.exitStatus() !== null)
      throw new Error(`token-requestor exited (${proc.exitStatus()}):\n${proc.logTail(20)}`);
    return logs().find((l) => l.msg === 'token requestor started');
  });
  const metricsPort = started.metricsPort as number;
  return {
    identity,
    metricsPort,
    process: proc,
    logs,
    metrics: async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(),
    stop: () => proc.stop(),
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

/** A JWT-shaped token with chosen claims and no valid signature: what a stale or foreign token looks like. */
export function fakeJwt(claims: Record<string, unknown>): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256', kid: 'fake' })}.${part(claims)}.${Buffer.from('not-a-signature').toString('base64url')}`;
}
