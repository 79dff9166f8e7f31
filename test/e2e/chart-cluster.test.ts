// The chart against a real kube-apiserver: every render accepted in a server-side dry run, the
// Pods under the restricted profile, then helm install / upgrade / uninstall with the webhook
// (and the token requestor) running locally as the chart configures them: the Deployment's
// environment, the chart's ServiceAccounts and so exactly the chart's RBAC. No kubelet runs,
// so the Deployments never get Pods; the API server calls the local processes through the
// chart's MutatingWebhookConfiguration (webhook.url).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AdmissionregistrationV1Api, ApiextensionsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { parse } from 'yaml';
import {
  createNamespace,
  createServiceAccount,
  freePorts,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import {
  PLAIN_NAMESPACE,
  VALUES_MATRIX,
  all,
  containerEnv,
  dryRunCreate,
  find,
  helm,
  helmUpgradeInstall,
  parseRendered,
  readPlainManifests,
  renderChart,
  resourcePath,
  chartCrds,
  stubCrds,
  type Manifest,
} from '../support/chart.ts';
import { serviceAccountKubeconfig, startLocalWebhook, type LocalWebhook } from '../support/chart-webhook.ts';
import { ROLE_ARN, roleArn } from '../support/identities.ts';
import { labelledSecret, textData } from '../support/secrets.ts';
import { until } from '../harness/until.ts';

const NS = 'wiw-system';
const RELEASE = 'wiw';
const FULLNAME = 'wiw-workload-identity-webhook';
const ROLE = roleArn('chart-installed');

let cp: ControlPlane;
let core: CoreV1Api;
let admission: AdmissionregistrationV1Api;
const running: LocalWebhook[] = [];

before(async () => {
  cp = await startControlPlane({ name: 'chart-cluster' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  admission = cp.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
  const ext = cp.kubeConfig().makeApiClient(ApiextensionsV1Api);
  const crds = [...(await chartCrds()), ...stubCrds()];
  for (const crd of crds) await ext.createCustomResourceDefinition({ body: crd as never });
  for (const crd of crds) {
    await until(`CRD ${crd.metadata.name} established`, async () => {
      const got = await ext.readCustomResourceDefinition({ name: crd.metadata.name });
      return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') || undefined;
    });
  }
  await createNamespace(cp, NS, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  await createNamespace(cp, 'apps');
});

after(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await cp?.stop();
});

describe('server-side dry run', () => {
  for (const { name, values } of VALUES_MATRIX) {
    test(`${name}: every rendered manifest is accepted`, async () => {
      const { manifests } = await renderChart(values, { release: RELEASE, namespace: NS, kubeVersion: cp.kubeVersion });
      assert.ok(manifests.length >= 6, `rendered ${manifests.length} manifests`);
      assert.deepEqual(await dryRunCreate(cp, manifests, NS), []);
    });
  }

  test('webhook-config/ plain manifests are accepted, Namespace first', async () => {
    const files = await readPlainManifests();
    const docs = [...files.entries()]
      .filter(([file]) => file !== 'kustomization.yaml')
      .flatMap(([, text]) => parseRendered(text).manifests);
    const [namespace, ...rest] = [...all(docs, 'Namespace'), ...docs.filter((d) => d.kind !== 'Namespace')];
    assert.equal(namespace.metadata.name, PLAIN_NAMESPACE);
    assert.deepEqual(await dryRunCreate(cp, [namespace], PLAIN_NAMESPACE), []);
    await core.createNamespace({ body: namespace as never });
    assert.deepEqual(await dryRunCreate(cp, rest, PLAIN_NAMESPACE), []);
    const kustomization = parse(files.get('kustomization.yaml')!) as { resources: string[] };
    assert.deepEqual(
      [...kustomization.resources].sort(),
      [...files.keys()].filter((f) => f !== 'kustomization.yaml').sort(),
    );
  });

  test('a misspelt field is refused, so the dry runs above check something', async () => {
    const { manifests } = await renderChart({}, { release: RELEASE, namespace: NS, kubeVersion: cp.kubeVersion });
    const mwc = structuredClone(find(manifests, 'MutatingWebhookConfiguration')!);
    mwc.webhooks[0].reinvocationPolicies = 'IfNeeded';
    const [failure] = await dryRunCreate(cp, [mwc], NS);
    assert.match(failure, /unknown field "webhooks\[0\]\.reinvocationPolicies"/);
  });
});

describe('restricted Pod Security', () => {
  test("Pods from both Deployments' templates are admitted in a namespace enforcing restricted", async () => {
    const { manifests } = await renderChart(
      { tokenRequestor: { enabled: true, namespaces: ['apps'] } },
      { release: RELEASE, namespace: NS, kubeVersion: cp.kubeVersion },
    );
    const pods = all(manifests, 'Deployment').map(
      (d, i): Manifest => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `from-template-${i}`, namespace: NS, labels: d.spec.template.metadata.labels },
        spec: d.spec.template.spec,
      }),
    );
    assert.equal(pods.length, 2);
    assert.deepEqual(await dryRunCreate(cp, pods, NS), []);

    // The same Pod without its security context is refused: the namespace really enforces.
    const loose = structuredClone(pods[0]);
    delete loose.spec.securityContext;
    delete loose.spec.containers[0].securityContext;
    const [refused] = await dryRunCreate(cp, [loose], NS);
    assert.match(refused, /violates PodSecurity "restricted/);
  });
});

describe('helm install, upgrade and uninstall', () => {
  let port: number;
  let webhook: LocalWebhook | undefined;
  let installed: Manifest[] = [];

  async function releaseManifests(): Promise<Manifest[]> {
    return parseRendered(await helm(['get', 'manifest', RELEASE, '--namespace', NS], { kubeconfig: cp.kubeconfigPath }))
      .manifests;
  }

  /** The webhook as the installed Deployment runs it: its environment, its ServiceAccount. */
  async function startAsDeployed(manifests: Manifest[]): Promise<LocalWebhook> {
    const deployment = find(manifests, 'Deployment', FULLNAME)!;
    const kubeconfigPath = await serviceAccountKubeconfig(cp, NS, deployment.spec.template.spec.serviceAccountName);
    const wh = await startLocalWebhook(cp, {
      env: containerEnv(deployment),
      kubeconfigPath,
      args: ['--port', String(port)],
    });
    running.push(wh);
    return wh;
  }

  async function caBundleAndSecret(): Promise<{ caBundles: string[]; secret: Record<string, string> }> {
    const mwc = await admission.readMutatingWebhookConfiguration({ name: FULLNAME });
    const secret = await core.readNamespacedSecret({ namespace: NS, name: `${FULLNAME}-certs` });
    return { caBundles: (mwc.webhooks ?? []).map((w) => w.clientConfig.caBundle ?? ''), secret: secret.data ?? {} };
  }

  function podEnv(pod: {
    spec?: { containers: { env?: { name: string; value?: string }[] }[] };
  }): Record<string, string | undefined> {
    return Object.fromEntries((pod.spec?.containers[0].env ?? []).map((e) => [e.name, e.value]));
  }

  /** The webhook's log once a barrier Pod's decision is in it: decision lines go out in batches, in order. */
  async function logsAfterBarrier(name: string): Promise<Record<string, unknown>[]> {
    await core.createNamespacedPod({
      namespace: 'apps',
      dryRun: 'All',
      body: {
        metadata: { name },
        spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
      },
    });
    await until(
      `the decision about ${name} logged`,
      () => webhook!.logs().some((l) => l.msg === 'admission' && l.name === name) || undefined,
    );
    return webhook!.logs();
  }

  test('install: the caBundle is patched and Pods and labelled Secrets are mutated behind the chart', async () => {
    [port] = await freePorts(1);
    const out = await helmUpgradeInstall(cp, RELEASE, NS, {
      webhook: { url: `https://127.0.0.1:${port}` },
      tokenRequestor: { enabled: true, namespaces: ['apps'] },
    });
    assert.match(out, /STATUS: deployed/);
    assert.match(out, /Certificates: selfManaged/, 'NOTES.txt is shown');
    installed = await releaseManifests();

    webhook = await startAsDeployed(installed);
    const { caBundles, secret } = await caBundleAndSecret();
    assert.equal(caBundles.length, 4);
    for (const caBundle of caBundles) assert.equal(caBundle, secret['ca.crt']);

    await createServiceAccount(cp, 'apps', 'worker', { 'eks.amazonaws.com/role-arn': ROLE });
    const pod = await until('a Pod admitted through the chart configuration', () =>
      core.createNamespacedPod({
        namespace: 'apps',
        body: {
          metadata: { name: `app-${Date.now()}` },
          spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
        },
      }),
    );
    assert.equal(podEnv(pod).AWS_ROLE_ARN, ROLE);
    assert.equal(podEnv(pod).AWS_WEB_IDENTITY_TOKEN_FILE, '/var/run/secrets/eks.amazonaws.com/serviceaccount/token');

    // IRSA add-ons in kube-system get their identity too, through the system entry.
    await createServiceAccount(cp, 'kube-system', 'ebs-csi-controller-sa', { 'eks.amazonaws.com/role-arn': ROLE });
    const addon = await core.createNamespacedPod({
      namespace: 'kube-system',
      body: {
        metadata: { name: 'ebs-csi-controller' },
        spec: { serviceAccountName: 'ebs-csi-controller-sa', containers: [{ name: 'app', image: 'busybox' }] },
      },
    });
    assert.equal(podEnv(addon).AWS_ROLE_ARN, ROLE);
    // The webhook's own namespace is never sent to it.
    await createServiceAccount(cp, NS, 'own', { 'eks.amazonaws.com/role-arn': ROLE });
    const own = await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: 'own' },
        spec: {
          serviceAccountName: 'own',
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'app',
              image: 'busybox',
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    });
    assert.equal(podEnv(own).AWS_ROLE_ARN, undefined);
    assert.ok(!(await logsAfterBarrier('barrier-own')).some((l) => l.msg === 'admission' && l.namespace === NS));

    // An opted-out Pod never reaches the webhook (objectSelector).
    const skipped = await core.createNamespacedPod({
      namespace: 'apps',
      body: {
        metadata: { name: 'skipped', labels: { 'workload-identity-webhook.io/skip': 'true' } },
        spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
      },
    });
    assert.equal(podEnv(skipped).AWS_ROLE_ARN, undefined);
    assert.ok(!(await logsAfterBarrier('barrier-skipped')).some((l) => l.msg === 'admission' && l.name === 'skipped'));

    // A labelled Secret gets its derived keys from the webhook...
    await createServiceAccount(cp, 'apps', 'app');
    const stored = await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('aws', { namespace: 'apps', name: 'aws-credentials' }) as never,
    });
    assert.equal(textData(stored).roleARN, ROLE_ARN);

    // ...and its token from the token requestor, run as its Deployment with its ServiceAccount.
    const requestor = find(installed, 'Deployment', `${FULLNAME}-token-requestor`)!;
    const requestorKubeconfig = await serviceAccountKubeconfig(cp, NS, requestor.spec.template.spec.serviceAccountName);
    const tr = await startLocalWebhook(cp, {
      command: 'token-requestor',
      env: containerEnv(requestor),
      kubeconfigPath: requestorKubeconfig,
      args: ['--identity', 'local-requestor'],
    });
    running.push(tr);
    const withToken = await until(
      'the token requestor to write the token',
      async () => {
        const s = await core.readNamespacedSecret({ namespace: 'apps', name: 'aws-credentials' });
        return s.data?.token ? s : undefined;
      },
      30_000,
    );
    assert.equal(textData(withToken).roleARN, ROLE_ARN, 'the token write re-derived the keys');
    const lease = await cp.request(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${FULLNAME}-token-requestor`,
    );
    assert.equal(JSON.parse(lease.body).spec.holderIdentity, 'local-requestor');
    await tr.stop();

    const trouble = webhook.logs().filter((l) => (l.level as number) >= 40);
    assert.deepEqual(trouble, [], 'no warnings: the chart RBAC covers what the webhook does');
  });

  test('upgrade: new settings take effect and the self-managed certificates survive', async () => {
    assert.ok(webhook, 'installed by the previous test');
    const before = await caBundleAndSecret();
    const out = await helmUpgradeInstall(
      cp,
      RELEASE,
      NS,
      {
        webhook: { url: `https://127.0.0.1:${port}`, timeoutSeconds: 5 },
        tokenRequestor: { enabled: true, namespaces: ['apps'] },
        config: { awsDefaultRegion: 'eu-west-1' },
      },
      'upgrade',
    );
    assert.match(out, /REVISION: 2/);
    const mwc = await admission.readMutatingWebhookConfiguration({ name: FULLNAME });
    assert.deepEqual(
      mwc.webhooks!.map((w) => w.timeoutSeconds),
      [5, 5, 5, 5],
    );
    const afterUpgrade = await caBundleAndSecret();
    assert.deepEqual(afterUpgrade, before, 'helm upgrade kept the patched caBundle and the Secret the webhook filled');

    // A rollout: the new replica starts from the same Secret, with the upgraded environment.
    await webhook.stop();
    webhook = await startAsDeployed(await releaseManifests());
    const pod = await until('a Pod admitted after the upgrade', () =>
      core.createNamespacedPod({
        namespace: 'apps',
        dryRun: 'All',
        body: {
          metadata: { name: `upgraded-${Date.now()}` },
          spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
        },
      }),
    );
    assert.equal(podEnv(pod).AWS_REGION, 'eu-west-1');
    assert.ok(!webhook.logs().some((l) => l.msg === 'created a CA and serving certificate'), 'no new CA on a rollout');
  });

  test('scope labelled: only Pods opted in by their label or their namespace reach the webhook, each once', async () => {
    assert.ok(webhook, 'installed by the first test');
    await helmUpgradeInstall(
      cp,
      RELEASE,
      NS,
      {
        webhook: { url: `https://127.0.0.1:${port}`, scope: 'labelled' },
        tokenRequestor: { enabled: true, namespaces: ['apps'] },
      },
      'upgrade',
    );
    const mwc = await admission.readMutatingWebhookConfiguration({ name: FULLNAME });
    assert.deepEqual(
      mwc.webhooks!.map((w) => w.name),
      [
        'pods.workload-identity-webhook.io',
        'azure-pods.workload-identity-webhook.io',
        'namespace-pods.workload-identity-webhook.io',
        'system-pods.workload-identity-webhook.io',
        'secrets.workload-identity-webhook.io',
        'gardener-secrets.workload-identity-webhook.io',
      ],
    );
    await createNamespace(cp, 'opted-in', { 'workload-identity-webhook.io/inject': 'true' });
    await createServiceAccount(cp, 'opted-in', 'worker', { 'eks.amazonaws.com/role-arn': ROLE });
    const INJECT = { 'workload-identity-webhook.io/inject': 'true' };
    const AZURE = { 'azure.workload.identity/use': 'true' };
    const cases: [string, string, Record<string, string>, boolean][] = [
      ['apps', 'plain', {}, false],
      ['apps', 'inject-false', { 'workload-identity-webhook.io/inject': 'false' }, false],
      ['apps', 'labelled', INJECT, true],
      ['apps', 'azure', AZURE, true],
      ['apps', 'both', { ...INJECT, ...AZURE }, true],
      ['opted-in', 'in-namespace', {}, true],
      ['opted-in', 'in-namespace-azure', AZURE, true],
      ['opted-in', 'opted-out', { ...INJECT, 'workload-identity-webhook.io/skip': 'true' }, false],
    ];
    const admit = (namespace: string, name: string, labels: Record<string, string>, reached: boolean) =>
      // The caBundle is patched; the new entries may take a moment to be in the API server's view.
      until(`Pod ${name} admitted`, async () => {
        const created = await core.createNamespacedPod({
          namespace,
          dryRun: 'All',
          body: {
            metadata: { name: `scope-${name}`, labels },
            spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
          },
        });
        return !reached || podEnv(created).AWS_ROLE_ARN ? created : undefined;
      });
    const admissions = (namespace: string, name: string) =>
      webhook!.logs().filter((l) => l.msg === 'admission' && l.name === `scope-${name}` && l.namespace === namespace);
    for (const [namespace, name, labels, reached] of cases) {
      const pod = await admit(namespace, name, labels, reached);
      assert.equal(podEnv(pod).AWS_ROLE_ARN, reached ? ROLE : undefined, `${namespace}/${name}`);
    }
    // Decision lines are written in batches, in order: once a last Pod's line is out, every earlier one is.
    await admit('apps', 'last', INJECT, true);
    await until('the last decision line written', async () => admissions('apps', 'last').length > 0 || undefined);
    for (const [namespace, name, , reached] of cases) {
      const count = admissions(namespace, name).length;
      assert.equal(count, reached ? 1 : 0, `${namespace}/${name} reached the webhook ${count} times`);
    }
  });

  test('uninstall leaves nothing of the release behind', async () => {
    assert.ok(installed.length > 0, 'installed by the first test');
    const last = await releaseManifests();
    await webhook?.stop();
    const out = await helm(['uninstall', RELEASE, '--namespace', NS, '--wait'], { kubeconfig: cp.kubeconfigPath });
    assert.match(out, /release "wiw" uninstalled/);
    const left: string[] = [];
    for (const m of last) {
      const res = await cp.request('GET', await resourcePath(cp, m, NS, true));
      if (res.status !== 404) left.push(`${m.kind} ${m.metadata.name}: HTTP ${res.status}`);
    }
    assert.deepEqual(left, []);
    assert.ok(
      last.some((m) => m.kind === 'Lease') && last.some((m) => m.kind === 'Secret'),
      "the Lease and the certificate Secret were the release's",
    );
    // Nothing labelled with the release anywhere, in any kind the chart can render.
    const { manifests: everything } = await renderChart(
      {
        tokenRequestor: { enabled: true, namespaces: ['apps'] },
        networkPolicy: { enabled: true },
        serviceMonitor: { enabled: true },
        certificates: { mode: 'certManager' },
        prometheusRule: { enabled: true, runbookUrl: 'https://docs.example.com/observability.md' },
        grafanaDashboard: { enabled: true },
      },
      { release: RELEASE, namespace: NS, kubeVersion: cp.kubeVersion },
    );
    const kinds = new Map(everything.map((m) => [`${m.apiVersion}/${m.kind}`, m]));
    for (const m of kinds.values()) {
      const path = (await resourcePath(cp, m, NS)).replace(`/namespaces/${NS}/`, '/');
      const res = await cp.request('GET', `${path}?labelSelector=app.kubernetes.io/instance%3D${RELEASE}`);
      assert.equal(res.status, 200, `${path}: ${res.body}`);
      assert.deepEqual(
        JSON.parse(res.body).items.map((i: Manifest) => i.metadata.name),
        [],
        `no ${m.kind} left`,
      );
    }
    const secrets = await cp.request('GET', `/api/v1/namespaces/${NS}/secrets`);
    assert.deepEqual(
      JSON.parse(secrets.body).items.map((i: Manifest) => i.metadata.name),
      [],
      'no Helm release record left',
    );
  });
});
