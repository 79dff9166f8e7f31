// Re-creates Azure/azure-workload-identity's webhook tests (pkg/webhook/webhook_test.go), every
// case, as Pod fixtures of test/unit/peer-compat.test.ts. Most of its cases test helpers (token expiry,
// client and tenant, skip-containers, volume, env and mount helpers, the proxy); each becomes a
// Pod through the whole webhook where the helper's effect shows, the expected Pod built with the
// peer's Handle as transcribed below. Cases about the envelope or start-up are replayed in the test.
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
const A = 'azure.workload.identity';
type Env = { name: string; value: string };
type Container = {
  name: string;
  image?: string;
  env?: Env[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  [k: string]: unknown;
};
type Volume = { name: string; [k: string]: unknown };
type PodIn = {
  metadata: { name?: string; generateName?: string; annotations?: Record<string, string>; [k: string]: unknown };
  spec: {
    initContainers?: Container[];
    containers: Container[];
    volumes?: Volume[];
    hostNetwork?: boolean;
    [k: string]: unknown;
  };
  [k: string]: unknown;
};

/** The peer's settings: its config (tenant, cloud) and the proxy's images, native sidecars and log level. */
interface Peer {
  tenant: string;
  host: string;
  proxyImage: string;
  proxyInitImage: string;
  native: boolean;
  logLevel: string;
}
const PEER: Peer = {
  tenant: TENANT,
  host: PUBLIC,
  // Its release images (Makefile REGISTRY, IMAGE_VERSION), native sidecars on 1.32+, --log-level info.
  proxyImage: 'mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0',
  proxyInitImage: 'mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.6.0',
  native: true,
  logLevel: 'info',
};
/** The proxy settings of TestInjectProxy*Container, and our flags that give them. */
const TEST_PROXY = {
  proxyImage: 'my.proxy-image-registry.io/azwi/proxy:v1.0.0',
  proxyInitImage: 'my.proxy-image-registry.io/azwi/proxy-init:v1.0.0',
};
const TEST_PROXY_FLAGS = {
  'azure-proxy-image': TEST_PROXY.proxyImage,
  'azure-proxy-init-image': TEST_PROXY.proxyInitImage,
};

const volumeName = (podName: string) =>
  PREFIX +
  createHash('sha256')
    .update(podName)
    .digest('hex')
    .slice(0, 63 - PREFIX.length);
// Go's strconv.ParseInt(s, 10, bits).
const parseInt64 = (s: string) => (/^[+-]?\d+$/.test(s) ? Number(s) : Number.NaN);

/**
 * The peer's Handle (webhook.go@COMMIT), transcribed: the proxy, the token expiry, client and
 * tenant, skip-containers, mutateContainers, addProjectedVolume. undefined: the peer refuses the Pod.
 */
function handle(pod: PodIn, saAnnotations: Record<string, string> | undefined, peer: Peer = PEER): PodIn | undefined {
  if (saAnnotations === undefined) return undefined; // serviceaccounts "sa" not found
  const out = structuredClone(pod);
  const ann = out.metadata.annotations ?? {};
  const podName = out.metadata.name || `${out.metadata.generateName} (prefix)`;
  if (`${A}/inject-proxy-sidecar` in ann) {
    if (out.spec.hostNetwork) return undefined;
    const raw = ann[`${A}/proxy-sidecar-port`];
    const port = raw === undefined ? 8000 : parseInt64(raw);
    if (Number.isNaN(port) || port < -(2 ** 31) || port >= 2 ** 31) return undefined;
    const init = out.spec.initContainers ?? [];
    if (!init.some((c) => c.name === 'azwi-proxy-init'))
      init.push({
        name: 'azwi-proxy-init',
        image: peer.proxyInitImage,
        imagePullPolicy: 'IfNotPresent',
        securityContext: {
          capabilities: { add: ['NET_ADMIN'], drop: ['ALL'] },
          privileged: true,
          runAsNonRoot: false,
          runAsUser: 0,
        },
        env: [{ name: 'PROXY_PORT', value: String(port) }],
      });
    out.spec.initContainers = init;
    const sidecar = (list: Container[]) =>
      list.some((c) => c.name === 'azwi-proxy')
        ? list
        : [
            {
              name: 'azwi-proxy',
              image: peer.proxyImage,
              imagePullPolicy: 'IfNotPresent',
              args: [`--proxy-port=${port}`, `--log-level=${peer.logLevel}`],
              ports: [{ containerPort: port }],
              lifecycle: {
                postStart: {
                  exec: { command: ['/proxy', `--proxy-port=${port}`, '--probe', `--log-level=${peer.logLevel}`] },
                },
              },
              securityContext: {
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
                privileged: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
              },
              ...(peer.native ? { restartPolicy: 'Always' } : {}),
            },
            ...list,
          ];
    if (peer.native) out.spec.initContainers = sidecar(out.spec.initContainers);
    else out.spec.containers = sidecar(out.spec.containers);
  }
  const key = `${A}/service-account-token-expiration`;
  let expiration = 3600;
  if (ann[key]) expiration = parseInt64(ann[key]);
  else if (saAnnotations[key]) expiration = parseInt64(saAnnotations[key]);
  if (!(expiration >= 3600 && expiration <= 86400)) return undefined;
  const clientId = saAnnotations[`${A}/client-id`] ?? '';
  const tenantId = `${A}/tenant-id` in saAnnotations ? saAnnotations[`${A}/tenant-id`] : peer.tenant;
  const skip = new Set(ann[`${A}/skip-containers`] ? ann[`${A}/skip-containers`].split(';').map((n) => n.trim()) : []);
  const name = volumeName(podName);
  const mutate = (c: Container) => {
    if (skip.has(c.name)) return c;
    const have = new Set((c.env ?? []).map((e) => e.name));
    const env = [...(c.env ?? [])];
    for (const e of [
      { name: 'AZURE_CLIENT_ID', value: clientId },
      { name: 'AZURE_TENANT_ID', value: tenantId },
      { name: 'AZURE_FEDERATED_TOKEN_FILE', value: `${MOUNT}/${TOKEN_PATH}` },
      { name: 'AZURE_AUTHORITY_HOST', value: peer.host },
    ])
      if (!have.has(e.name) && e.value.length > 0) env.push(e);
    const mount = { name, mountPath: MOUNT, readOnly: true };
    const mounts = [...(c.volumeMounts ?? [])];
    const at = mounts.findIndex((m) => m.name === name);
    if (at >= 0) mounts[at] = mount;
    else mounts.push(mount);
    return { ...c, env, volumeMounts: mounts };
  };
  if (out.spec.initContainers) out.spec.initContainers = out.spec.initContainers.map(mutate);
  out.spec.containers = out.spec.containers.map(mutate);
  const volume = {
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
  };
  const volumes = out.spec.volumes ?? [];
  const at = volumes.findIndex((v) => v.name === name);
  if (at >= 0) volumes[at] = volume;
  else volumes.push(volume);
  out.spec.volumes = volumes;
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
const LAYOUT = ['injection-record', 'azure-token-both-layouts'];
const SOURCE = `pkg/webhook/webhook_test.go@${COMMIT}`;
const W = {
  noClient:
    'ServiceAccount ns1/sa has no azure.workload.identity/client-id annotation: AZURE_CLIENT_ID is not injected',
  noTenant:
    'no tenant: annotate the ServiceAccount with azure.workload.identity/tenant-id or start the webhook with --azure-tenant-id; AZURE_TENANT_ID is not injected',
  clientId: (sa: string, v: string) =>
    `ServiceAccount ns1/${sa} annotation azure.workload.identity/client-id="${v}" is not a client id; expected a GUID such as 00000000-0000-0000-0000-000000000000; injecting it as written, as the peer webhook does (--strict refuses it)`,
  tenantId: (sa: string, v: string) =>
    `ServiceAccount ns1/${sa} annotation azure.workload.identity/tenant-id="${v}" is not a tenant; expected a GUID or the tenant's domain; injecting it as written, as the peer webhook does (--strict refuses it)`,
};

/**
 * One case: our flags and the peer's settings, the ServiceAccount (absent: not found), the Pod; the
 * expected Pod is the peer's Handle's. A case that tests a helper becomes a Pod where the helper's
 * effect shows; `note` says how.
 */
function replay(
  file: string,
  name: string,
  c: {
    pod: PodIn;
    saName?: string;
    saAnnotations?: Record<string, string>;
    flags?: Record<string, string>;
    peer?: Peer;
    differences?: string[];
    warnings?: string[];
    reason?: string;
    note?: string;
  },
) {
  const expected = handle(c.pod, c.saAnnotations, c.peer);
  write(file, {
    source: SOURCE,
    case: name,
    ...(c.note ? { note: c.note } : {}),
    flags: c.flags ?? { 'azure-tenant-id': TENANT },
    ...(c.saAnnotations ? { serviceAccount: sa(c.saName ?? 'sa', c.saAnnotations) } : {}),
    pod: c.pod,
    ...(expected ? { expected } : {}),
    differences: c.differences ?? (expected ? LAYOUT : []),
    ...(c.reason ? { reason: c.reason } : {}),
    ...(c.warnings?.length ? { warnings: c.warnings } : {}),
  });
}

// TestGetServiceAccountTokenExpiration: the Pod's annotation, then the ServiceAccount's, 3600..86400.
for (const [file, name, podAnn, saAnn] of [
  ['pod-token-expiry-annotation-invalid', 'pod token expiry annotation invalid', { [expiry]: '3600s' }, {}],
  [
    'service-account-token-expiry-annotation-invalid',
    'service account token expiry annotation invalid',
    undefined,
    { [expiry]: '3600s' },
  ],
  ['invalid-token-expiry-below-3600', 'invalid token expiry < 3600', undefined, { [expiry]: '3599' }],
  ['invalid-token-expiry-above-86400', 'invalid token expiry > 86400', undefined, { [expiry]: '86401' }],
  [
    'valid-token-expiry-in-service-account',
    'valid token expiry defined in service account',
    undefined,
    { [expiry]: '4800' },
  ],
  [
    'pod-token-expiry-preferred',
    'token expiry in pod preferred over service account token expiry',
    { [expiry]: '4000' },
    { [expiry]: '4800' },
  ],
] as const) {
  replay(`TestGetServiceAccountTokenExpiration-${file}`, `TestGetServiceAccountTokenExpiration/${name}`, {
    pod: pod('pod', 'sa', podAnn),
    saAnnotations: { ...client, ...saAnn },
    ...(file.includes('invalid') ? { reason: 'InvalidTokenExpiration' } : {}),
  });
}

// TestGetAzureAuthorityHost: --azure-cloud (the peer's cloud name). Its invalid cloud name fails
// at start-up in both: test/unit/peer-compat.test.ts.
for (const [file, name, cloud, host] of [
  ['default-azure-environment', 'default azure environment', undefined, PUBLIC],
  ['public-cloud', 'public cloud', 'AzurePublicCloud', PUBLIC],
  ['us-government-cloud', 'us government cloud', 'AzureUSGovernmentCloud', 'https://login.microsoftonline.us/'],
  ['china-cloud', 'china cloud', 'AzureChinaCloud', 'https://login.chinacloudapi.cn/'],
  ['german-cloud', 'german cloud', 'AzureGermanCloud', 'https://login.microsoftonline.de/'],
] as const) {
  replay(`TestGetAzureAuthorityHost-${file}`, `TestGetAzureAuthorityHost/${name}`, {
    pod: pod('pod', 'sa'),
    saAnnotations: client,
    flags: { 'azure-tenant-id': TENANT, ...(cloud ? { 'azure-cloud': cloud } : {}) },
    peer: { ...PEER, host },
  });
}

// newPod of the peer's tests: one init container and one container.
const newPod = (
  saName: string,
  labels: Record<string, string> | undefined,
  annotations: Record<string, string> | undefined,
  hostNetwork: boolean,
): PodIn => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'pod', namespace: 'ns1', ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) },
  spec: {
    ...(saName ? { serviceAccountName: saName } : {}),
    initContainers: [{ name: 'init-container', image: 'init-container-image' }],
    containers: [{ name: 'container', image: 'image' }],
    ...(hostNetwork ? { hostNetwork } : {}),
  },
});
const USE = { 'azure.workload.identity/use': 'true' };

// TestHandle: ServiceAccounts "sa" and "default" with client-id "clientID" and expiry 4800, tenant
// "tenantID" from the config. Its Pods carry no label unless the case says so: the peer's Handle
// does not look at the label, its webhook configuration's objectSelector does. "tenantID" is no
// tenant: our --azure-tenant-id refuses it at start-up, so the ServiceAccount names it. In cache or
// not is the peer's lookup (informer cache, then the API server), as ours: the same Pod.
const handleSa = {
  'azure.workload.identity/client-id': 'clientID',
  'azure.workload.identity/tenant-id': 'tenantID',
  [expiry]: '4800',
};
for (const [file, name, saName, labelled] of [
  ['service-account-in-cache', 'service account in cache', 'sa', false],
  ['service-account-not-in-cache', 'service account not in cache', 'sa', false],
  ['default-service-account-in-cache', 'default service account in cache', '', false],
  ['default-service-account-not-in-cache', 'default service account not in cache', '', false],
  ['pod-has-the-required-label', 'pod has the required label, no warnings', 'sa', true],
] as const) {
  replay(`TestHandle-${file}`, `TestHandle/${name}`, {
    pod: newPod(saName, labelled ? USE : undefined, undefined, false),
    saName: saName || 'default',
    saAnnotations: handleSa,
    flags: {},
    differences: labelled ? LAYOUT : ['azure-opt-in-label'],
    warnings: labelled ? [W.clientId('sa', 'clientID'), W.tenantId('sa', 'tenantID')] : [],
  });
}
replay(
  'TestHandle-pod-has-the-required-label-restart-policy-in-init-container',
  'TestHandle/pod has the required label, restart policy in init container',
  {
    pod: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'pod', namespace: 'ns1', labels: USE },
      spec: {
        initContainers: [{ name: 'init-container', image: 'init-container-image', restartPolicy: 'Always' }],
        containers: [{ name: 'container', image: 'image', resources: {} }],
      },
    },
    saName: 'default',
    saAnnotations: handleSa,
    flags: {},
    warnings: [W.clientId('default', 'clientID'), W.tenantId('default', 'tenantID')],
  },
);

// TestHandleError: the Pods the peer refuses. Its undecodable object ("invalid") is an envelope
// case, replayed in test/unit/peer-compat.test.ts.
replay('TestHandleError-service-account-not-found', 'TestHandleError/service account not found', {
  pod: newPod('sa', USE, undefined, true),
  differences: ['serviceaccount-missing'],
  note: "The peer refuses the Pod itself; we admit it, and the API server's ServiceAccount admission refuses it right after.",
});
replay('TestHandleError-pod-has-host-network', 'TestHandleError/pod has host network', {
  pod: newPod('sa', USE, { 'azure.workload.identity/inject-proxy-sidecar': 'true' }, true),
  saAnnotations: { ...client, [expiry]: '4800' },
  reason: 'ProxyWithHostNetwork',
});
replay('TestHandleError-invalid-proxy-port', 'TestHandleError/invalid proxy port', {
  pod: newPod(
    'sa',
    USE,
    { 'azure.workload.identity/inject-proxy-sidecar': 'true', 'azure.workload.identity/proxy-sidecar-port': 'invalid' },
    false,
  ),
  saAnnotations: { ...client, [expiry]: '4800' },
  reason: 'InvalidProxyPort',
});
replay('TestHandleError-invalid-sa-token-expiry', 'TestHandleError/invalid sa token expiry', {
  pod: newPod('sa', USE, { [expiry]: 'invalid' }, false),
  saAnnotations: { ...client, [expiry]: '4800' },
  reason: 'InvalidTokenExpiration',
});

// The helper tests, each as a Pod where the helper's effect shows. Values a case does not test are
// GUIDs (no admission warnings); the peer's own values where the case is about them.
const one = (
  name: string,
  containers: Container[],
  extra: { annotations?: Record<string, string>; volumes?: Volume[] } = {},
): PodIn => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'ns1', labels: USE, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
  spec: { serviceAccountName: 'sa', containers, ...(extra.volumes ? { volumes: extra.volumes } : {}) },
});
const tenant = { 'azure.workload.identity/tenant-id': TENANT };

// TestGetClientID
replay('TestGetClientID-client-id-not-present', 'TestGetClientID/client id not present', {
  pod: one('pod', [{ name: 'container', image: 'image' }]),
  saAnnotations: {},
  warnings: [W.noClient],
});
replay('TestGetClientID-client-id-present', 'TestGetClientID/client id present', {
  pod: one('pod', [{ name: 'container', image: 'image' }]),
  saAnnotations: { 'azure.workload.identity/client-id': 'client-id' },
  warnings: [W.clientId('sa', 'client-id')],
});

// TestGetTenantID: the annotation wins; else the config's tenant. The case's config tenant
// "tenant-id" is refused by our --azure-tenant-id at start-up, so a GUID stands for it.
replay('TestGetTenantID-tenant-id-annotation-defined', 'TestGetTenantID/tenant ID annotation defined', {
  pod: one('pod', [{ name: 'container', image: 'image' }]),
  saAnnotations: { ...client, 'azure.workload.identity/tenant-id': 'tenant-id' },
  flags: {},
  peer: { ...PEER, tenant: '' },
  warnings: [W.tenantId('sa', 'tenant-id')],
});
replay(
  'TestGetTenantID-tenant-id-annotation-not-defined-use-default',
  'TestGetTenantID/tenant ID annotation not defined, use default',
  {
    pod: one('pod', [{ name: 'container', image: 'image' }]),
    saAnnotations: client,
  },
);

// TestGetSkipContainers: a Pod with container1..3, so the skipped ones show.
const three = () => ['container1', 'container2', 'container3'].map((name) => ({ name, image: 'image' }));
for (const [file, name, value] of [
  ['no-skip-containers-defined', 'no skip containers defined', undefined],
  ['one-skip-container-defined', 'one skip container defined', 'container1'],
  [
    'multiple-skip-containers-defined-delimited-by-semicolon',
    'multiple skip containers defined delimited by ;',
    'container1;container2',
  ],
  [
    'multiple-skip-containers-defined-with-extra-space',
    'multiple skip containers defined with extra space',
    'container1; container2',
  ],
] as const) {
  replay(`TestGetSkipContainers-${file}`, `TestGetSkipContainers/${name}`, {
    pod: one('pod', three(), value ? { annotations: { 'azure.workload.identity/skip-containers': value } } : {}),
    saAnnotations: client,
  });
}

// TestAddProjectedVolume: the Pod's own volume under the peer's name (the hash of "pod"), as
// written or with another audience and path: the peer overwrites it.
const reserved = (path: string, audience: string) => ({
  name: volumeName('pod'),
  projected: { sources: [{ serviceAccountToken: { path, expirationSeconds: 3600, audience } }] },
});
for (const [file, name, volumes] of [
  ['no-volumes-in-the-pod', 'no volumes in the pod', undefined],
  [
    'azure-identity-token-projected-volume-already-exists',
    'azure-identity-token projected volume already exists',
    [reserved(TOKEN_PATH, 'api://AzureADTokenExchange')],
  ],
  [
    'existing-projected-service-account-token-volume-overridden-with-desired-audience',
    'existing projected service account token volume overridden with desired audience',
    [reserved('my-projected-volume', 'aud')],
  ],
] as const) {
  replay(`TestAddProjectedVolume-${file}`, `TestAddProjectedVolume/${name}`, {
    pod: one('pod', [{ name: 'container', image: 'image' }], volumes ? { volumes: [...volumes] } : {}),
    saAnnotations: client,
    differences: volumes ? ['injection-record', 'azure-reserved-volume-kept', 'azure-token-both-layouts'] : LAYOUT,
  });
}

// TestAddEnvironmentVariables: the container's own values stay; empty values are not added.
const idEnv = (client: string, tenant: string, file: string) => [
  { name: 'AZURE_CLIENT_ID', value: client },
  { name: 'AZURE_TENANT_ID', value: tenant },
  { name: 'AZURE_FEDERATED_TOKEN_FILE', value: file },
  { name: 'AZURE_AUTHORITY_HOST', value: PUBLIC },
];
for (const [file, name, env] of [
  ['environment-variables-added-to-container', 'environment variables added to container', undefined],
  [
    'existing-environment-variables-not-replaced',
    'existing environment variables not replaced',
    idEnv('myClientID', 'myTenantID', `${MOUNT}/${TOKEN_PATH}`),
  ],
  [
    'environment-variables-added-to-existing-list',
    'environment variables added to existing list',
    [{ name: 'MY_ENV_VAR', value: 'test' }],
  ],
] as const) {
  replay(`TestAddEnvironmentVariables-${file}`, `TestAddEnvironmentVariables/${name}`, {
    pod: one('pod', [{ name: 'cont1', image: 'image', ...(env ? { env: [...env] } : {}) }]),
    saAnnotations: { ...client, ...tenant },
    // The container's own identity variables win, in the peer as here; we say so.
    warnings: (env ?? [])
      .filter((e) => ['AZURE_CLIENT_ID', 'AZURE_TENANT_ID', 'AZURE_FEDERATED_TOKEN_FILE'].includes(e.name))
      .map(
        (e) =>
          `container "cont1" sets ${e.name} itself, so it does not use the azure identity the webhook injects; remove ${e.name} from the container to use workload identity (docs/install.md#keeping-an-old-credential)`,
      ),
  });
}
replay(
  'TestAddEnvironmentVariables-environment-variables-are-not-added-when-empty',
  'TestAddEnvironmentVariables/environment variables are not added when empty',
  {
    pod: one('pod', [{ name: 'cont1', image: 'image' }]),
    saAnnotations: {},
    flags: {},
    peer: { ...PEER, tenant: '' },
    warnings: [W.noClient, W.noTenant],
    note: "No client id and no tenant: neither is injected. The case's empty authority host exists in the peer only for an AzureStackCloud file without activeDirectoryEndpoint, which we refuse at start-up (test/unit/peer-compat.test.ts); here the cloud is public.",
  },
);

// TestAddProjectServiceAccountTokenVolumeMount
replay(
  'TestAddProjectServiceAccountTokenVolumeMount-volume-mount-added-to-container',
  'TestAddProjectServiceAccountTokenVolumeMount/volume mount added to container',
  {
    pod: one('pod', [{ name: 'cont1', image: 'image' }]),
    saAnnotations: client,
  },
);
replay(
  'TestAddProjectServiceAccountTokenVolumeMount-volume-mount-added-to-existing-volume-mounts-for-container',
  'TestAddProjectServiceAccountTokenVolumeMount/volume mount added to existing volume mounts for container',
  {
    pod: one(
      'pod',
      [{ name: 'cont1', image: 'image', volumeMounts: [{ name: 'my-volume-mount', mountPath: '/var/run/pods' }] }],
      {
        volumes: [{ name: 'my-volume-mount', emptyDir: {} }],
      },
    ),
    saAnnotations: client,
  },
);

// TestMutateContainers
for (const [file, name, containers, skip] of [
  ['no-containers', 'no containers', [], undefined],
  ['one-container', 'one container', [{ name: 'my-container', image: 'my-image' }], undefined],
  [
    'one-container-and-one-skip-container',
    'one container and one skip container',
    [
      { name: 'my-container', image: 'my-image' },
      { name: 'skip-container', image: 'skip-image' },
    ],
    'skip-container',
  ],
] as const) {
  replay(`TestMutateContainers-${file}`, `TestMutateContainers/${name}`, {
    pod: one('pod', [...containers], skip ? { annotations: { 'azure.workload.identity/skip-containers': skip } } : {}),
    saAnnotations: { ...client, ...tenant },
  });
}

// TestInjectProxyInitContainer: port 8080, the test's images; a Pod annotated for the proxy.
const proxyAnn = (port?: string) => ({
  'azure.workload.identity/inject-proxy-sidecar': 'true',
  ...(port ? { 'azure.workload.identity/proxy-sidecar-port': port } : {}),
});
const testInit = {
  name: 'azwi-proxy-init',
  image: TEST_PROXY.proxyInitImage,
  imagePullPolicy: 'IfNotPresent',
  securityContext: {
    capabilities: { add: ['NET_ADMIN'], drop: ['ALL'] },
    privileged: true,
    runAsNonRoot: false,
    runAsUser: 0,
  },
  env: [{ name: 'PROXY_PORT', value: '8080' }],
};
for (const [file, name, init] of [
  ['no-init-containers', 'no init containers', undefined],
  ['proxy-init-container-manually-injected', 'proxy init container manually injected', [testInit]],
  [
    'inject-proxy-init-container-to-existing-init-containers',
    'inject proxy init container to existing init containers',
    [{ name: 'my-container', image: 'my-image' }],
  ],
] as const) {
  const p = one('pod', [{ name: 'container', image: 'image' }], { annotations: proxyAnn('8080') });
  if (init) p.spec.initContainers = structuredClone([...init]);
  replay(`TestInjectProxyInitContainer-${file}`, `TestInjectProxyInitContainer/${name}`, {
    pod: p,
    saAnnotations: client,
    flags: { 'azure-tenant-id': TENANT, ...TEST_PROXY_FLAGS },
    peer: { ...PEER, ...TEST_PROXY },
  });
}

// TestInjectProxySidecarContainer: port 8081, log level debug; a first container, or a native sidecar.
const testSidecar = {
  name: 'azwi-proxy',
  image: TEST_PROXY.proxyImage,
  imagePullPolicy: 'IfNotPresent',
  args: ['--proxy-port=8081', '--log-level=debug'],
  ports: [{ containerPort: 8081 }],
  lifecycle: { postStart: { exec: { command: ['/proxy', '--proxy-port=8081', '--probe', '--log-level=debug'] } } },
  securityContext: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    privileged: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
  },
};
for (const [file, name, containers, native] of [
  ['no-containers', 'no containers', [], false],
  ['proxy-sidecar-container-manually-injected', 'proxy sidecar container manually injected', [testSidecar], false],
  [
    'inject-proxy-sidecar-container-to-existing-containers',
    'inject proxy sidecar container to existing containers',
    [{ name: 'my-container', image: 'my-image' }],
    false,
  ],
  [
    'inject-proxy-native-sidecar-container-to-existing-containers-when-restartPolicy-is-set',
    'inject proxy native sidecar container to existing containers when restartPolicy is set',
    [{ name: 'my-container', image: 'my-image' }],
    true,
  ],
] as const) {
  replay(`TestInjectProxySidecarContainer-${file}`, `TestInjectProxySidecarContainer/${name}`, {
    pod: one('pod', structuredClone([...containers]), { annotations: proxyAnn('8081') }),
    saAnnotations: client,
    flags: {
      'azure-tenant-id': TENANT,
      ...TEST_PROXY_FLAGS,
      'azure-proxy-log-level': 'debug',
      'azure-proxy-native-sidecar': String(native),
    },
    peer: { ...PEER, ...TEST_PROXY, logLevel: 'debug', native },
  });
}

// TestShouldInjectProxySidecar: the peer's default images, native sidecar, log level info.
replay('TestShouldInjectProxySidecar-pod-not-annotated', 'TestShouldInjectProxySidecar/pod not annotated', {
  pod: one('pod', [{ name: 'container', image: 'image' }]),
  saAnnotations: client,
});
replay(
  'TestShouldInjectProxySidecar-pod-is-annotated-with-inject-proxy-sidecar-true',
  'TestShouldInjectProxySidecar/pod is annotated with azure.workload.identity/inject-proxy-sidecar=true',
  {
    pod: one('pod', [{ name: 'container', image: 'image' }], { annotations: proxyAnn() }),
    saAnnotations: client,
  },
);

// TestGetProxyPort: the port shows only where the proxy is injected, so each Pod asks for it.
for (const [file, name, annotations] of [
  ['pod-not-annotated', 'pod not annotated', proxyAnn()],
  [
    'pod-has-no-proxy-sidecar-port-annotation',
    'pod has no azure.workload.identity/proxy-sidecar-port annotation',
    { test: 'test', ...proxyAnn() },
  ],
  [
    'pod-is-annotated-with-proxy-sidecar-port-8080',
    'pod is annotated with azure.workload.identity/proxy-sidecar-port=8080',
    proxyAnn('8080'),
  ],
  [
    'pod-is-annotated-with-proxy-sidecar-port-invalid',
    'pod is annotated with azure.workload.identity/proxy-sidecar-port=invalid',
    proxyAnn('invalid'),
  ],
] as const) {
  replay(`TestGetProxyPort-${file}`, `TestGetProxyPort/${name}`, {
    pod: one('pod', [{ name: 'container', image: 'image' }], { annotations }),
    saAnnotations: client,
    ...(annotations['azure.workload.identity/proxy-sidecar-port'] === 'invalid' ? { reason: 'InvalidProxyPort' } : {}),
    note: 'The Pod also carries inject-proxy-sidecar: the port shows only in the proxy containers.',
  });
}
