// The policy mode on a real node (issue 32 item 4): the chart installed with
// `injection.mode=policy`, its replicas render each namespace's parameters, then every replica is
// stopped (the Deployment scaled to 0; the parameters controller runs in those Pods and goes with
// them), and Pods created in identity namespaces of the three clouds all START on the kubelet with
// their identity: inside each container (init containers too) the env vars are set and the token
// file they name is readable, its JWT's audience the cloud's and its subject the Pod's
// ServiceAccount; GCP's external_account file names the provider and the token file. In a
// namespace of the clouds' strict stand-ins, the official SDKs get credentials with those files.
// None is refused. Then the case the mode exists for: the chart in mode `webhook` with
// `failurePolicy: Ignore` and no replica: the same Pods start WITHOUT any identity.
//
// Versions: kube-apiserver v1.36.3 (MutatingAdmissionPolicy is v1 from 1.36), the node's kubelet,
// kube-controller-manager and kube-scheduler v1.34.4 (the only ones cached; test/harness/node.ts
// says why that skew is fine here).
//
// Fewer Pods than policy-fault's 500: one node of 2 cores (maxPods 110) starts a few dozen
// containers in reasonable time; what 500 proves, every admission with its identity while nothing
// answers, policy-fault.test.ts keeps proving on the control plane alone. This file proves the
// rest: what the policy stored is what the kubelet projects and the SDKs use.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, createServiceAccount } from '../harness/control-plane.ts';
import { startNode, type NodeCluster } from '../harness/node.ts';
import { until } from '../harness/until.ts';
import { helmUpgradeInstall } from '../support/chart.ts';
import { CHANGED_ID, CLIENT, OTHER_ID, roleArn } from '../support/identities.ts';
import {
  AZURE_USE,
  EMAIL,
  FULLNAME,
  PROVIDER,
  RELEASE,
  SYSTEM_NS,
  TENANT,
  startNodeClouds,
  type Cloud,
  type NodeClouds,
  type ProbeReport,
} from '../support/node-clouds.ts';
import {
  PARAMETERS_GROUP,
  PARAMETERS_NAME,
  PARAMETERS_PLURAL,
  PARAMETERS_VERSION,
} from '../../src/policy-mode/policy.ts';

/** Pods started with the webhook down: a third per cloud, 18 of them with an init container. */
const PODS = 45;
const CLOUDS: Cloud[] = ['aws', 'azure', 'gcp'];
const SDK_NS = 'apps';
const WEBHOOK = 'app.kubernetes.io/component=webhook';
/** The audience each cloud's token is requested for (AWS's and Azure's defaults, pfnet's dialect). */
const AUDIENCE: Record<Cloud, string> = {
  aws: 'sts.amazonaws.com',
  azure: 'api://AzureADTokenExchange',
  gcp: 'sts.googleapis.com',
};

/** Three ServiceAccounts per cloud, each its own identity, in the namespace `policy-<cloud>`. */
const IDENTITIES: Record<Cloud, { name: string; annotations: Record<string, string> }[]> = {
  aws: [0, 1, 2].map((n) => ({
    name: `aws-${n}`,
    annotations: { 'eks.amazonaws.com/role-arn': roleArn(`node-policy-${n}`) },
  })),
  azure: [CLIENT, OTHER_ID, CHANGED_ID].map((id, n) => ({
    name: `azure-${n}`,
    annotations: { 'azure.workload.identity/client-id': id },
  })),
  gcp: [0, 1, 2].map((n) => ({
    name: `gcp-${n}`,
    annotations: {
      'cloud.google.com/workload-identity-provider': PROVIDER,
      'cloud.google.com/service-account-email': `app-${n}@my-project.iam.gserviceaccount.com`,
      // `direct`: the external_account file from the downward API (`gcloud` adds a setup init
      // container of an image this node never pulls).
      'cloud.google.com/injection-mode': 'direct',
    },
  })),
};
const namespaceOf = (cloud: Cloud): string => `policy-${cloud}`;

// Runs in each container: what the identity looks like from inside, through the termination
// message. The env the clouds' SDKs read; each file an env var names, read: a token by its claims
// (never the token), a credential configuration whole, and the token file it names.
const REPORT = `
const fs = require('node:fs');
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(AWS|AZURE|GOOGLE|CLOUDSDK)_/.test(k)));
const claims = (path) => {
  const c = JSON.parse(Buffer.from(fs.readFileSync(path, 'utf8').trim().split('.')[1], 'base64url').toString());
  return { aud: c.aud, sub: c.sub };
};
const files = {};
for (const [name, path] of Object.entries(env)) {
  if (!/_FILE$|^GOOGLE_APPLICATION_CREDENTIALS$/.test(name)) continue;
  try {
    const text = fs.readFileSync(path, 'utf8');
    if (!text.trim().startsWith('{')) files[name] = { token: claims(path) };
    else {
      const config = JSON.parse(text);
      files[name] = { config, token: claims(config.credential_source.file) };
    }
  } catch (err) { files[name] = { error: err.message }; }
}
fs.writeFileSync('/dev/termination-log', JSON.stringify({ env, files }).slice(0, 4096));
`;

interface Report {
  env: Record<string, string>;
  files: Record<string, { token?: { aud: string[]; sub: string }; config?: Record<string, any>; error?: string }>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

let node: NodeCluster;
let clouds: NodeClouds;
let core: CoreV1Api;
let apps: AppsV1Api;

/** The i-th Pod: round robin over the clouds and their ServiceAccounts; Pods 0-8 and 27-35 with an init container. */
function reporterPod(i: number, run: string): { cloud: Cloud; sa: string; body: V1Pod } {
  const cloud = CLOUDS[i % CLOUDS.length];
  const sa = IDENTITIES[cloud][Math.floor(i / CLOUDS.length) % 3].name;
  const container = (name: string): V1Container => ({
    name,
    image: node.images.base,
    imagePullPolicy: 'Never',
    command: ['node', '-e', REPORT],
  });
  return {
    cloud,
    sa,
    body: {
      metadata: { name: `${run}-${i}`, labels: { run, ...(cloud === 'azure' ? AZURE_USE : {}) } },
      spec: {
        serviceAccountName: sa,
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [container('app')],
        // Init containers get the identity too.
        ...(Math.floor(i / 9) % 3 === 0 ? { initContainers: [container('init')] } : {}),
      },
    },
  };
}

/** Creates the Pods (ten at a time), waits until each has finished; refusals and each container's report. */
async function runReporters(run: string, count: number) {
  const made = Array.from({ length: count }, (_, i) => reporterPod(i, run));
  const refused: string[] = [];
  for (let i = 0; i < made.length; i += 10) {
    await Promise.all(
      made
        .slice(i, i + 10)
        .map(({ cloud, body }) =>
          core
            .createNamespacedPod({ namespace: namespaceOf(cloud), body })
            .catch((err: Error) => refused.push(`${body.metadata!.name}: ${err.message.slice(0, 300)}`)),
        ),
    );
  }
  const finished = await until(
    `${count - refused.length} Pods of ${run} to finish`,
    async () => {
      const pods = (await core.listPodForAllNamespaces({ labelSelector: `run=${run}` })).items;
      const done = pods.filter((p) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed');
      return done.length === count - refused.length ? done : undefined;
    },
    300_000,
  );
  const reports = new Map<string, { phase: string; containers: Map<string, Report | string> }>();
  for (const pod of finished) {
    const containers = new Map<string, Report | string>();
    for (const s of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
      const message = s.state?.terminated?.message ?? '';
      try {
        containers.set(s.name, JSON.parse(message) as Report);
      } catch {
        containers.set(s.name, `no report (exit ${s.state?.terminated?.exitCode}): ${message.slice(0, 300)}`);
      }
    }
    reports.set(pod.metadata!.name!, { phase: pod.status!.phase!, containers });
  }
  return { made, refused, reports };
}

/** What is wrong with a container's identity, from its report; empty when it is all there. */
function identityFaults(cloud: Cloud, namespace: string, sa: string, report: Report): string[] {
  const annotations = IDENTITIES[cloud].find((s) => s.name === sa)!.annotations;
  const { env, files } = report;
  const faults: string[] = [];
  const expect = (what: string, actual: unknown, wanted: unknown) => {
    if (JSON.stringify(actual) !== JSON.stringify(wanted))
      faults.push(`${what}: ${JSON.stringify(actual)}, wanted ${JSON.stringify(wanted)}`);
  };
  const token = (variable: string) => {
    const file = files[variable];
    expect(`${variable}'s token audience`, file?.token?.aud ?? file, [AUDIENCE[cloud]]);
    expect(`${variable}'s token subject`, file?.token?.sub, `system:serviceaccount:${namespace}:${sa}`);
    return file;
  };
  if (cloud === 'aws') {
    expect('AWS_ROLE_ARN', env.AWS_ROLE_ARN, annotations['eks.amazonaws.com/role-arn']);
    token('AWS_WEB_IDENTITY_TOKEN_FILE');
  } else if (cloud === 'azure') {
    expect('AZURE_CLIENT_ID', env.AZURE_CLIENT_ID, annotations['azure.workload.identity/client-id']);
    expect('AZURE_TENANT_ID', env.AZURE_TENANT_ID, TENANT);
    if (!env.AZURE_AUTHORITY_HOST) faults.push('AZURE_AUTHORITY_HOST unset');
    token('AZURE_FEDERATED_TOKEN_FILE');
  } else {
    const config = token('GOOGLE_APPLICATION_CREDENTIALS')?.config;
    expect('the external_account type', config?.type, 'external_account');
    expect('its audience', config?.audience, `//iam.googleapis.com/${PROVIDER}`);
    expect(
      'its impersonation URL',
      config?.service_account_impersonation_url,
      `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${annotations['cloud.google.com/service-account-email']}:generateAccessToken`,
    );
  }
  return faults;
}

before(async () => {
  node = await startNode({ name: 'node-policy', version: 'newest' });
  core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
  apps = node.cp.kubeConfig().makeApiClient(AppsV1Api);
  clouds = await startNodeClouds(node, SDK_NS);
  for (const cloud of CLOUDS) {
    await createNamespace(node.cp, namespaceOf(cloud));
    for (const sa of IDENTITIES[cloud])
      await createServiceAccount(node.cp, namespaceOf(cloud), sa.name, sa.annotations);
  }
  await createNamespace(node.cp, SYSTEM_NS, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  await helmUpgradeInstall(node.cp, RELEASE, SYSTEM_NS, { ...chartValues(), injection: { mode: 'policy' } });
});

/** The chart's values besides the mode: the locally built image (never pulled), the clouds' settings. */
function chartValues() {
  const [repository, tag] = node.images.webhook.split(/:(?=[^:/]+$)/);
  return {
    image: { repository, tag, pullPolicy: 'Never' },
    config: { awsDefaultRegion: 'eu-west-1', azureTenantId: TENANT },
  };
}

after(async () => {
  await clouds?.stop();
  await node?.stop();
});

const webhookPods = async (): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: WEBHOOK })).items;

async function scaleToZero(): Promise<void> {
  await apps.replaceNamespacedDeploymentScale({
    namespace: SYSTEM_NS,
    name: FULLNAME,
    body: { metadata: { name: FULLNAME, namespace: SYSTEM_NS }, spec: { replicas: 0 } },
  });
  await until('no webhook Pod left', async () => ((await webhookPods()).length === 0 ? true : undefined), 120_000);
}

/** A dryRun create of a Pod of `sa`: the env the API server stores for its first container. */
async function storedEnv(namespace: string, sa: string): Promise<Record<string, string>> {
  const pod = await core.createNamespacedPod({
    namespace,
    dryRun: 'All',
    body: {
      metadata: { generateName: 'probe-', labels: AZURE_USE },
      spec: { serviceAccountName: sa, containers: [{ name: 'app', image: node.images.base }] },
    },
  });
  return Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value ?? '(from)']));
}

const IDENTITY_VARIABLE: Record<Cloud, string> = {
  aws: 'AWS_ROLE_ARN',
  azure: 'AZURE_CLIENT_ID',
  gcp: 'GOOGLE_APPLICATION_CREDENTIALS',
};

describe('mode policy on a real node, every webhook replica stopped', () => {
  before(async () => {
    // The replicas' controller renders every namespace's parameters; the policy serves each
    // ServiceAccount (kube-apiserver reads the parameters through its informer).
    const all = [
      ...CLOUDS.flatMap((cloud) => IDENTITIES[cloud].map((sa) => ({ ns: namespaceOf(cloud), sa: sa.name, cloud }))),
      ...CLOUDS.map((cloud) => ({ ns: SDK_NS, sa: cloud, cloud })),
    ];
    for (const { ns, sa, cloud } of all)
      await until(
        `the policy serves ${ns}/${sa}`,
        async () => (IDENTITY_VARIABLE[cloud] in (await storedEnv(ns, sa)) ? true : undefined),
        240_000,
      );
    await scaleToZero();
  });

  test('kube-apiserver v1.36.3 with no webhook registered; the parameters written; no replica runs', async (t) => {
    assert.equal(node.cp.kubeVersion, 'v1.36.3');
    const kubelet = (await core.readNode({ name: node.nodeName })).status?.nodeInfo?.kubeletVersion;
    t.diagnostic(`kube-apiserver ${node.cp.kubeVersion}, kubelet ${kubelet}`);
    const webhooks = await node.cp.request(
      'GET',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
    );
    assert.deepEqual(JSON.parse(webhooks.body).items, []);
    for (const cloud of CLOUDS) {
      const path = `/apis/${PARAMETERS_GROUP}/${PARAMETERS_VERSION}/namespaces/${namespaceOf(cloud)}/${PARAMETERS_PLURAL}/${PARAMETERS_NAME}`;
      assert.equal((await node.cp.request('GET', path)).status, 200, path);
    }
    const deployment = await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME });
    assert.equal(deployment.status?.replicas ?? 0, 0);
    assert.deepEqual(await webhookPods(), []);
  });

  test(`${PODS} Pods over the three clouds: none refused, each starts, and in every container the identity is there`, async (t) => {
    const started = Date.now();
    const { made, refused, reports } = await runReporters('policy', PODS);
    assert.deepEqual(refused, [], 'no Pod refused');
    const faults: string[] = [];
    let containers = 0;
    for (const { cloud, sa, body } of made) {
      const name = body.metadata!.name!;
      const pod = reports.get(name)!;
      if (pod.phase !== 'Succeeded') faults.push(`${name}: ${pod.phase}`);
      const wanted = body.spec!.initContainers ? 2 : 1;
      if (pod.containers.size !== wanted) faults.push(`${name}: ${pod.containers.size} reports of ${wanted}`);
      for (const [container, report] of pod.containers) {
        containers++;
        if (typeof report === 'string') faults.push(`${name}/${container}: ${report}`);
        else
          for (const f of identityFaults(cloud, namespaceOf(cloud), sa, report))
            faults.push(`${name}/${container} (${cloud}, ${sa}): ${f}`);
      }
    }
    t.diagnostic(
      `${PODS} of ${PODS} created, ${[...reports.values()].filter((r) => r.phase === 'Succeeded').length} started and ` +
        `finished, ${containers} containers reported, in ${Math.round((Date.now() - started) / 1000)} s`,
    );
    assert.deepEqual(faults, [], `started without their identity:\n${faults.slice(0, 10).join('\n')}`);
  });

  test("the official SDKs, in Pods started with no replica, get credentials from the clouds' stand-ins", async () => {
    const [aws, azure, gcp] = await Promise.all([
      clouds.runPod('sdk-aws', 'aws', [clouds.probe('aws')]),
      clouds.runPod('sdk-azure', 'azure', [clouds.probe('azure')], {}, AZURE_USE),
      clouds.runPod('sdk-gcp', 'gcp', [clouds.probe('gcp')]),
    ]);
    const report = (m: Map<string, ProbeReport>, c: string): ProbeReport => {
      const r = m.get(c)!;
      assert.ok(r.answer.ok, JSON.stringify(r));
      return r;
    };
    const sts = clouds.sts.exchanges.find((e) => e.accessKeyId === report(aws, 'aws').answer.accessKeyId);
    assert.equal(sts?.subject, clouds.subject('aws'));
    const entra = clouds.entra.exchanges.find((e) => e.accessToken === report(azure, 'azure').answer.token);
    assert.equal(entra?.subject, clouds.subject('azure'));
    const google = clouds.google.impersonations.find((i) => i.accessToken === report(gcp, 'gcp').answer.token);
    assert.equal(google?.principal, clouds.principal('gcp'));
    assert.equal(google?.email, EMAIL);
  });
});

describe('without the policy: mode webhook, failurePolicy Ignore, no replica', () => {
  before(async () => {
    await helmUpgradeInstall(
      node.cp,
      RELEASE,
      SYSTEM_NS,
      {
        ...chartValues(),
        injection: { mode: 'webhook' },
        webhook: { failurePolicy: 'Ignore' },
      },
      'upgrade',
    );
    // helm upgrade sets the chart's replica count again.
    await scaleToZero();
    // The policy gone from kube-apiserver's view: a Pod is stored as sent.
    for (const cloud of CLOUDS)
      await until(
        `the policy no longer applied in ${namespaceOf(cloud)}`,
        async () =>
          Object.keys(await storedEnv(namespaceOf(cloud), IDENTITIES[cloud][0].name)).length === 0 ? true : undefined,
        60_000,
      );
  });

  test('the same Pods are admitted and start, and no container has any identity: why the policy mode exists', async () => {
    const webhooks = await node.cp.request(
      'GET',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
    );
    const registered = (JSON.parse(webhooks.body).items as { webhooks: { name: string; failurePolicy: string }[] }[])
      .flatMap((w) => w.webhooks)
      .filter((w) => w.name === 'pods.workload-identity-webhook.io');
    assert.deepEqual(
      registered.map((w) => w.failurePolicy),
      ['Ignore'],
      "the chart's webhook registered for Pods, failurePolicy Ignore",
    );
    const { made, refused, reports } = await runReporters('ignored', 9);
    assert.deepEqual(refused, []);
    for (const { body } of made) {
      const pod = reports.get(body.metadata!.name!)!;
      assert.equal(pod.phase, 'Succeeded', body.metadata!.name);
      for (const [container, report] of pod.containers) {
        assert.ok(typeof report !== 'string', `${body.metadata!.name}/${container}: ${report}`);
        assert.deepEqual(
          report,
          { env: {}, files: {} },
          `${body.metadata!.name}/${container} started without identity`,
        );
      }
    }
  });
});
