// Issue 28, findings 2 and 8, end to end: a tenant (a real RBAC user allowed to create Pods and
// ServiceAccounts in its own namespace) sends what the attack sent, as dryRun Pods through
// kube-apiserver 1.34 with the ServiceAccount admission plugin, to `serve` inside the chart's
// memory limit (a memory cgroup with the chart's NODE_OPTIONS).
// - Finding 2: forged injection records of ~236 KB, a container's own AWS_ROLE_ARN of 2.5 MB and
//   container names of 900 KB ran the heap out after 456, 48 and 128 Pods; here more of each are
//   sent, and the webhook answers every one, stays up and is never OOM-killed.
// - Finding 8: role-arns of 1,737 profiles or more made the patch take the Pod's annotations past
//   the 256 KiB kube-apiserver stores, and the API server refused the Pod with its own error. Here
//   the webhook refuses such a Pod with its message, at exactly kube-apiserver's count: a Pod the
//   patch takes to 262,144 bytes is stored, one byte more is refused by the webhook.
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { after, before, describe, test } from 'node:test';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { chartMemory, memoryCgroup, rssMiB, type MemoryCgroup } from '../support/cgroup.ts';
import { httpsRequest } from '../support/https-client.ts';
import { roleArn } from '../support/identities.ts';
import { registerWebhook, startWebhook, type WebhookProcess } from '../support/webhook.ts';

const NS = 'team-a';
const MAX_ANNOTATIONS_BYTES = 256 * 1024;
const annotationsBytes = (a: Record<string, string> | undefined) =>
  Object.entries(a ?? {}).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);

let cp: ControlPlane;
let wh: WebhookProcess;
let cgroup: MemoryCgroup;
let tenant: Agent;

before(async () => {
  const memory = chartMemory();
  cgroup = memoryCgroup('review-bounds', memory.limit);
  // The ServiceAccount admission plugin on, as in a real cluster (the harness turns it off).
  cp = await startControlPlane({
    name: 'review-bounds',
    extraArgs: ['--disable-admission-plugins=DefaultStorageClass'],
  });
  await createNamespace(cp, NS);
  // No controller manager creates it: the ServiceAccount plugin refuses Pods without it.
  await createServiceAccount(cp, NS, 'default', {});
  // The tenant: a user of its own with the part of the built-in `edit` role it uses, in its
  // namespace only (no controller manager aggregates `edit` itself here).
  const { cert, key } = await cp.issueClientCert('tenant-a');
  const rbac = cp.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({
    namespace: NS,
    body: {
      metadata: { name: 'tenant-a' },
      rules: [{ apiGroups: [''], resources: ['pods', 'serviceaccounts'], verbs: ['create', 'get', 'list'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name: 'tenant-a' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant-a' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-a' }],
    },
  });
  tenant = new Agent({ keepAlive: true, maxSockets: 4, cert, key, ca: cp.caPem });
  wh = await startWebhook(cp, [], { wrap: cgroup.wrap, env: { NODE_OPTIONS: memory.nodeOptions } });
  await registerWebhook(cp, wh, 'review-bounds', [{}], NS);
});

after(async () => {
  tenant?.destroy();
  await wh?.stop();
  await cp?.stop();
  cgroup?.remove();
});

/** A request as the tenant. */
async function asTenant(method: string, path: string, body: unknown) {
  const text = JSON.stringify(body);
  const res = await httpsRequest(`${cp.server}${path}`, {
    method,
    ca: cp.caPem,
    agent: tenant,
    body: text,
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) },
    timeoutMs: 60_000,
  });
  return { status: res.status, json: JSON.parse(res.body) as Record<string, any> };
}

interface Verdict {
  stored: boolean;
  message: string;
  annotations?: Record<string, string>;
}

async function dryRunPod(
  name: string,
  serviceAccount: string,
  extra: { annotations?: Record<string, string>; containers?: unknown[] } = {},
): Promise<Verdict> {
  const body = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
    spec: { serviceAccountName: serviceAccount, containers: extra.containers ?? [{ name: 'app', image: 'busybox' }] },
  };
  const { status, json } = await asTenant('POST', `/api/v1/namespaces/${NS}/pods?dryRun=All`, body);
  if (status === 201) return { stored: true, message: '', annotations: json.metadata.annotations };
  return { stored: false, message: String(json.message) };
}

async function serviceAccount(name: string, annotations: Record<string, string>): Promise<void> {
  const { status, json } = await asTenant('POST', `/api/v1/namespaces/${NS}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name, annotations },
  });
  assert.equal(status, 201, JSON.stringify(json).slice(0, 300));
}

/** Pod annotations of exactly `bytes` bytes, keys and values. */
function filler(bytes: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; bytes > 0; i++) {
    const key = `example.com/f${i}`;
    const value = 'x'.repeat(Math.max(0, Math.min(60_000, bytes - key.length)));
    out[key] = value;
    bytes -= key.length + value.length;
  }
  return out;
}

const WEBHOOK_DENIED = /admission webhook "[^"]+" denied the request/;

describe('no patch kube-apiserver would refuse (issue 28, finding 8)', () => {
  test('role-arns of 1,800 profiles: the webhook refuses the Pod with its message', async () => {
    const profiles = Array.from({ length: 1800 }, (_, i) => `p${i}=${roleArn(`r${i}`)}`);
    await serviceAccount('many-roles', { 'eks.amazonaws.com/role-arns': profiles.join(',') });
    const verdict = await dryRunPod('many', 'many-roles');
    assert.equal(verdict.stored, false);
    assert.match(verdict.message, WEBHOOK_DENIED);
    assert.doesNotMatch(verdict.message, /Too long/);
  });

  test("the Pod's annotations after the patch: 262,144 bytes are stored, one more is refused by the webhook", async () => {
    // 64 profiles (the most), with long role paths: a shared config file of ~37 KB.
    const profiles = Array.from({ length: 64 }, (_, i) => `p${i}=${roleArn(`${'path/'.repeat(100)}role-${i}`)}`);
    await serviceAccount('roles', { 'eks.amazonaws.com/role-arns': profiles.join(',') });
    const bare = await dryRunPod('bare', 'roles');
    assert.ok(bare.stored, bare.message);
    const added = annotationsBytes(bare.annotations);
    assert.ok(added > 30_000, `the webhook adds ${added} bytes of annotations`);

    const at = await dryRunPod('at-limit', 'roles', { annotations: filler(MAX_ANNOTATIONS_BYTES - added) });
    assert.ok(at.stored, at.message);
    assert.equal(annotationsBytes(at.annotations), MAX_ANNOTATIONS_BYTES);

    const over = await dryRunPod('over-limit', 'roles', { annotations: filler(MAX_ANNOTATIONS_BYTES - added + 1) });
    assert.equal(over.stored, false);
    assert.match(over.message, WEBHOOK_DENIED);
    assert.match(over.message, /workload-identity-webhook\.io\/aws-config-file \(\d+ bytes\)/);
    assert.match(over.message, /262145 bytes, more than the 262144 kube-apiserver stores/);
  });
});

describe('what a Pod carries is never kept (issue 28, finding 2)', () => {
  test('forged records, long credential values and long names: every Pod answered, the webhook never OOM-killed', async (t) => {
    await serviceAccount('app', { 'eks.amazonaws.com/role-arn': roleArn('app') });
    const unique = (i: number, n: number) => `${i}-`.padEnd(n, 'x');
    const forged = (i: number) => ({
      'workload-identity-webhook.io/injected': JSON.stringify({
        v: 2,
        sa: 'app',
        env: [[unique(i, 236_000), 'AAAAAAAAAAAAAAAA']],
        vol: [],
        ann: [],
        keep: [],
        mac: 'forged',
      }),
    });
    const attacks: [string, number, (i: number) => Parameters<typeof dryRunPod>[2], (v: Verdict) => boolean][] = [
      ['a forged record of 236 KB', 600, (i) => ({ annotations: forged(i) }), (v) => v.stored],
      [
        'AWS_ROLE_ARN of 2.5 MB',
        80,
        (i) => ({
          containers: [{ name: 'app', image: 'busybox', env: [{ name: 'AWS_ROLE_ARN', value: unique(i, 2_500_000) }] }],
        }),
        (v) => WEBHOOK_DENIED.test(v.message) && /more than the 4096/.test(v.message),
      ],
      [
        'a container name of 900 KB',
        160,
        (i) => ({ containers: [{ name: unique(i, 900_000), image: 'busybox' }] }),
        (v) => WEBHOOK_DENIED.test(v.message) && /more than the 63/.test(v.message),
      ],
    ];
    const figures: string[] = [];
    for (const [what, count, make, expected] of attacks) {
      let next = 0;
      const wrong: string[] = [];
      const worker = async () => {
        for (let i = next++; i < count; i = next++) {
          const verdict = await dryRunPod(`p-${i}`, 'app', make(i));
          if (!expected(verdict)) wrong.push(verdict.message.slice(0, 200) || 'stored');
        }
      };
      await Promise.all(Array.from({ length: 4 }, worker));
      const alive = wh.process.exitStatus() === null;
      figures.push(`${what} × ${count}: RSS ${alive ? rssMiB(wh.process.pid).rss.toFixed(0) : 'gone'} MiB`);
      assert.deepEqual(wrong.slice(0, 3), [], `${what}: ${wrong.length} Pods not answered as expected`);
      assert.ok(alive, `the webhook is alive after ${what} (${wh.process.logTail(5)})`);
    }
    const { hwm } = rssMiB(wh.process.pid);
    t.diagnostic(
      `${figures.join('; ')}; peak RSS ${hwm.toFixed(0)} MiB, cgroup peak ${cgroup.peakMiB().toFixed(0)} MiB`,
    );
    assert.equal(cgroup.oomKills(), 0, 'OOM kills in the cgroup');
  });
});
