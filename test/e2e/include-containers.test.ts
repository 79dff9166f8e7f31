// End to end (issue 31 item 2): include-containers through a real kube-apiserver. A Pod of two
// containers naming one gets the token mount and the variables in that one only, for each cloud;
// a name matching no container reaches the client as an admission warning (Warning header, 299).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { registerWebhook, startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { CLIENT, ROLE_ARN, TENANT, WIF_PROVIDER } from '../support/identities.ts';

const NS = 'team-a';
let cp: ControlPlane;
let wh: WebhookProcess;

const CLOUDS = [
  {
    sa: 'aws',
    annotations: { 'eks.amazonaws.com/role-arn': ROLE_ARN },
    labels: {},
    include: 'eks.amazonaws.com/include-containers',
    variable: 'AWS_WEB_IDENTITY_TOKEN_FILE',
    volume: 'aws-iam-token',
  },
  {
    sa: 'azure',
    annotations: { 'azure.workload.identity/client-id': CLIENT },
    labels: { 'azure.workload.identity/use': 'true' },
    include: 'azure.workload.identity/include-containers',
    variable: 'AZURE_FEDERATED_TOKEN_FILE',
    volume: 'azure-identity-token',
  },
  {
    sa: 'gcp',
    annotations: { 'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER },
    labels: {},
    include: 'cloud.google.com/include-containers',
    variable: 'GOOGLE_APPLICATION_CREDENTIALS',
    volume: 'gcp-iam-token',
  },
] as const;

before(async () => {
  cp = await startControlPlane({ name: 'e2e-include' });
  await createNamespace(cp, NS, { 'e2e.workload-identity-webhook.io/main': 'on' });
  for (const c of CLOUDS) await createServiceAccount(cp, NS, c.sa, c.annotations);
  wh = await startWebhook(cp, ['--azure-tenant-id', TENANT]);
  await registerWebhook(
    cp,
    wh,
    'include-containers',
    [{ namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/main': 'on' } } }],
    NS,
  );
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
});

let seq = 0;
async function create(cloud: (typeof CLOUDS)[number], include: string) {
  const res = await cp.request('POST', `/api/v1/namespaces/${NS}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p${++seq}`, labels: cloud.labels, annotations: { [cloud.include]: include } },
    spec: {
      serviceAccountName: cloud.sa,
      containers: [
        { name: 'app', image: 'busybox' },
        { name: 'other', image: 'busybox' },
      ],
    },
  });
  assert.equal(res.status, 201, res.body);
  return { pod: JSON.parse(res.body) as V1Pod, warnings: [res.headers.warning ?? []].flat().join('\n') };
}

const names = (c: V1Container) => ({
  env: (c.env ?? []).map((e) => e.name),
  mounts: (c.volumeMounts ?? []).map((m) => m.name),
});

describe('include-containers: only the named container gets the identity, as the API server stores it', () => {
  for (const cloud of CLOUDS)
    test(`${cloud.include}: "app" of app and other`, async () => {
      const { pod, warnings } = await create(cloud, 'app');
      const [app, other] = pod.spec!.containers;
      assert.ok(names(app).env.includes(cloud.variable), JSON.stringify(app));
      assert.ok(names(app).mounts.includes(cloud.volume), JSON.stringify(app));
      assert.ok(pod.spec!.volumes!.some((v) => v.name === cloud.volume));
      // "other" keeps only what the API server gives every container (its ServiceAccount token).
      assert.deepEqual(names(other).env, []);
      assert.ok(!names(other).mounts.includes(cloud.volume), JSON.stringify(other));
      assert.equal(warnings, '');
    });

  test('a name matching no container reaches the client as a warning; the named one is still served', async () => {
    const { pod, warnings } = await create(CLOUDS[0], 'app,ghost');
    assert.ok(pod.spec!.containers[0].env!.some((e) => e.name === 'AWS_ROLE_ARN'));
    assert.equal(pod.spec!.containers[1].env, undefined);
    assert.match(
      warnings,
      /^299 - "Pod annotation eks.amazonaws.com\/include-containers names no container or init container \\"ghost\\""/,
    );
  });
});
