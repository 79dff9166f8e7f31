// Re-creates pfnet-research/gcp-workload-identity-federation-webhook's Pod mutation tests
// (webhooks/mutator_test.go, webhooks/mutatepod_test.go) as fixtures of test/unit/peer-compat.test.ts,
// and its helper tests (identityconfig_test.go, mutatepod_parts_test.go,
// external_account_config_test.go) as tables under helpers/.
// Their expected Pods are Go expressions built from the peer's helpers (gcloudSetupContainer,
// volumesToAddOrReplace, ...); the helpers are transcribed below from mutatepod_parts.go.
//
//   node scripts/peer-fixtures/pfnet.ts test/fixtures/peers/pfnet
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';

const COMMIT = '80d482e41d638c6b77c2570da81ff44386ca2d00';
const [outDir] = process.argv.slice(2);
if (!outDir) throw new Error('usage: pfnet.ts <output dir>');

const D = 'cloud.google.com';
const TOKEN_MOUNT = '/var/run/secrets/sts.googleapis.com/serviceaccount';
const CONFIG_MOUNT = '/var/run/secrets/gcloud/config';
const DIRECT_MOUNT = '/var/run/secrets/workload-identity';
const IMAGE = 'gcr.io/google.com/cloudsdktool/google-cloud-cli:stable';
// The region the peer's tests construct the mutator with (DefaultGCloudRegion): a test constant;
// the binary's -gcp-default-region defaults to "", so the fixtures set our flag to it.
const REGION = 'asia-northeast1';
const SETUP_RESOURCES = { requests: { cpu: '100m' } };
type Mode = 'gcloud' | 'direct';

// mutatepod_parts.go
const tokenVolume = (audience: string, expirationSeconds: number, defaultMode: number) => ({
  name: 'gcp-iam-token',
  projected: { sources: [{ serviceAccountToken: { audience, expirationSeconds, path: 'token' } }], defaultMode },
});
const volumes = (audience: string, exp: number, mode: number, m: Mode) => [
  tokenVolume(audience, exp, mode),
  m === 'direct'
    ? {
        name: 'external-credential-config',
        downwardAPI: {
          items: [
            {
              path: 'federation.json',
              fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${D}/external-credentials-json']` },
            },
          ],
          defaultMode: mode,
        },
      }
    : { name: 'gcloud-config', emptyDir: {} },
];
const mounts = (m: Mode) => [
  { name: 'gcp-iam-token', mountPath: TOKEN_MOUNT, readOnly: true },
  m === 'direct'
    ? { name: 'external-credential-config', mountPath: DIRECT_MOUNT, readOnly: true }
    : { name: 'gcloud-config', mountPath: CONFIG_MOUNT },
];
const envReplace = (m: Mode) =>
  m === 'direct'
    ? [{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: `${DIRECT_MOUNT}/federation.json` }]
    : [
        { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: `${CONFIG_MOUNT}/federation.json` },
        { name: 'CLOUDSDK_CONFIG', value: CONFIG_MOUNT },
      ];
const envIfAbsent = (region: string, project: string) => [
  { name: 'CLOUDSDK_COMPUTE_REGION', value: region },
  { name: 'CLOUDSDK_CORE_PROJECT', value: project },
];
const setupContainer = (
  provider: string,
  email: string,
  project: string,
  runAsUser: number | undefined,
  resources: unknown,
) => ({
  name: 'gcloud-setup',
  image: IMAGE,
  command: [
    'sh',
    '-c',
    [
      'gcloud iam workload-identity-pools create-cred-config \\',
      '  $(GCP_WORKLOAD_IDENTITY_PROVIDER) \\',
      '  --service-account=$(GCP_SERVICE_ACCOUNT) \\',
      '  --output-file=$(CLOUDSDK_CONFIG)/federation.json \\',
      `  --credential-source-file=${TOKEN_MOUNT}/token`,
      'gcloud auth login --cred-file=$(CLOUDSDK_CONFIG)/federation.json',
      '',
    ].join('\n'),
  ],
  volumeMounts: mounts('gcloud'),
  env: [
    { name: 'GCP_WORKLOAD_IDENTITY_PROVIDER', value: provider },
    { name: 'GCP_SERVICE_ACCOUNT', value: email },
    { name: 'CLOUDSDK_CONFIG', value: CONFIG_MOUNT },
    { name: 'CLOUDSDK_CORE_PROJECT', value: project },
  ],
  securityContext: {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    ...(runAsUser !== undefined ? { runAsUser } : {}),
  },
  ...(resources ? { resources } : {}),
});
// external_account_config.go: json.Marshal of ExternalAccountCredentials, field order kept.
const credentialsJson = (provider: string, email: string) =>
  JSON.stringify({
    type: 'external_account',
    audience: `//iam.googleapis.com/${provider}`,
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: 'https://sts.googleapis.com/v1/token',
    service_account_impersonation_url: `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${email}:generateAccessToken`,
    credential_source: { file: `${TOKEN_MOUNT}/token`, format: { type: 'text' } },
  });
// mutator_test.go decorateDefault: what envtest's API server defaults in every container.
const decorate = <T extends object>(c: T) => ({
  ...c,
  terminationMessagePath: '/dev/termination-log',
  terminationMessagePolicy: 'File',
  imagePullPolicy: 'IfNotPresent',
});

const write = (name: string, fixture: Record<string, unknown>) =>
  writeFileSync(
    join(outDir, `${name}.yaml`),
    stringify(
      { peer: 'pfnet-research/gcp-workload-identity-federation-webhook', ...fixture },
      { lineWidth: 0, aliasDuplicateObjects: false },
    ),
  );
const sa = (name: string, namespace: string, annotations: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: { name, namespace, annotations },
});
const pod = (
  namespace: string,
  serviceAccountName: string,
  initContainers: unknown[],
  containers: unknown[],
  extra: Record<string, unknown> = {},
  meta: Record<string, unknown> = {},
) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'test-pod', namespace, ...meta },
  spec: { serviceAccountName, initContainers, containers, ...extra },
});

mkdirSync(outDir, { recursive: true });

// ---- mutator_test.go: the webhook behind envtest's API server (webhook_suite_test.go flags).
{
  const provider =
    'projects/{PROJECT_NUMBER}/locations/{LOCATION}/workloadIdentityPools/{POOL_ID}/providers/{PROVIDER_ID}';
  const email = 'sa@project.iam.gserviceaccount.com';
  const flags = { 'gcp-setup-container-resources': JSON.stringify(SETUP_RESOURCES), 'gcp-default-region': REGION };
  const saAnn = {
    [`${D}/workload-identity-provider`]: provider,
    [`${D}/service-account-email`]: email,
    [`${D}/audience`]: 'test-audience',
    [`${D}/token-expiration`]: '3600',
    [`${D}/gcloud-run-as-user`]: '1000',
  };
  const podAnn = {
    [`${D}/workload-identity-provider`]: provider,
    [`${D}/service-account-email`]: email,
    [`${D}/audience`]: 'test-audience',
    [`${D}/token-expiration`]: '3600',
  };
  const ictr = { name: 'ictr', image: 'busybox:test' };
  const ctr = { name: 'ctr', image: 'busybox:test' };
  const providerWarning = `ServiceAccount default/default annotation ${D}/workload-identity-provider="${provider}" is not a workload identity provider; expected projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>; passing it through, as the peer webhook does (--strict refuses it)`;
  const common = { source: `webhooks/mutator_test.go@${COMMIT}`, flags };
  write('mutator-simple-success-gcloud', {
    ...common,
    case: 'GCPWorkloadIdentityMutator Simple Success Case should inject gcloud configurations',
    serviceAccount: sa('default', 'default', saAnn),
    pod: pod('default', 'default', [ictr], [ctr]),
    expected: pod(
      'default',
      'default',
      [
        decorate(setupContainer(provider, email, 'project', 1000, SETUP_RESOURCES)),
        decorate({
          ...ictr,
          volumeMounts: mounts('gcloud'),
          env: [...envReplace('gcloud'), ...envIfAbsent(REGION, 'project')],
        }),
      ],
      [
        decorate({
          ...ctr,
          volumeMounts: mounts('gcloud'),
          env: [...envReplace('gcloud'), ...envIfAbsent(REGION, 'project')],
        }),
      ],
      { volumes: volumes('test-audience', 3600, 0o440, 'gcloud') },
      { annotations: podAnn },
    ),
    differences: ['injection-record', 'api-server-defaults', 'gcp-google-cloud-project', 'gcp-setup-script-env'],
    warnings: [providerWarning],
  });
  write('mutator-direct-injection', {
    ...common,
    case: 'GCPWorkloadIdentityMutator Direct Injection Case should inject external cred configurations via annotation & downwardAPI Volume',
    serviceAccount: sa('direct', 'default', { ...saAnn, [`${D}/injection-mode`]: 'direct' }),
    pod: pod('default', 'direct', [ictr], [ctr]),
    expected: pod(
      'default',
      'direct',
      [
        decorate({
          ...ictr,
          volumeMounts: mounts('direct'),
          env: [...envReplace('direct'), ...envIfAbsent(REGION, 'project')],
        }),
      ],
      [
        decorate({
          ...ctr,
          volumeMounts: mounts('direct'),
          env: [...envReplace('direct'), ...envIfAbsent(REGION, 'project')],
        }),
      ],
      { volumes: volumes('test-audience', 3600, 0o440, 'direct') },
      { annotations: { ...podAnn, [`${D}/external-credentials-json`]: credentialsJson(provider, email) } },
    ),
    differences: ['injection-record', 'api-server-defaults', 'gcp-google-cloud-project', 'gcp-credentials-file-form'],
    warnings: [providerWarning.replace('default/default', 'default/direct')],
  });
  write('mutator-serviceaccount-empty', {
    ...common,
    case: 'GCPWorkloadIdentityMutator No mutation cases When Spec.ServiceAccount is empty should mutate nothing',
    serviceAccount: sa('default', 'default', saAnn),
    pod: pod('default', '', [ictr], [ctr]),
    expected: pod('default', '', [decorate(ictr)], [decorate(ctr)]),
    differences: ['empty-serviceaccount-name'],
  });
  write('mutator-serviceaccount-not-found', {
    ...common,
    case: 'GCPWorkloadIdentityMutator No mutation cases When Spec.ServiceAccount specifies non-existing ServiceAccount should mutate nothing',
    pod: pod('default', 'not-found', [ictr], [ctr]),
    expected: pod('default', 'not-found', [decorate(ictr)], [decorate(ctr)]),
    differences: ['api-server-defaults'],
  });
}

// ---- mutatepod_test.go: mutatePod with an idConfig; the idConfig is the ServiceAccount's annotations.
{
  const provider =
    'projects/{ProjectNumber}/locations/{Location}/workloadIdentityPools/{PoolId}/providers/{ProviderId}';
  const email = 'sa@demo.iam.gserviceaccount.com';
  const flags = {
    'gcp-setup-container-resources': JSON.stringify(SETUP_RESOURCES),
    'gcp-file-mode': '0400',
    'gcp-default-region': REGION,
  };
  const common = { source: `webhooks/mutatepod_test.go@${COMMIT}`, flags };
  const providerWarning = `ServiceAccount default/app annotation ${D}/workload-identity-provider="${provider}" is not a workload identity provider; expected projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>; passing it through, as the peer webhook does (--strict refuses it)`;
  const full = {
    [`${D}/workload-identity-provider`]: provider,
    [`${D}/service-account-email`]: email,
    [`${D}/audience`]: 'my-audience',
    [`${D}/token-expiration`]: '10000',
    [`${D}/gcloud-run-as-user`]: '1000',
  };
  write('mutatepod-unparsed-token-expiration', {
    ...common,
    case: 'GCPWorkloadIdentityMutator.mutatePod When passed Pod has unparsed token expiration annotation should raise error',
    serviceAccount: sa('app', 'default', full),
    pod: pod('default', 'app', [], [], {}, { annotations: { [`${D}/token-expiration`]: 'not-integer' } }),
    differences: [],
  });
  const replaced = {
    name: 'ctr',
    image: 'busybox',
    volumeMounts: [{ name: 'gcp-iam-token', mountPath: '/to/be/replaced' }],
    env: [
      { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: 'to-be-replaced' },
      { name: 'CLOUDSDK_COMPUTE_REGION', value: 'not-to-be-replaced' },
    ],
  };
  const expectedEnv = [
    { name: 'GOOGLE_APPLICATION_CREDENTIALS', value: `${CONFIG_MOUNT}/federation.json` },
    { name: 'CLOUDSDK_COMPUTE_REGION', value: 'not-to-be-replaced' },
    { name: 'CLOUDSDK_CONFIG', value: CONFIG_MOUNT },
    { name: 'CLOUDSDK_CORE_PROJECT', value: 'demo' },
  ];
  write('mutatepod-conflicted-and-override-fields', {
    ...common,
    case: 'GCPWorkloadIdentityMutator.mutatePod When passed Pod does have conflicted and override fields should replace reqiured fields and override configurations',
    serviceAccount: sa('app', 'default', full),
    pod: pod(
      'default',
      'app',
      [{ name: 'gcloud-setup', image: 'busybox' }, replaced],
      [replaced],
      {
        volumes: [{ name: 'gcp-iam-token', emptyDir: {} }],
      },
      {
        annotations: {
          [`${D}/workload-identity-provider`]: 'to-be-replaced',
          [`${D}/service-account-email`]: 'to-be-replaced',
          [`${D}/audience`]: 'my-audience',
          [`${D}/token-expiration`]: '3601',
        },
      },
    ),
    expected: pod(
      'default',
      'app',
      [
        setupContainer(provider, email, 'demo', 1000, SETUP_RESOURCES),
        { name: 'ctr', image: 'busybox', volumeMounts: mounts('gcloud'), env: expectedEnv },
      ],
      [{ name: 'ctr', image: 'busybox', volumeMounts: mounts('gcloud'), env: expectedEnv }],
      { volumes: volumes('my-audience', 3601, 0o400, 'gcloud') },
      {
        annotations: {
          [`${D}/workload-identity-provider`]: provider,
          [`${D}/service-account-email`]: email,
          [`${D}/audience`]: 'my-audience',
          [`${D}/token-expiration`]: '3601',
        },
      },
    ),
    differences: ['denied-replaces-user-data'],
  });
  write('mutatepod-no-conflicted-fields', {
    ...common,
    case: "GCPWorkloadIdentityMutator.mutatePod When passed Pod doesn't have no conflicted and no override fields should mutate required fields",
    serviceAccount: sa('app', 'default', {
      [`${D}/workload-identity-provider`]: provider,
      [`${D}/service-account-email`]: email,
    }),
    pod: pod('default', 'app', [{ name: 'ctr', image: 'busybox' }], [{ name: 'ctr', image: 'busybox' }]),
    expected: pod(
      'default',
      'app',
      [
        setupContainer(provider, email, 'demo', undefined, SETUP_RESOURCES),
        {
          name: 'ctr',
          image: 'busybox',
          volumeMounts: mounts('gcloud'),
          env: [...envReplace('gcloud'), ...envIfAbsent(REGION, 'demo')],
        },
      ],
      [
        {
          name: 'ctr',
          image: 'busybox',
          volumeMounts: mounts('gcloud'),
          env: [...envReplace('gcloud'), ...envIfAbsent(REGION, 'demo')],
        },
      ],
      { volumes: volumes('sts.googleapis.com', 86400, 0o400, 'gcloud') },
      {
        annotations: {
          [`${D}/workload-identity-provider`]: provider,
          [`${D}/service-account-email`]: email,
          [`${D}/audience`]: 'sts.googleapis.com',
          [`${D}/token-expiration`]: '86400',
        },
      },
    ),
    differences: ['injection-record', 'gcp-google-cloud-project', 'gcp-setup-script-env'],
    warnings: [providerWarning],
  });
}

// ---- Helper tests: cases about a function whose effect is not a whole Pod. Each becomes a row of
// a table checked against our corresponding function (test/unit/peer-compat.test.ts, "pfnet's helpers").
const helpersDir = join(outDir, 'helpers');
mkdirSync(helpersDir, { recursive: true });
const writeHelper = (name: string, fixture: Record<string, unknown>) =>
  writeFileSync(
    join(helpersDir, `${name}.yaml`),
    stringify(
      { peer: 'pfnet-research/gcp-workload-identity-federation-webhook', ...fixture },
      { lineWidth: 0, aliasDuplicateObjects: false },
    ),
  );

// identityconfig_test.go: NewGCPWorkloadIdentityConfig reads a ServiceAccount's annotations. Ours
// is the GCP provider's reading of the same ServiceAccount; unset fields are pfnet's defaults.
{
  const provider =
    'projects/{PROJECT_NUMBER}/locations/{LOCATION}/workloadIdentityPools/{POOL_ID}/providers/{PROVIDER_ID}';
  const email = 'sa@project.iam.gserviceaccount.com';
  const full = {
    [`${D}/workload-identity-provider`]: provider,
    [`${D}/service-account-email`]: email,
    [`${D}/audience`]: 'test-audience',
    [`${D}/token-expiration`]: '3600',
  };
  const config = (extra: Record<string, unknown>) => ({
    workloadIdentityProvider: provider,
    serviceAccountEmail: email,
    audience: null,
    tokenExpirationSeconds: null,
    injectionMode: '',
    ...extra,
  });
  const fullConfig = { audience: 'test-audience', tokenExpirationSeconds: 3600 };
  const S = 'NewGCPWorkloadIdentityConfig Success Case When';
  const F = 'NewGCPWorkloadIdentityConfig Failure Case When';
  writeHelper('identityconfig', {
    source: `webhooks/identityconfig_test.go@${COMMIT}`,
    function: 'NewGCPWorkloadIdentityConfig',
    ours: 'the GCP Pod provider (src/clouds/gcp/pod.ts) on a ServiceAccount with these annotations',
    // pfnet's flags (--token-audience, --token-expiration) and its gcloud mode for an unset mode.
    peerDefaults: { audience: 'sts.googleapis.com', tokenExpirationSeconds: 86400, injectionMode: 'gcloud' },
    cases: [
      {
        case: `${S} ServiceAccount has no annotation can create GCPWorkloadIdentityConfig`,
        annotations: {},
        expected: null,
        differences: [],
      },
      {
        case: `${S} ServiceAccount with minimal required annotations can create GCPWorkloadIdentityConfig`,
        annotations: { [`${D}/workload-identity-provider`]: provider, [`${D}/service-account-email`]: email },
        expected: config({}),
        differences: [],
      },
      {
        case: `${S} ServiceAccount with full annotations can create GCPWorkloadIdentityConfig`,
        annotations: full,
        expected: config(fullConfig),
        differences: [],
      },
      {
        case: `${S} ServiceAccount with 'direct' injection mode annotation can create GCPWorkloadIdentityConfig`,
        annotations: { ...full, [`${D}/injection-mode`]: 'direct' },
        expected: config({ ...fullConfig, injectionMode: 'direct' }),
        differences: [],
      },
      {
        case: `${S} ServiceAccount with 'gcloud' injection mode annotation can create GCPWorkloadIdentityConfig`,
        annotations: { ...full, [`${D}/injection-mode`]: 'gcloud' },
        expected: config({ ...fullConfig, injectionMode: 'gcloud' }),
        differences: [],
      },
      {
        case: `${F} ServiceAccount without some required annotations should raise error (without service-account-email annotation)`,
        annotations: { [`${D}/workload-identity-provider`]: provider },
        error: 'must set at a time',
        differences: ['gcp-incomplete-pfnet-annotations'],
      },
      {
        case: `${F} ServiceAccount without some required annotations should raise error (without workload-identity-provider annotation)`,
        annotations: { [`${D}/service-account-email`]: email },
        error: 'must set at a time',
        differences: ['gcp-incomplete-pfnet-annotations'],
      },
      {
        case: `${F} ServiceAccount with malformed workload-identity-provider annotation should raise error`,
        annotations: {
          [`${D}/workload-identity-provider`]: 'malformed-workload-identity-provider',
          [`${D}/service-account-email`]: email,
        },
        error: 'must be form of',
        differences: [],
      },
      {
        case: `${F} ServiceAccount with unparsable token-expiration annotation should raise error`,
        annotations: {
          [`${D}/workload-identity-provider`]: provider,
          [`${D}/service-account-email`]: email,
          [`${D}/token-expiration`]: 'not integer',
        },
        error: 'must be positive integer string',
        differences: [],
      },
      {
        case: `${F} ServiceAccount with unparsable injection mode annotation should raise error`,
        annotations: {
          [`${D}/workload-identity-provider`]: provider,
          [`${D}/service-account-email`]: email,
          [`${D}/injection-mode`]: 'not-valid',
        },
        error: 'mode must be',
        differences: [],
      },
    ],
  });
}

// mutatepod_parts_test.go TestGcloudSetupContainer: gcloudSetupContainer's arguments and result.
{
  const args = {
    workloadIdProvider:
      'projects/12345/locations/global/workloadIdentityPools/on-prem-kubernetes/providers/this-cluster',
    saEmail: 'app-x@project.iam.googleapis.com',
    project: 'project',
    gcloudImage: IMAGE,
  };
  const template = setupContainer(args.workloadIdProvider, args.saEmail, args.project, undefined, undefined);
  writeHelper('gcloudSetupContainer', {
    source: `webhooks/mutatepod_parts_test.go@${COMMIT}`,
    function: 'gcloudSetupContainer',
    ours: 'gcloudSetupContainer (src/clouds/gcp/gcloud-setup.ts), same arguments',
    cases: [
      {
        case: 'TestGcloudSetupContainer/Without runAsUser and resources',
        input: { ...args, runAsUser: null, resources: null },
        expected: template,
        differences: ['gcp-setup-script-env'],
      },
      {
        case: 'TestGcloudSetupContainer/With runAsUser',
        input: { ...args, runAsUser: 1000, resources: null },
        expected: setupContainer(args.workloadIdProvider, args.saEmail, args.project, 1000, undefined),
        differences: ['gcp-setup-script-env'],
      },
      {
        case: 'TestGcloudSetupContainer/With resources',
        input: { ...args, runAsUser: null, resources: SETUP_RESOURCES },
        expected: setupContainer(args.workloadIdProvider, args.saEmail, args.project, undefined, SETUP_RESOURCES),
        differences: ['gcp-setup-script-env'],
      },
    ],
  });
}

// external_account_config_test.go TestExternalAccountCredentials_Render: the file, indented.
writeHelper('ExternalAccountCredentials.Render', {
  source: `webhooks/external_account_config_test.go@${COMMIT}`,
  function: 'ExternalAccountCredentials.Render(true)',
  ours: "externalAccountConfig (src/clouds/gcp/external-account.ts) with the token at pfnet's path, indented by two spaces",
  cases: [
    {
      case: 'TestExternalAccountCredentials_Render/basic',
      input: {
        audience:
          '//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/workload-identity-pool/providers/workload-identity',
        gsaEmail: 'workload@PROJECT.iam.gserviceaccount.com',
      },
      expected: JSON.stringify(
        JSON.parse(
          credentialsJson(
            'projects/123456789/locations/global/workloadIdentityPools/workload-identity-pool/providers/workload-identity',
            'workload@PROJECT.iam.gserviceaccount.com',
          ),
        ),
        null,
        2,
      ),
      differences: ['gcp-credentials-file-form'],
    },
  ],
});
