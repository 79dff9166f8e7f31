// End to end: tenant policy as a WorkloadIdentityPolicy custom resource on a real kube-apiserver.
// Two webhook processes watch the same policies: one with the default --policy-failure-mode=deny,
// one with keep-last-good, each registered for its own namespaces. The webhooks and `preview` are
// the built CLI (test/harness/cli-process.ts), what the chart runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { runCli } from '../harness/cli-process.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { roleArn } from '../support/identities.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const CRD = join(
  ROOT,
  'charts/workload-identity-webhook/crds/workloadidentitypolicies.workload-identity-webhook.io.yaml',
);
const STARTER = join(ROOT, 'charts/workload-identity-webhook/files/policies/namespace-labels.yaml');
const GROUP = { group: 'workload-identity-webhook.io', version: 'v1alpha1', plural: 'workloadidentitypolicies' };
const SELECT = 'policy-e2e.workload-identity-webhook.io/webhook';
const ACCOUNT_LABEL = (account: string) => `aws-account.workload-identity-webhook.io/${account}`;
const ROLE_A = roleArn('app', '111111111111');
const ROLE_B = roleArn('app', '222222222222');
const STARTER_DENIAL =
  'namespace tenant-a may not use AWS account 222222222222; a cluster administrator allows it with the namespace label aws-account.workload-identity-webhook.io/222222222222=true (WorkloadIdentityPolicy "namespace-labels", validation "aws-account-of-namespace")';

let cp: ControlPlane;
let core: CoreV1Api;
let objects: CustomObjectsApi;
let denyWh: WebhookProcess;
let keepWh: WebhookProcess;
let policyFile: string;

type Policy = {
  metadata: { name: string; resourceVersion?: string; generation?: number };
  spec?: unknown;
  status?: PolicyStatus;
};
type PolicyStatus = {
  observedGeneration?: number;
  conditions?: { type: string; status: string; reason: string; message: string }[];
  problems?: { reason: string; path: string; message: string }[];
  examples?: { total: number; failed: number };
};

async function createPolicy(name: string, spec: unknown): Promise<void> {
  await objects.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: 'workload-identity-webhook.io/v1alpha1',
      kind: 'WorkloadIdentityPolicy',
      metadata: { name },
      spec,
    },
  });
}

async function getPolicy(name: string): Promise<Policy> {
  return (await objects.getClusterCustomObject({ ...GROUP, name })) as Policy;
}

async function replaceSpec(name: string, spec: unknown): Promise<void> {
  const current = await getPolicy(name);
  await objects.replaceClusterCustomObject({ ...GROUP, name, body: { ...current, spec } });
}

/** The status once the webhook has judged `generation` and `check` holds. */
async function statusOf(name: string, generation: number, check: (s: PolicyStatus) => boolean): Promise<PolicyStatus> {
  return until(`the status of ${name} generation ${generation}`, async () => {
    const p = await getPolicy(name);
    return p.status?.observedGeneration === generation && check(p.status) ? p.status : undefined;
  });
}

let seq = 0;
function podBody(serviceAccountName: string): V1Pod {
  return {
    metadata: { name: `p${++seq}` },
    spec: { serviceAccountName, containers: [{ name: 'app', image: 'busybox' }] },
  };
}

/** Creates a Pod; resolves to the stored Pod or to the API server's refusal message. */
async function tryPod(
  namespace: string,
  serviceAccount: string,
  dryRun = false,
): Promise<{ pod: V1Pod } | { refused: string }> {
  try {
    return {
      pod: await core.createNamespacedPod({
        namespace,
        body: podBody(serviceAccount),
        dryRun: dryRun ? 'All' : undefined,
      }),
    };
  } catch (err) {
    const body = (err as { body?: string }).body;
    if (!body) throw err;
    return { refused: (JSON.parse(body) as { message: string }).message };
  }
}

/** Polls dry-run creations until the outcome is the one wanted: policy and label changes reach the webhooks asynchronously. */
async function eventually(
  namespace: string,
  serviceAccount: string,
  want: 'admitted' | RegExp,
): Promise<string | undefined> {
  return until(
    `${namespace}/${serviceAccount} to be ${want === 'admitted' ? 'admitted' : `refused with ${want}`}`,
    async () => {
      const r = await tryPod(namespace, serviceAccount, true);
      if (want === 'admitted') return 'pod' in r ? 'admitted' : undefined;
      return 'refused' in r && want.test(r.refused) ? r.refused : undefined;
    },
  );
}

const envOf = (pod: V1Pod) => Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));

before(async () => {
  cp = await startControlPlane({ name: 'policy-e2e' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  objects = cp.kubeConfig().makeApiClient(CustomObjectsApi);
  const ext = cp.kubeConfig().makeApiClient(ApiextensionsV1Api);
  const crd = parse(readFileSync(CRD, 'utf8'));
  await ext.createCustomResourceDefinition({ body: crd });
  await until('the CRD to be established', async () => {
    const got = await ext.readCustomResourceDefinition({ name: crd.metadata.name });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') || undefined;
  });

  await createNamespace(cp, 'tenant-a', { [SELECT]: 'deny', [ACCOUNT_LABEL('111111111111')]: 'true' });
  await createNamespace(cp, 'tenant-k', { [SELECT]: 'keep', [ACCOUNT_LABEL('111111111111')]: 'true' });
  await createNamespace(cp, 'probe-deny', { [SELECT]: 'deny' });
  await createNamespace(cp, 'probe-keep', { [SELECT]: 'keep' });
  for (const ns of ['tenant-a', 'tenant-k']) {
    await createServiceAccount(cp, ns, 'own', { 'eks.amazonaws.com/role-arn': ROLE_A });
    await createServiceAccount(cp, ns, 'claims-b', { 'eks.amazonaws.com/role-arn': ROLE_B });
    await createServiceAccount(cp, ns, 'plain', {});
  }

  const starter = parse(readFileSync(STARTER, 'utf8'));
  await createPolicy(starter.metadata.name, starter.spec);
  await createPolicy('providers', {
    identityProviders: [
      {
        name: 'tenants-aws',
        displayName: 'Tenant accounts',
        aws: { accountIds: ['111111111111', '222222222222'], region: 'eu-west-1' },
      },
    ],
  });

  // The deny webhook also reads a policy file: both sources at once.
  policyFile = join(cp.dir, 'file-policy.yaml');
  writeFileSync(
    policyFile,
    stringify({
      apiVersion: 'workload-identity-webhook.io/v1alpha1',
      kind: 'WorkloadIdentityPolicy',
      metadata: { name: 'from-file' },
      spec: {
        validations: [
          {
            name: 'has-a-provider',
            expression: "identity.provider != ''",
            examples: [{ name: 'aws', identity: { provider: 'aws' }, expect: { allowed: true } }],
          },
        ],
      },
    }),
  );
  [denyWh, keepWh] = await Promise.all([
    startWebhook(cp, ['--watch-policies', '--policy-file', policyFile]),
    startWebhook(cp, ['--watch-policies', '--policy-failure-mode', 'keep-last-good']),
  ]);
  await registerWebhook(
    cp,
    denyWh,
    'policy-deny',
    [{ namespaceSelector: { matchLabels: { [SELECT]: 'deny' } } }],
    'probe-deny',
  );
  await registerWebhook(
    cp,
    keepWh,
    'policy-keep',
    [{ namespaceSelector: { matchLabels: { [SELECT]: 'keep' } } }],
    'probe-keep',
  );
});

after(async () => {
  await Promise.all([denyWh?.stop(), keepWh?.stop()]);
  await cp?.stop();
});

describe('tenant policy in a cluster', () => {
  test('the starter policy is in force: its status is Ready with every example passed', async () => {
    const status = await statusOf('namespace-labels', 1, (s) => s.conditions?.[0]?.status === 'True');
    assert.equal(status.conditions![0].reason, 'Valid');
    assert.deepEqual(status.examples, { total: 11, failed: 0 });
    assert.deepEqual(status.problems, []);
  });

  test("tenant-a claiming tenant-b's role is denied with the policy's message", async () => {
    const r = await tryPod('tenant-a', 'claims-b');
    assert.ok('refused' in r, 'expected a refusal');
    assert.equal(
      r.refused,
      `admission webhook "w0.policy-deny.workload-identity-webhook.io" denied the request: ${STARTER_DENIAL}`,
    );
  });

  test("tenant-a's own role is admitted, with the declared provider's region", async () => {
    const r = await tryPod('tenant-a', 'own');
    assert.ok('pod' in r, 'refused' in r ? r.refused : '');
    const env = envOf(r.pod);
    assert.equal(env.AWS_ROLE_ARN, ROLE_A);
    assert.equal(env.AWS_REGION, 'eu-west-1');
  });

  test('preview --policy FILE gives the same answers, from the same Namespace, ServiceAccount and Pod', async () => {
    const dir = cp.dir;
    const ns = await core.readNamespace({ name: 'tenant-a' });
    const write = (name: string, value: unknown) => {
      const path = join(dir, name);
      writeFileSync(path, stringify(JSON.parse(JSON.stringify(value))));
      return path;
    };
    const nsFile = write('preview-ns.yaml', { apiVersion: 'v1', kind: 'Namespace', ...ns });
    const policies = [
      STARTER,
      write('preview-providers.yaml', {
        apiVersion: 'workload-identity-webhook.io/v1alpha1',
        kind: 'WorkloadIdentityPolicy',
        metadata: { name: 'providers' },
        spec: (await getPolicy('providers')).spec,
      }),
    ];
    const preview = async (sa: string) => {
      const account = await core.readNamespacedServiceAccount({ namespace: 'tenant-a', name: sa });
      const saFile = write(`preview-sa-${sa}.yaml`, { apiVersion: 'v1', kind: 'ServiceAccount', ...account });
      const podFile = write(`preview-pod-${sa}.yaml`, {
        apiVersion: 'v1',
        kind: 'Pod',
        ...podBody(sa),
        metadata: { name: 'preview', namespace: 'tenant-a' },
      });
      const args = [
        'preview',
        ...policies.flatMap((p) => ['--policy', p]),
        '-f',
        nsFile,
        '-f',
        saFile,
        '-f',
        podFile,
        '-o',
        'json',
      ];
      return runCli(args);
    };

    const denied = await preview('claims-b');
    assert.equal(denied.code, 1, denied.stderr);
    assert.equal(denied.stderr.trim(), `denied (PolicyDenied): ${STARTER_DENIAL}`);
    const cluster = await tryPod('tenant-a', 'claims-b', true);
    assert.ok('refused' in cluster && cluster.refused.endsWith(STARTER_DENIAL));

    const admitted = await preview('own');
    assert.equal(admitted.code, 0, admitted.stderr);
    const previewed = JSON.parse(admitted.stdout) as V1Pod;
    const created = await tryPod('tenant-a', 'own');
    assert.ok('pod' in created);
    assert.deepEqual(
      previewed.spec!.containers[0].env,
      JSON.parse(JSON.stringify(created.pod.spec!.containers[0].env)),
    );
    const volume = (p: V1Pod) => JSON.parse(JSON.stringify(p.spec!.volumes!.find((v) => v.name === 'aws-iam-token')));
    assert.deepEqual(volume(previewed).projected.sources[0], volume(created.pod).projected.sources[0]);
  });

  test('once an administrator labels tenant-a for the account, the same ServiceAccount is admitted', async () => {
    const ns = await core.readNamespace({ name: 'tenant-a' });
    ns.metadata!.labels = { ...ns.metadata!.labels, [ACCOUNT_LABEL('222222222222')]: 'true' };
    await core.replaceNamespace({ name: 'tenant-a', body: ns });
    await eventually('tenant-a', 'claims-b', 'admitted');
    const r = await tryPod('tenant-a', 'claims-b');
    assert.ok('pod' in r, 'refused' in r ? r.refused : '');
    assert.equal(envOf(r.pod).AWS_ROLE_ARN, ROLE_B);
  });

  test('a namespace created a moment ago is judged with its labels (read directly if not cached yet)', async () => {
    await createNamespace(cp, 'tenant-new', { [SELECT]: 'deny', [ACCOUNT_LABEL('111111111111')]: 'true' });
    await createServiceAccount(cp, 'tenant-new', 'own', { 'eks.amazonaws.com/role-arn': ROLE_A });
    const r = await tryPod('tenant-new', 'own');
    assert.ok('pod' in r, 'refused' in r ? r.refused : '');
    assert.equal(envOf(r.pod).AWS_ROLE_ARN, ROLE_A);
  });

  test('an identity outside the declared providers is refused', async () => {
    await createServiceAccount(cp, 'tenant-a', 'elsewhere', {
      'eks.amazonaws.com/role-arn': roleArn('app', '333333333333'),
    });
    const refused = await eventually('tenant-a', 'elsewhere', /is not an identity provider this cluster trusts/);
    assert.match(
      refused!,
      /AWS account 333333333333 \(partition aws\) of role arn:aws:iam::333333333333:role\/app is not an identity provider this cluster trusts: the AWS identity providers declared are "Tenant accounts" \(accounts 111111111111, 222222222222\)$/,
    );
  });
});

describe('a policy whose example fails', () => {
  const closed = (expectAllowed: boolean, expression = "identity.account != '111111111111'") => ({
    validations: [
      {
        name: 'account-closed',
        expression,
        message: 'account 111111111111 is closed',
        examples: [
          {
            name: 'the closed account',
            identity: { provider: 'aws', account: '111111111111' },
            expect: { allowed: expectAllowed },
          },
        ],
      },
    ],
  });

  test('shows the failing example in its status and is not enforced (keep-last-good) or refuses identities (deny)', async () => {
    await createPolicy('closed-account', closed(true));
    const status = await statusOf('closed-account', 1, (s) => s.conditions?.[0]?.status === 'False');
    assert.equal(status.conditions![0].reason, 'ExampleFailed');
    assert.deepEqual(status.problems, [
      {
        reason: 'ExampleFailed',
        path: 'spec.validations[0].examples[0]',
        message:
          'validation "account-closed", example "the closed account": expected allowed, but the expression gave false (denied: account 111111111111 is closed)',
      },
    ]);
    assert.deepEqual(status.examples, { total: 1, failed: 1 });

    // keep-last-good: never good, so not enforced at all: the closed account is still admitted.
    const r = await tryPod('tenant-k', 'own');
    assert.ok('pod' in r, 'refused' in r ? r.refused : '');
    // deny (the default): every cloud identity is refused, naming the broken policy; Pods without one pass.
    const refused = await eventually('tenant-a', 'own', /PolicyUnavailable|broken tenant policy/);
    assert.match(
      refused!,
      /cloud identities are refused until the broken tenant policy is fixed \(--policy-failure-mode=deny\): WorkloadIdentityPolicy "closed-account": spec\.validations\[0\]\.examples\[0\]: validation "account-closed", example "the closed account"/,
    );
    assert.ok('pod' in (await tryPod('tenant-a', 'plain')));
  });

  test('fixed, it is enforced by both; broken again, keep-last-good goes on enforcing the last good generation', async () => {
    await replaceSpec('closed-account', closed(false));
    await statusOf('closed-account', 2, (s) => s.conditions?.[0]?.status === 'True');
    for (const ns of ['tenant-a', 'tenant-k'])
      await eventually(
        ns,
        'own',
        /account 111111111111 is closed \(WorkloadIdentityPolicy "closed-account", validation "account-closed"\)$/,
      );

    await replaceSpec('closed-account', closed(false, "identity.account != '111111111111' &&"));
    const status = await statusOf('closed-account', 3, (s) => s.conditions?.[0]?.status === 'False');
    assert.equal(status.conditions![0].reason, 'CompileError');
    assert.equal(status.problems![0].path, 'spec.validations[0].expression');
    await eventually('tenant-a', 'own', /broken tenant policy/);
    const kept = await tryPod('tenant-k', 'own', true);
    assert.ok(
      'refused' in kept &&
        kept.refused.endsWith(
          'account 111111111111 is closed (WorkloadIdentityPolicy "closed-account", validation "account-closed")',
        ),
      JSON.stringify(kept),
    );
  });

  test('deleted, it no longer applies', async () => {
    await objects.deleteClusterCustomObject({ ...GROUP, name: 'closed-account' });
    await eventually('tenant-a', 'own', 'admitted');
    await eventually('tenant-k', 'own', 'admitted');
  });
});

describe('the webhooks', () => {
  test('the CRD accepts the policy of docs/policy.md as written', async () => {
    const doc = readFileSync(join(ROOT, 'docs/policy.md'), 'utf8');
    const example = parse(/```yaml\n(apiVersion: workload-identity-webhook\.io\/v1alpha1\n[\s\S]*?)```/.exec(doc)![1]);
    await objects.createClusterCustomObject({ ...GROUP, body: example, dryRun: 'All' });
  });

  test('the CRD refuses an identity provider that names two clouds', async () => {
    const body = {
      apiVersion: 'workload-identity-webhook.io/v1alpha1',
      kind: 'WorkloadIdentityPolicy',
      metadata: { name: 'two-clouds' },
      spec: { identityProviders: [{ name: 'x', aws: {}, gcp: { projectNumber: '1', pool: 'pool' } }] },
    };
    await assert.rejects(
      objects.createClusterCustomObject({ ...GROUP, body, dryRun: 'All' }),
      (err: { body?: string }) => /name exactly one of aws, azure or gcp/.test(String(err.body)),
    );
  });

  test('logged each policy outcome and no failed list, watch or status write', () => {
    assert.ok(
      denyWh
        .logs()
        .some((l) => l.msg === 'tenant policy in force' && l.policy === 'from-file' && l.source === policyFile),
    );
    for (const wh of [denyWh, keepWh]) {
      const logs = wh.logs();
      assert.ok(
        logs.some((l) => l.msg === 'tenant policy in force' && l.policy === 'namespace-labels' && l.examples === 11),
      );
      assert.ok(
        logs.some((l) => l.msg === 'tenant policy not used' && l.policy === 'closed-account' && l.generation === 3),
      );
      const failures = logs.filter(
        (l) => typeof l.msg === 'string' && /cannot write|list\/watch failed|forbidden|silent/.test(l.msg),
      );
      assert.deepEqual(failures, []);
    }
  });
});
