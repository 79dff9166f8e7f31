// Re-creates Azure/azure-workload-identity's webhook tests (pkg/webhook/webhook_test.go) as Pod
// fixtures of test/peer-compat.test.ts. Its cases test helpers (token expiry, authority host) and
// Handle; each becomes a Pod through the whole webhook, the expected Pod built with the peer's
// Handle as transcribed below (mutateContainers, addEnvironmentVariables, addProjectedVolumeMount,
// addProjectedVolume, buildVolumeName).
//
//   node scripts/peer-fixtures/azure.ts test/fixtures/peers/azure
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';

const COMMIT = '04d01a2fc7f5024290a38f6ccaf69561cf70455d';
const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error('usage: azure.ts <output dir>');

const PREFIX = 'azure-workload-identity-reserved-';
const MOUNT = '/var/run/secrets/azure/wi';
const TOKEN_PATH = 'token/azure-identity-token';
const CLIENT = '00000000-0000-0000-0000-000000000001';
const TENANT = '00000000-0000-0000-0000-000000000002';
const PUBLIC = 'https://login.microsoftonline.com/';
type Container = {
  name: string;
  image: string;
  env?: { name: string; value: string }[];
  volumeMounts?: unknown[];
  [k: string]: unknown;
};

const volumeName = (podName: string) =>
  PREFIX +
  createHash('sha256')
    .update(podName)
    .digest('hex')
    .slice(0, 63 - PREFIX.length);
/** The peer's Handle for a Pod without the proxy sidecar. */
function handle(
  pod: { metadata: { name: string }; spec: { initContainers?: Container[]; containers: Container[] } },
  clientId: string,
  tenantId: string,
  host: string,
  expiration: number,
) {
  const out = structuredClone(pod);
  const name = volumeName(pod.metadata.name);
  const mutate = (c: Container) => {
    const have = new Set((c.env ?? []).map((e) => e.name));
    const env = [...(c.env ?? [])];
    for (const e of [
      { name: 'AZURE_CLIENT_ID', value: clientId },
      { name: 'AZURE_TENANT_ID', value: tenantId },
      { name: 'AZURE_FEDERATED_TOKEN_FILE', value: `${MOUNT}/${TOKEN_PATH}` },
      { name: 'AZURE_AUTHORITY_HOST', value: host },
    ])
      if (!have.has(e.name) && e.value.length > 0) env.push(e);
    return { ...c, env, volumeMounts: [...(c.volumeMounts ?? []), { name, mountPath: MOUNT, readOnly: true }] };
  };
  if (out.spec.initContainers) out.spec.initContainers = out.spec.initContainers.map(mutate);
  out.spec.containers = out.spec.containers.map(mutate);
  (out.spec as Record<string, unknown>).volumes = [
    {
      name,
      projected: {
        sources: [
          {
            serviceAccountToken: {
              path: TOKEN_PATH,
              expirationSeconds: expiration,
              audience: 'api://AzureADTokenExchange',
            },
          },
        ],
      },
    },
  ];
  return out;
}

const write = (name: string, fixture: Record<string, unknown>) =>
  writeFileSync(
    join(outDir, `${name}.yaml`),
    stringify({ peer: 'Azure/azure-workload-identity', ...fixture }, { lineWidth: 0, aliasDuplicateObjects: false }),
  );
const sa = (name: string, annotations: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: { name, namespace: 'ns1', annotations },
});
const pod = (
  name: string,
  sa: string,
  annotations?: Record<string, string>,
  labels: Record<string, string> = { 'azure.workload.identity/use': 'true' },
) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'ns1', labels, ...(annotations ? { annotations } : {}) },
  spec: { serviceAccountName: sa, containers: [{ name: 'container', image: 'image' }] },
});

mkdirSync(outDir, { recursive: true });
const expiry = 'azure.workload.identity/service-account-token-expiration';
const client = { 'azure.workload.identity/client-id': CLIENT };

// TestGetServiceAccountTokenExpiration: the Pod's annotation, then the ServiceAccount's, 3600..86400.
const expirationCases: [
  string,
  string,
  Record<string, string> | undefined,
  Record<string, string>,
  number | undefined,
][] = [
  ['pod-token-expiry-annotation-invalid', 'pod token expiry annotation invalid', { [expiry]: '3600s' }, {}, undefined],
  [
    'service-account-token-expiry-annotation-invalid',
    'service account token expiry annotation invalid',
    undefined,
    { [expiry]: '3600s' },
    undefined,
  ],
  ['invalid-token-expiry-below-3600', 'invalid token expiry < 3600', undefined, { [expiry]: '3599' }, undefined],
  ['invalid-token-expiry-above-86400', 'invalid token expiry > 86400', undefined, { [expiry]: '86401' }, undefined],
  [
    'valid-token-expiry-in-service-account',
    'valid token expiry defined in service account',
    undefined,
    { [expiry]: '4800' },
    4800,
  ],
  [
    'pod-token-expiry-preferred',
    'token expiry in pod preferred over service account token expiry',
    { [expiry]: '4000' },
    { [expiry]: '4800' },
    4000,
  ],
];
for (const [file, name, podAnn, saAnn, exp] of expirationCases) {
  const p = pod('pod', 'sa', podAnn);
  write(`TestGetServiceAccountTokenExpiration-${file}`, {
    source: `pkg/webhook/webhook_test.go@${COMMIT}`,
    case: `TestGetServiceAccountTokenExpiration/${name}`,
    flags: { 'azure-tenant-id': TENANT },
    serviceAccount: sa('sa', { ...client, ...saAnn }),
    pod: p,
    ...(exp === undefined ? {} : { expected: handle(p, CLIENT, TENANT, PUBLIC, exp) }),
    differences: exp === undefined ? [] : ['injection-record', 'azure-token-layout-1.5'],
  });
}

// TestGetAzureAuthorityHost: --azure-cloud (the peer's cloud name); an invalid name fails both at start-up.
for (const [file, name, cloud, host] of [
  ['default-azure-environment', 'default azure environment', undefined, PUBLIC],
  ['public-cloud', 'public cloud', 'AzurePublicCloud', PUBLIC],
  ['us-government-cloud', 'us government cloud', 'AzureUSGovernmentCloud', 'https://login.microsoftonline.us/'],
  ['china-cloud', 'china cloud', 'AzureChinaCloud', 'https://login.chinacloudapi.cn/'],
  ['german-cloud', 'german cloud', 'AzureGermanCloud', 'https://login.microsoftonline.de/'],
] as const) {
  const p = pod('pod', 'sa');
  write(`TestGetAzureAuthorityHost-${file}`, {
    source: `pkg/webhook/webhook_test.go@${COMMIT}`,
    case: `TestGetAzureAuthorityHost/${name}`,
    flags: { 'azure-tenant-id': TENANT, ...(cloud ? { 'azure-cloud': cloud } : {}) },
    serviceAccount: sa('sa', client),
    pod: p,
    expected: handle(p, CLIENT, TENANT, host, 3600),
    differences: ['injection-record', 'azure-token-layout-1.5'],
  });
}

// TestHandle: ServiceAccounts "sa" and "default" with client-id "clientID" and expiry 4800, tenant
// "tenantID" from the config. Its Pods carry no label unless the case says so: the peer's Handle
// does not look at the label, its webhook configuration's objectSelector does.
for (const [file, name, saName, labelled] of [
  ['service-account-in-cache', 'service account in cache', 'sa', false],
  ['default-service-account-in-cache', 'default service account in cache', '', false],
  ['pod-has-the-required-label', 'pod has the required label, no warnings', 'sa', true],
] as const) {
  const p = pod('pod', saName, undefined, labelled ? { 'azure.workload.identity/use': 'true' } : {});
  write(`TestHandle-${file}`, {
    source: `pkg/webhook/webhook_test.go@${COMMIT}`,
    case: `TestHandle/${name}`,
    // "tenantID" is no tenant: our --azure-tenant-id refuses it at start-up, so the ServiceAccount names it.
    flags: {},
    serviceAccount: sa(saName || 'default', {
      'azure.workload.identity/client-id': 'clientID',
      'azure.workload.identity/tenant-id': 'tenantID',
      [expiry]: '4800',
    }),
    pod: p,
    expected: handle(p, 'clientID', 'tenantID', PUBLIC, 4800),
    differences: labelled ? ['injection-record', 'azure-token-layout-1.5'] : ['azure-opt-in-label'],
    ...(labelled
      ? {
          warnings: [
            'ServiceAccount ns1/sa annotation azure.workload.identity/client-id="clientID" is not a client id; expected a GUID such as 00000000-0000-0000-0000-000000000000; injecting it as written, as the peer webhook does (--strict refuses it)',
            'ServiceAccount ns1/sa annotation azure.workload.identity/tenant-id="tenantID" is not a tenant; expected a GUID or the tenant\'s domain; injecting it as written, as the peer webhook does (--strict refuses it)',
          ],
        }
      : {}),
  });
}
