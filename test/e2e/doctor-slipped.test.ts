// End to end (issue 31 item 6): the Pods that slipped past the webhook, on a real kube-apiserver.
// The webhook is registered with failurePolicy Ignore and injects one Pod; then it stops, and the
// API server admits the next Pods unchanged. There is no controller-manager here, so the
// workloads' ReplicaSet and Pods are created with their ownerReferences by the test, as the
// controllers would. doctor lists exactly the Pods that lack the identity their ServiceAccount
// carries (not the injected one, not those without identity, opted out, with every container
// skipped, or finished), each with its owner and why it slipped; --fix refuses without a terminal
// and without --yes; --fix --yes restarts each Deployment, StatefulSet and DaemonSet once.
import { cliCommand, cliEnv, runCliAsync } from '../harness/cli-process.ts';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { ROLE_ARN } from '../support/identities.ts';
import { serviceAccountAnnotations, createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { scanPods } from '../../src/doctor/slipped.ts';
import { connectKube } from '../../src/kube/connect.ts';
import { slimServiceAccount } from '../../src/kube/serviceaccount-cache.ts';
import { shellQuote } from '../../src/shell.ts';

const NS = 'apps';
const OUTSIDE = 'outside';

interface Check {
  id: string;
  verdict: string;
  message: string;
  fix?: string;
  subject?: string;
}

let cp: ControlPlane;
let wh: WebhookProcess | undefined;

/** The CLI (the build, as every e2e file runs it: test/harness/cli-process.ts), its exit code 1 when killed. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await runCliAsync(args);
  return { code: code ?? 1, stdout, stderr };
}

async function post(path: string, body: Record<string, unknown>): Promise<{ metadata: { uid: string; name: string } }> {
  const res = await cp.request('POST', path, body);
  assert.equal(res.status, 201, res.body);
  return JSON.parse(res.body);
}

const container = (name = 'app') => ({ name, image: 'busybox' });
const template = (labels: Record<string, string>) => ({
  metadata: { labels },
  spec: { serviceAccountName: 'reader', containers: [container()] },
});

function pod(
  name: string,
  extra: {
    owner?: Ref;
    sa?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    containers?: unknown[];
  } = {},
  namespace = NS,
) {
  const { owner, sa = 'reader', labels, annotations, containers } = extra;
  return post(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels,
      annotations,
      ...(owner && { ownerReferences: [{ ...owner, controller: true, blockOwnerDeletion: true }] }),
    },
    spec: { serviceAccountName: sa, containers: containers ?? [container()] },
  });
}

type Ref = { kind: string; apiVersion: string; name: string; uid: string };

async function workload(
  resource: string,
  kind: string,
  name: string,
  spec: Record<string, unknown>,
  group = 'apps',
  owner?: Ref,
) {
  const created = await post(`/apis/${group}/v1/namespaces/${NS}/${resource}`, {
    apiVersion: `${group}/v1`,
    kind,
    metadata: { name, ...(owner && { ownerReferences: [{ ...owner, controller: true, blockOwnerDeletion: true }] }) },
    spec,
  });
  return { kind, apiVersion: `${group}/v1`, name, uid: created.metadata.uid };
}

async function get(path: string): Promise<{
  metadata: { generation?: number };
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
}> {
  const res = await cp.request('GET', path);
  assert.equal(res.status, 200, res.body);
  return JSON.parse(res.body);
}

async function doctor(...extra: string[]): Promise<{ code: number; checks: Check[]; stderr: string }> {
  const { code, stdout, stderr } = await cli(['doctor', '--kubeconfig', cp.kubeconfigPath, '-o', 'json', ...extra]);
  return { code, checks: stdout ? (JSON.parse(stdout) as { checks: Check[] }).checks : [], stderr };
}

const slipped = (checks: Check[]) =>
  checks
    .filter((c) => c.id === 'slipped-pod')
    .map((c) => c.subject)
    .sort();

const EXPECTED = [
  `Pod ${NS}/agent-x`,
  `Pod ${NS}/batch-x`,
  `Pod ${NS}/db-0`,
  `Pod ${NS}/included`,
  `Pod ${NS}/lonely`,
  `Pod ${NS}/web-5d8-a`,
  `Pod ${NS}/web-5d8-b`,
  `Pod ${OUTSIDE}/stray`,
];

before(async () => {
  cp = await startControlPlane({ name: 'e2e-slipped' });
  await createNamespace(cp, NS);
  await createNamespace(cp, OUTSIDE);
  for (const ns of [NS, OUTSIDE])
    await createServiceAccount(cp, ns, 'reader', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
  await createServiceAccount(cp, NS, 'plain', {});
  wh = await startWebhook(cp);
  await registerWebhook(
    cp,
    wh,
    'slipped',
    [
      {
        failurePolicy: 'Ignore',
        namespaceSelector: {
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [OUTSIDE] }],
        },
      },
    ],
    NS,
  );
  // Injected while the webhook answers: never listed.
  await pod('injected');
  const injected = JSON.parse((await cp.request('GET', `/api/v1/namespaces/${NS}/pods/injected`)).body);
  assert.ok(injected.metadata.annotations?.['workload-identity-webhook.io/injected'], 'the webhook injected it');
  // Now unreachable: failurePolicy Ignore admits every Pod unchanged.
  await wh.stop();
  wh = undefined;

  const web = await workload('deployments', 'Deployment', 'web', {
    selector: { matchLabels: { app: 'web' } },
    template: template({ app: 'web' }),
  });
  // The ReplicaSet as the Deployment controller makes it: owned by the Deployment.
  const rs = await workload(
    'replicasets',
    'ReplicaSet',
    'web-5d8',
    { selector: { matchLabels: { app: 'web' } }, template: template({ app: 'web' }) },
    'apps',
    web,
  );
  await pod('web-5d8-a', { owner: rs, labels: { app: 'web' } });
  await pod('web-5d8-b', { owner: rs, labels: { app: 'web' } });
  const db = await workload('statefulsets', 'StatefulSet', 'db', {
    serviceName: 'db',
    selector: { matchLabels: { app: 'db' } },
    template: template({ app: 'db' }),
  });
  await pod('db-0', { owner: db, labels: { app: 'db' } });
  const agent = await workload('daemonsets', 'DaemonSet', 'agent', {
    selector: { matchLabels: { app: 'agent' } },
    template: template({ app: 'agent' }),
  });
  await pod('agent-x', { owner: agent, labels: { app: 'agent' } });
  const job = await workload(
    'jobs',
    'Job',
    'batch',
    { template: { spec: { restartPolicy: 'Never', serviceAccountName: 'reader', containers: [container()] } } },
    'batch',
  );
  await pod('batch-x', { owner: job });
  await pod('lonely');
  // include-containers names one of two: listed, with that container only.
  await pod('included', {
    annotations: { 'eks.amazonaws.com/include-containers': 'sidecar' },
    containers: [container('app'), container('sidecar')],
  });
  await pod('stray', {}, OUTSIDE);
  // Not slipped: no identity, opted out, every container skipped, finished.
  await pod('plain-app', { sa: 'plain' });
  await pod('opted-out', { labels: { 'workload-identity-webhook.io/skip': 'true' } });
  await pod('all-skipped', { annotations: { 'eks.amazonaws.com/skip-containers': 'app' } });
  const done = await pod('finished');
  const status = await cp.request('GET', `/api/v1/namespaces/${NS}/pods/finished`);
  const finished = JSON.parse(status.body);
  finished.status = { phase: 'Succeeded' };
  assert.ok(done.metadata.uid);
  assert.equal((await cp.request('PUT', `/api/v1/namespaces/${NS}/pods/finished/status`, finished)).status, 200);
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
});

describe('doctor and the Pods that slipped past the webhook', () => {
  test('lists exactly the slipped Pods, each with its owner and why', async () => {
    const { code, checks } = await doctor();
    assert.equal(code, 1);
    assert.deepEqual(slipped(checks), EXPECTED);
    const of = (name: string) => checks.find((c) => c.subject === `Pod ${name}`)!;
    assert.match(of(`${NS}/web-5d8-a`).message, /owner Deployment apps\/web$/);
    assert.match(of(`${NS}/web-5d8-a`).message, /failurePolicy Ignore admitted it unchanged/);
    assert.match(of(`${NS}/db-0`).message, /owner StatefulSet apps\/db$/);
    assert.match(of(`${NS}/agent-x`).message, /owner DaemonSet apps\/agent$/);
    assert.match(of(`${NS}/batch-x`).message, /owner Job apps\/batch$/);
    assert.match(of(`${NS}/batch-x`).fix!, /Job's Pods are not restarted/);
    assert.match(of(`${NS}/lonely`).message, /owner Pod apps\/lonely$/);
    assert.match(of(`${NS}/lonely`).fix!, /a bare Pod/);
    assert.match(of(`${NS}/included`).message, /container\(s\) sidecar lack/);
    assert.match(
      of(`${OUTSIDE}/stray`).message,
      /skips namespace outside: it is outside every entry's namespaceSelector/,
    );
    assert.match(of(`${NS}/web-5d8-a`).fix!, /kubectl rollout restart -n apps deployment\/web/);
    const summary = checks.find((c) => c.id === 'slipped-pods')!;
    assert.match(summary.message, /^8 of \d+ running Pods lack .*; 7 owner\(s\), 3 of them restartable/);
  });

  test('--fix without a terminal and without --yes refuses, restarting nothing', async () => {
    const { code, stderr } = await doctor('--fix');
    assert.equal(code, 2);
    assert.match(stderr, /asks first on a terminal; there is none here: pass --yes/);
    assert.equal((await get(`/apis/apps/v1/namespaces/${NS}/deployments/web`)).metadata.generation, 1);
    const yesAlone = await doctor('--yes');
    assert.equal(yesAlone.code, 2);
  });

  test('--fix on a terminal lists what it will restart and asks; "n" restarts nothing', () => {
    // util-linux's script(1) gives the CLI a pseudo-terminal; the answer is typed on it.
    const [node, argv] = cliCommand(['doctor', '--kubeconfig', cp.kubeconfigPath, '--fix']);
    const command = [node, ...argv].map(shellQuote).join(' ');
    const r = spawnSync('script', ['-q', '-e', '-c', command, '/dev/null'], {
      encoding: 'utf8',
      input: 'n\n',
      env: cliEnv({ TERM: 'xterm-256color' }),
    });
    assert.match(
      r.stdout,
      /doctor --fix will restart \(as kubectl rollout restart\):\r?\n {2}DaemonSet apps\/agent\r?\n {2}Deployment apps\/web\r?\n {2}StatefulSet apps\/db\r?\n(\S+)?Restart these 3\? \[y\/N\] /,
    );
    assert.match(r.stdout, /restart: not confirmed: nothing was restarted/);
  });

  test('--fix --yes restarts each Deployment, StatefulSet and DaemonSet once, and nothing else', async () => {
    assert.equal(
      (await get(`/apis/apps/v1/namespaces/${NS}/deployments/web`)).metadata.generation,
      1,
      'not restarted on "n"',
    );
    const { checks } = await doctor('--fix', '--yes');
    assert.deepEqual(
      checks
        .filter((c) => c.id === 'restart')
        .map((c) => `${c.verdict} ${c.subject}`)
        .sort(),
      ['pass DaemonSet apps/agent', 'pass Deployment apps/web', 'pass StatefulSet apps/db'],
    );
    for (const path of ['deployments/web', 'statefulsets/db', 'daemonsets/agent']) {
      const o = await get(`/apis/apps/v1/namespaces/${NS}/${path}`);
      assert.equal(o.metadata.generation, 2, `${path} restarted once`);
      assert.match(
        o.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt'] ?? '',
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
      );
    }
    const jobTemplate = (await get(`/apis/batch/v1/namespaces/${NS}/jobs/batch`)).spec.template.metadata;
    assert.equal(jobTemplate?.annotations?.['kubectl.kubernetes.io/restartedAt'], undefined);
    // The restarted owners' Pods are told so; the others still need a person.
    assert.equal(checks.find((c) => c.subject === `Pod ${NS}/web-5d8-a`)?.verdict, 'warn');
    assert.equal(checks.find((c) => c.subject === `Pod ${NS}/lonely`)?.verdict, 'fail');
  });
});

describe("serve's leader counts them (wiw_slipped_pods)", () => {
  const sample = /^wiw_slipped_pods\{provider="(\w+)"\} (\d+)$/gm;
  const samples = async (w: WebhookProcess) =>
    Object.fromEntries([...(await w.metrics()).matchAll(sample)].map((m) => [m[1], Number(m[2])]));

  test('the Lease holder exports the count by provider, the other replica no sample; a standby takes over', async () => {
    const args = ['--slipped-pods-interval-seconds', '60', '--slipped-pods-lease-namespace', NS];
    const replicas = await Promise.all([startWebhook(cp, args), startWebhook(cp, args)]);
    try {
      const leader = await until('a replica to count the slipped Pods', async () => {
        for (const r of replicas) if (Object.keys(await samples(r)).length > 0) return r;
        return undefined;
      });
      // The eight Pods doctor lists, all with an AWS identity; every provider has its sample.
      assert.deepEqual(await samples(leader), { aws: 8, azure: 0, gcp: 0 });
      const standby = replicas.find((r) => r !== leader)!;
      assert.deepEqual(await samples(standby), {});
      // The leader stops and releases the Lease: the standby counts.
      await leader.stop();
      const taken = await until('the standby to count', async () => {
        const s = await samples(standby);
        return Object.keys(s).length > 0 ? s : undefined;
      });
      assert.deepEqual(taken, { aws: 8, azure: 0, gcp: 0 });
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
    }
  });
});

describe('bounded: page by page, and a count of what is not listed', () => {
  const MANY = 'many';
  const COUNT = 25;

  test('25 slipped Pods: read 3 a page, or pages cut down to one Pod by their size, all are found; doctor lists 20 and counts 5', async () => {
    await createNamespace(cp, MANY);
    await createServiceAccount(cp, MANY, 'reader', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
    for (let i = 0; i < COUNT; i++) await pod(`p${i}`, {}, MANY);
    const api = await connectKube(cp.kubeconfigPath);
    try {
      const providers = createProviders(loadConfig(new Map(), {}));
      const lookup = (namespace: string, name: string) =>
        api
          .request('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}`)
          .then((raw) => slimServiceAccount(raw as never, serviceAccountAnnotations(providers)));
      for (const paging of [{ pageSize: 3 }, { maxPageBytes: 4096 }]) {
        const found: string[] = [];
        const read = await scanPods({
          api,
          providers,
          lookup,
          namespace: MANY,
          ...paging,
          onSlipped: (p) => void found.push(p.metadata!.name!),
        });
        assert.equal(read, COUNT, JSON.stringify(paging));
        assert.deepEqual(found.toSorted(), Array.from({ length: COUNT }, (_, i) => `p${i}`).sort());
      }
    } finally {
      api.close();
    }
    const { checks } = await doctor('--namespace', MANY);
    assert.equal(checks.filter((c) => c.id === 'slipped-pod').length, 20);
    const summary = checks.find((c) => c.id === 'slipped-pods')!;
    assert.match(
      summary.message,
      /^25 of 25 running Pods lack .*, 5 more than listed above; 25 owner\(s\), 0 of them restartable/,
    );
  });
});
