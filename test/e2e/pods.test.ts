// End to end: the webhook runs as `serve` in a child process, a real kube-apiserver calls it,
// and every assertion is on what the API server stored (its validation judges every patch).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api, type V1Pod, type V1Container } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  requestToken,
  startControlPlane,
  verifyServiceAccountToken,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { startSidecarInjector } from '../support/sidecar-injector.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN as ARN, TENANT, WIF_PROVIDER as PROVIDER } from '../support/identities.ts';

const NS = 'team-a';
const GCP_AUDIENCE = `//iam.googleapis.com/${PROVIDER}`;

let cp: ControlPlane;
let wh: WebhookProcess;
let core: CoreV1Api;

const objectSelector = {
  matchExpressions: [
    { key: 'workload-identity-webhook.io/skip', operator: 'DoesNotExist' },
    { key: 'eks.amazonaws.com/skip-pod-identity-webhook', operator: 'DoesNotExist' },
  ],
};

before(async () => {
  cp = await startControlPlane({ name: 'e2e-pods' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  for (const ns of [NS, 'reinvoke', 'reinvoke-sa', 'static'])
    await createNamespace(cp, ns, { 'e2e.workload-identity-webhook.io/main': 'on' });
  await createNamespace(cp, 'down-fail');
  await createNamespace(cp, 'down-ignore');
  const accounts: [string, string, Record<string, string>][] = [
    [NS, 'aws', { 'eks.amazonaws.com/role-arn': ARN, 'eks.amazonaws.com/token-expiration': '3600' }],
    [NS, 'azure', { 'azure.workload.identity/client-id': CLIENT }],
    // Google's defaults (the Flux/GKE dialect): the file inside the token's projected volume.
    [
      NS,
      'gcp',
      {
        'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
        'iam.gke.io/gcp-service-account': GCP_EMAIL,
      },
    ],
    // A ServiceAccount written for pfnet's webhook, no injection-mode: pfnet's gcloud mode.
    [
      NS,
      'pfnet',
      {
        'cloud.google.com/workload-identity-provider': PROVIDER,
        'cloud.google.com/service-account-email': GCP_EMAIL,
      },
    ],
    [NS, 'flux', { 'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER }],
    [
      NS,
      'multi',
      {
        'eks.amazonaws.com/role-arn': ARN,
        'azure.workload.identity/client-id': CLIENT,
        'gcp.auth.fluxcd.io/workload-identity-provider': PROVIDER,
      },
    ],
    // A role that goes into the profiles' config file is refused with or without --strict.
    [NS, 'bad-arn', { 'eks.amazonaws.com/role-arns': 'writer=arn:aws:iam::123:role/x' }],
    // Role chaining whose chain is a cycle: refused, naming it.
    [
      NS,
      'chain-cycle',
      {
        'eks.amazonaws.com/role-arns': `a=${ARN},b=${ARN}`,
        'eks.amazonaws.com/source-profiles': 'a=b\nb=a',
      },
    ],
    [NS, 'plain', {}],
    ['reinvoke', 'aws', { 'eks.amazonaws.com/role-arn': ARN }],
    ['reinvoke-sa', 'azure', { 'azure.workload.identity/client-id': CLIENT }],
    ['reinvoke-sa', 'aws', { 'eks.amazonaws.com/role-arn': ARN }],
    // Mirror Pods name no ServiceAccount: the namespace's default one is what an injection would read.
    ['static', 'default', { 'eks.amazonaws.com/role-arn': ARN }],
    ['down-fail', 'aws', { 'eks.amazonaws.com/role-arn': ARN }],
    ['down-ignore', 'aws', { 'eks.amazonaws.com/role-arn': ARN }],
  ];
  for (const [ns, name, annotations] of accounts) await createServiceAccount(cp, ns, name, annotations);
  wh = await startWebhook(cp, ['--azure-tenant-id', TENANT]);
  await registerWebhook(
    cp,
    wh,
    'a-workload-identity',
    [
      {
        objectSelector,
        namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/main': 'on' } },
      },
    ],
    NS,
  );
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
});

let seq = 0;
async function createPod(
  namespace: string,
  serviceAccountName: string,
  opts: { labels?: Record<string, string>; annotations?: Record<string, string>; spec?: Record<string, unknown> } = {},
): Promise<V1Pod> {
  return core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: `p${++seq}`, labels: opts.labels, annotations: opts.annotations },
      spec: { serviceAccountName, containers: [{ name: 'app', image: 'busybox' }], ...opts.spec },
    } as V1Pod,
  });
}

/** The client library returns class instances; compare their JSON. */
function plain(value: unknown) {
  return JSON.parse(JSON.stringify(value));
}

function env(c: V1Container | undefined) {
  return (c?.env ?? []).map((e) => ({ name: e.name, value: e.value }));
}

function volume(pod: V1Pod, name: string) {
  return pod.spec!.volumes?.find((v) => v.name === name);
}

const awsMount = {
  name: 'aws-iam-token',
  mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount',
  readOnly: true,
};
const awsEnv = [
  { name: 'AWS_ROLE_ARN', value: ARN },
  { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
];

describe('stored Pods carry exactly what each provider needs', () => {
  test('AWS: token volume, read-only mount and web-identity env vars', async () => {
    const pod = await createPod(NS, 'aws');
    assert.deepEqual(JSON.parse(JSON.stringify(volume(pod, 'aws-iam-token'))), {
      name: 'aws-iam-token',
      projected: {
        defaultMode: 420,
        sources: [{ serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 3600, path: 'token' } }],
      },
    });
    assert.deepEqual(plain(pod.spec!.containers[0].volumeMounts), [awsMount]);
    assert.deepEqual(env(pod.spec!.containers[0]), awsEnv);
  });

  test('Azure: opt-in label, tenant from the flag, authority host, federated token file', async () => {
    const pod = await createPod(NS, 'azure', { labels: { 'azure.workload.identity/use': 'true' } });
    assert.deepEqual(env(pod.spec!.containers[0]), [
      { name: 'AZURE_CLIENT_ID', value: CLIENT },
      { name: 'AZURE_TENANT_ID', value: TENANT },
      { name: 'AZURE_FEDERATED_TOKEN_FILE', value: '/var/run/secrets/azure/tokens/azure-identity-token' },
      { name: 'AZURE_AUTHORITY_HOST', value: 'https://login.microsoftonline.com/' },
    ]);
    const v = volume(pod, 'azure-identity-token');
    assert.equal(v?.projected?.sources?.[0].serviceAccountToken?.audience, 'api://AzureADTokenExchange');
    assert.equal(v?.projected?.sources?.[0].serviceAccountToken?.expirationSeconds, 3600);
    // One token where the peer's releases 0.8-1.5 and 1.6+ put it: .../tokens/ and .../wi/token/azure-identity-token.
    assert.deepEqual(plain(pod.spec!.containers[0].volumeMounts), [
      { name: 'azure-identity-token', mountPath: '/var/run/secrets/azure/tokens', readOnly: true },
      { name: 'azure-identity-token', mountPath: '/var/run/secrets/azure/wi/token', readOnly: true },
    ]);
    const unlabelled = await createPod(NS, 'azure');
    assert.equal(unlabelled.spec!.volumes, undefined);
  });

  test("Azure, inject-proxy-sidecar: the peer's proxy init container and native sidecar, and the API server accepts the Pod", async () => {
    const pod = await createPod(NS, 'azure', {
      labels: { 'azure.workload.identity/use': 'true' },
      annotations: {
        'azure.workload.identity/inject-proxy-sidecar': 'true',
        'azure.workload.identity/proxy-sidecar-port': '8080',
      },
      spec: { initContainers: [{ name: 'migrate', image: 'busybox' }] },
    });
    const inits = pod.spec!.initContainers!;
    assert.deepEqual(
      inits.map((c) => c.name),
      ['azwi-proxy', 'migrate', 'azwi-proxy-init'],
    );
    const [proxy, , init] = inits;
    assert.equal(proxy.image, 'mcr.microsoft.com/oss/azure/workload-identity/proxy:v1.6.0');
    assert.equal(proxy.restartPolicy, 'Always');
    assert.deepEqual(proxy.args, ['--proxy-port=8080', '--log-level=info']);
    assert.deepEqual(plain(proxy.ports), [{ containerPort: 8080, protocol: 'TCP' }]);
    assert.equal(init.image, 'mcr.microsoft.com/oss/azure/workload-identity/proxy-init:v1.6.0');
    assert.equal(init.securityContext?.privileged, true);
    assert.deepEqual(init.securityContext?.capabilities?.add, ['NET_ADMIN']);
    assert.deepEqual(env(init)[0], { name: 'PROXY_PORT', value: '8080' });
    // The proxy exchanges the token: it gets the identity like every container.
    for (const c of [proxy, init, pod.spec!.containers[0]]) {
      assert.equal(env(c).find((e) => e.name === 'AZURE_CLIENT_ID')?.value, CLIENT, c.name);
      assert.ok(
        c.volumeMounts?.some((m) => m.mountPath === '/var/run/secrets/azure/tokens'),
        c.name,
      );
    }
  });

  test('Azure, inject-proxy-sidecar with hostNetwork: refused with the reason, as the peer refuses it', async () => {
    await assert.rejects(
      createPod(NS, 'azure', {
        labels: { 'azure.workload.identity/use': 'true' },
        annotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' },
        spec: { hostNetwork: true },
      }),
      (err: { body?: string }) =>
        /the proxy sidecar cannot be injected into a Pod with hostNetwork: true/.test(String(err.body)),
    );
  });

  test('GCP: credential file projected from an annotation beside the token, with impersonation', async () => {
    const pod = await createPod(NS, 'gcp');
    const config = JSON.parse(pod.metadata!.annotations!['cloud.google.com/external-credentials-json']);
    assert.equal(config.type, 'external_account');
    assert.equal(config.audience, GCP_AUDIENCE);
    assert.match(
      config.service_account_impersonation_url,
      /reader@my-project\.iam\.gserviceaccount\.com:generateAccessToken$/,
    );
    assert.equal(config.credential_source.file, '/var/run/secrets/sts.googleapis.com/serviceaccount/token');
    const v = JSON.parse(JSON.stringify(volume(pod, 'gcp-iam-token')));
    assert.deepEqual(v.projected.sources[1], {
      downwardAPI: {
        items: [
          {
            path: 'federation.json',
            fieldRef: {
              apiVersion: 'v1',
              fieldPath: "metadata.annotations['cloud.google.com/external-credentials-json']",
            },
          },
        ],
      },
    });
    assert.deepEqual(env(pod.spec!.containers[0]), [
      {
        name: 'GOOGLE_APPLICATION_CREDENTIALS',
        value: '/var/run/secrets/sts.googleapis.com/serviceaccount/federation.json',
      },
      { name: 'CLOUDSDK_CORE_PROJECT', value: 'my-project' },
      { name: 'GOOGLE_CLOUD_PROJECT', value: 'my-project' },
    ]);
    assert.equal(pod.spec!.initContainers, undefined);
  });

  test("GCP, pfnet dialect without injection-mode: pfnet's gcloud setup init container, and the API server accepts the Pod", async () => {
    const pod = await createPod(NS, 'pfnet', { spec: { initContainers: [{ name: 'migrate', image: 'busybox' }] } });
    assert.deepEqual(
      pod.spec!.initContainers!.map((c) => c.name),
      ['gcloud-setup', 'migrate'],
    );
    const setup = pod.spec!.initContainers![0];
    assert.equal(setup.image, 'gcr.io/google.com/cloudsdktool/google-cloud-cli:stable');
    assert.deepEqual(setup.command!.slice(0, 2), ['sh', '-c']);
    assert.deepEqual(env(setup), [
      { name: 'GCP_WORKLOAD_IDENTITY_PROVIDER', value: PROVIDER },
      { name: 'GCP_SERVICE_ACCOUNT', value: GCP_EMAIL },
      { name: 'CLOUDSDK_CONFIG', value: '/var/run/secrets/gcloud/config' },
      { name: 'CLOUDSDK_CORE_PROJECT', value: 'my-project' },
    ]);
    const token = plain(volume(pod, 'gcp-iam-token'));
    assert.equal(token.projected.sources[0].serviceAccountToken.audience, 'sts.googleapis.com');
    assert.equal(token.projected.defaultMode, 0o440);
    assert.deepEqual(plain(volume(pod, 'gcloud-config')), { name: 'gcloud-config', emptyDir: {} });
    for (const c of [pod.spec!.initContainers![1], pod.spec!.containers[0]]) {
      assert.equal(
        env(c).find((e) => e.name === 'GOOGLE_APPLICATION_CREDENTIALS')?.value,
        '/var/run/secrets/gcloud/config/federation.json',
      );
      assert.equal(env(c).find((e) => e.name === 'CLOUDSDK_CONFIG')?.value, '/var/run/secrets/gcloud/config');
      assert.deepEqual(
        c.volumeMounts!.map((m) => m.mountPath),
        ['/var/run/secrets/sts.googleapis.com/serviceaccount', '/var/run/secrets/gcloud/config'],
      );
    }
  });

  test('a mirror Pod is stored unchanged although its ServiceAccount carries an identity', async () => {
    // What a kubelet creates for a static Pod: no ServiceAccount, a node, the mirror annotation.
    // The API server's ServiceAccount admission refuses a mirror Pod that mounts a token, which
    // is what an injection from the namespace's default ServiceAccount would add.
    const pod = await core.createNamespacedPod({
      namespace: 'static',
      body: {
        metadata: { name: 'etcd-node-1', annotations: { 'kubernetes.io/config.mirror': 'e2e-static-pod' } },
        spec: { nodeName: 'node-1', containers: [{ name: 'app', image: 'busybox' }] },
      } as V1Pod,
    });
    assert.equal(pod.spec!.volumes, undefined);
    assert.equal(pod.spec!.containers[0].env, undefined);
    assert.deepEqual(pod.metadata!.annotations, { 'kubernetes.io/config.mirror': 'e2e-static-pod' });
  });

  test('GCP, Flux dialect: direct resource access', async () => {
    const pod = await createPod(NS, 'flux');
    const config = JSON.parse(pod.metadata!.annotations!['cloud.google.com/external-credentials-json']);
    assert.equal(config.service_account_impersonation_url, undefined);
    assert.equal(config.token_info_url, 'https://sts.googleapis.com/v1/introspect');
  });

  test('multi-cloud: three tokens, three audiences, no collision', async () => {
    const pod = await createPod(NS, 'multi', { labels: { 'azure.workload.identity/use': 'true' } });
    assert.deepEqual(
      pod.spec!.volumes!.map((v) => v.name),
      ['aws-iam-token', 'azure-identity-token', 'gcp-iam-token'],
    );
    assert.deepEqual(
      pod.spec!.containers[0].volumeMounts!.map((m) => m.mountPath),
      [
        '/var/run/secrets/eks.amazonaws.com/serviceaccount',
        '/var/run/secrets/azure/tokens',
        '/var/run/secrets/azure/wi/token',
        '/var/run/secrets/sts.googleapis.com/serviceaccount',
      ],
    );
  });

  test('opted out by label: stored as written', async () => {
    for (const label of ['workload-identity-webhook.io/skip', 'eks.amazonaws.com/skip-pod-identity-webhook']) {
      const pod = await createPod(NS, 'aws', { labels: { [label]: 'true' } });
      assert.equal(pod.spec!.volumes, undefined);
      assert.equal(pod.spec!.containers[0].env, undefined);
    }
  });

  test('skip-containers and native sidecars', async () => {
    const pod = await createPod(NS, 'aws', {
      annotations: { 'eks.amazonaws.com/skip-containers': 'skipped' },
      spec: {
        initContainers: [{ name: 'proxy', image: 'proxy', restartPolicy: 'Always' }],
        containers: [
          { name: 'app', image: 'busybox' },
          { name: 'skipped', image: 'busybox' },
        ],
      },
    });
    assert.equal(pod.spec!.initContainers![0].restartPolicy, 'Always');
    assert.deepEqual(env(pod.spec!.initContainers![0]), awsEnv);
    assert.deepEqual(env(pod.spec!.containers[0]), awsEnv);
    assert.equal(pod.spec!.containers[1].env, undefined);
  });

  test('Windows: the token path is a Windows path', async () => {
    const pod = await createPod(NS, 'aws', { spec: { nodeSelector: { 'kubernetes.io/os': 'windows' } } });
    assert.equal(
      env(pod.spec!.containers[0]).find((e) => e.name === 'AWS_WEB_IDENTITY_TOKEN_FILE')?.value,
      'C:\\var\\run\\secrets\\eks.amazonaws.com\\serviceaccount\\token',
    );
  });

  test('a ServiceAccount created just before its Pod: the Pod is mutated', async () => {
    await createServiceAccount(cp, NS, 'fresh', { 'eks.amazonaws.com/role-arn': ARN });
    const pod = await createPod(NS, 'fresh');
    assert.deepEqual(env(pod.spec!.containers[0]), awsEnv);
  });

  test('a role chain that is a cycle (source-profiles) is refused, naming the annotation and the chain', async () => {
    await assert.rejects(createPod(NS, 'chain-cycle'), (err: { body?: string }) => {
      assert.match(String(err.body), /annotation eks\.amazonaws\.com\/source-profiles: the chain a → b → a is a cycle/);
      return true;
    });
  });

  test("a denial reaches the client with the webhook's message", async () => {
    await assert.rejects(createPod(NS, 'bad-arn'), (err: { body?: string; code?: number }) => {
      assert.match(
        String(err.body),
        /eks\.amazonaws\.com\/role-arns profile writer=\\?"arn:aws:iam::123:role\/x\\?" is not an IAM role ARN/,
      );
      return true;
    });
  });
});

describe('reinvocation', () => {
  test('a sidecar added by a later webhook is completed on the second call', async () => {
    const injector = await startSidecarInjector();
    try {
      await registerWebhook(
        cp,
        injector,
        'z-sidecar-injector',
        [
          {
            reinvocationPolicy: 'Never',
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'reinvoke' } },
          },
        ],
        'reinvoke',
      );
      const pod = await createPod('reinvoke', 'aws');
      assert.deepEqual(
        pod.spec!.containers.map((c) => c.name),
        ['app', 'mesh-proxy'],
      );
      assert.deepEqual(env(pod.spec!.containers[1]), awsEnv);
      assert.deepEqual(plain(pod.spec!.containers[1].volumeMounts), [awsMount]);
      assert.equal(pod.spec!.volumes!.filter((v) => v.name === 'aws-iam-token').length, 1);
    } finally {
      await injector.stop();
    }
  });

  test('a ServiceAccount changed by a later webhook: the old identity does not linger', async () => {
    const injector = await startSidecarInjector('mesh-proxy', { serviceAccountName: 'aws' });
    try {
      await registerWebhook(
        cp,
        injector,
        'z-sa-changer',
        [
          {
            reinvocationPolicy: 'Never',
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'reinvoke-sa' } },
          },
        ],
        'reinvoke-sa',
      );
      const pod = await createPod('reinvoke-sa', 'azure', { labels: { 'azure.workload.identity/use': 'true' } });
      assert.equal(pod.spec!.serviceAccountName, 'aws');
      for (const c of pod.spec!.containers) {
        const names = env(c).map((e) => e.name);
        assert.ok(names.includes('AWS_ROLE_ARN'), `${c.name}: ${names}`);
        // The Pod still opts into Azure, but the new ServiceAccount names no client.
        assert.ok(!names.includes('AZURE_CLIENT_ID'), `${c.name} kept the old client id: ${names}`);
      }
      const record = JSON.parse(pod.metadata!.annotations!['workload-identity-webhook.io/injected']);
      assert.equal(record.sa, 'aws');
    } finally {
      await injector.stop();
    }
  });
});

describe('the webhook unreachable', () => {
  test('failurePolicy Fail refuses the Pod, Ignore stores it unmutated', async () => {
    const dead = { url: 'https://127.0.0.1:1/mutate', caBundle: Buffer.from(wh.caPem).toString('base64') };
    await registerWebhook(
      cp,
      undefined,
      'down',
      [
        {
          failurePolicy: 'Fail',
          clientConfig: dead,
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'down-fail' } },
        },
        {
          failurePolicy: 'Ignore',
          clientConfig: dead,
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'down-ignore' } },
        },
      ],
      NS,
    );
    // Both webhooks of one configuration take effect together: once Fail refuses, Ignore is live.
    const err = await until('the Fail policy to refuse', async () => {
      try {
        await createPod('down-fail', 'aws');
        return undefined;
      } catch (e) {
        return e as { body?: string };
      }
    });
    assert.match(String(err.body), /failed calling webhook/);
    const pod = await createPod('down-ignore', 'aws');
    assert.equal(pod.spec!.volumes, undefined);
  });
});

describe('tokens as a relying party sees them', () => {
  test("each provider's injected audience and expiry yield a token that verifies against the cluster JWKS", async () => {
    const pod = await createPod(NS, 'multi', { labels: { 'azure.workload.identity/use': 'true' } });
    const expected = [
      ['aws-iam-token', 'sts.amazonaws.com'],
      ['azure-identity-token', 'api://AzureADTokenExchange'],
      ['gcp-iam-token', GCP_AUDIENCE],
    ];
    for (const [name, audience] of expected) {
      const t = volume(pod, name)!.projected!.sources![0].serviceAccountToken!;
      assert.equal(t.audience, audience);
      const token = await requestToken(cp, NS, 'multi', t.audience!, t.expirationSeconds!);
      const payload = await verifyServiceAccountToken(cp, token, { audience, namespace: NS, name: 'multi' });
      assert.equal(payload.sub, `system:serviceaccount:${NS}:multi`);
      assert.equal(payload.exp! - payload.iat!, t.expirationSeconds);
      await assert.rejects(
        verifyServiceAccountToken(cp, token, { audience: 'someone-else', namespace: NS, name: 'multi' }),
      );
    }
  });
});

describe('observability', () => {
  test('one JSON log line per decision, without tokens or whole objects', async () => {
    const pod = await createPod(NS, 'aws');
    const line = await until('the decision log line', () =>
      wh.logs().find((l) => l.msg === 'admission' && l.name === pod.metadata!.name),
    );
    assert.equal(line.namespace, NS);
    assert.deepEqual(line.providers, ['aws']);
    assert.equal(typeof line.durationMs, 'number');
    assert.equal(line.uid && typeof line.uid, 'string');
    const raw = JSON.stringify(wh.logs());
    assert.doesNotMatch(raw, /eyJhbGciOi/); // no JWT
    assert.doesNotMatch(raw, /"containers"/); // no whole Pod
  });

  test("a container's own credential variable: stored as written, the client gets the warning, the metric counts it", async () => {
    const res = await cp.request('POST', `/api/v1/namespaces/${NS}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'old-key' },
      spec: {
        serviceAccountName: 'pfnet',
        containers: [
          {
            name: 'velero',
            image: 'busybox',
            env: [{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/credentials/cloud' }],
          },
        ],
      },
    });
    assert.equal(res.status, 201, res.body);
    const stored = JSON.parse(res.body) as V1Pod;
    const own = stored.spec!.containers[0].env!.filter((e) => e.name === 'GOOGLE_APPLICATION_CREDENTIALS');
    assert.deepEqual(plain(own), [{ name: 'GOOGLE_APPLICATION_CREDENTIALS', value: '/credentials/cloud' }]);
    // The API server relays admission warnings in Warning headers (code 299).
    const warnings = [res.headers.warning ?? []].flat().join('\n');
    assert.match(
      warnings,
      // The header quotes the warning: the name's own quotes arrive escaped.
      /^299 - "container \\"velero\\" sets GOOGLE_APPLICATION_CREDENTIALS itself, so it does not use the gcp identity/,
    );
    assert.doesNotMatch(warnings, /\/credentials\/cloud/, "the container's value is not echoed");
    assert.match(
      await wh.metrics(),
      /wiw_user_env_shadowed_total\{provider="gcp",variable="GOOGLE_APPLICATION_CREDENTIALS"\} 1\b/,
    );
  });

  test('metrics report injections, denials and the cache size', async () => {
    const text = await wh.metrics();
    assert.match(text, /wiw_injections_total\{provider="aws"\} [1-9]/);
    assert.match(text, /wiw_denials_total\{reason="InvalidRoleArn"\} [1-9]/);
    assert.match(text, /wiw_serviceaccount_cache_size\{what="ServiceAccount"\} [1-9]/);
  });
});
