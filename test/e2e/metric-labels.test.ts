// A caller cannot mint metric series: `serve` against a real kube-apiserver takes a namespace as
// a label value only when the cluster has it (its ServiceAccount cache knows it), every other
// namespace shares one stand-in value, a namespace that goes takes its series along, and a name
// of the wrong form or type is refused in the envelope with a 400, never a 500.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { httpsRequest } from '../support/https-client.ts';
import { startWebhook, until, type WebhookProcess } from '../support/webhook.ts';

let cp: ControlPlane;
let webhook: WebhookProcess;

function review(namespace: unknown, metadata: Record<string, unknown> = { name: 'p' }) {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${Math.random()}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      operation: 'CREATE',
      namespace,
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { ...metadata, labels: { 'azure.workload.identity/use': 'true' } },
        spec: { containers: [{ name: 'app', image: 'app' }] },
      },
    },
  });
}

const send = (body: string) =>
  httpsRequest(`${webhook.url}/mutate`, {
    method: 'POST',
    ca: webhook.caPem,
    body,
    headers: { 'content-type': 'application/json' },
  });

const azureSeries = (text: string) => text.split('\n').filter((l) => l.startsWith('azwi_mutation_request_count'));

before(async () => {
  cp = await startControlPlane();
  await createNamespace(cp, 'team-a');
  await createServiceAccount(cp, 'team-a', 'default');
  webhook = await startWebhook(cp);
});
after(async () => {
  await webhook?.stop();
  await cp?.stop();
});

describe('metric labels from requests', () => {
  test("a namespace the cluster has is a label value; 300 made-up ones share one, the cluster's stays", async () => {
    assert.equal((await send(review('team-a'))).status, 200);
    for (let i = 0; i < 300; i++) assert.equal((await send(review(`made-up-${i}`))).status, 200);
    const series = azureSeries(await webhook.metrics());
    assert.deepEqual(series.map((l) => /namespace="([^"]*)"/.exec(l)![1]).sort(), ['_unknown', 'team-a']);
    assert.match(series.find((l) => l.includes('_unknown'))!, / 300$/);
  });

  test('a namespace that goes takes its series along', async () => {
    await cp
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNamespacedServiceAccount({ namespace: 'team-a', name: 'default' });
    await until('the series of team-a to go', async () =>
      azureSeries(await webhook.metrics()).every((l) => !l.includes('team-a')),
    );
  });

  test('a name of the wrong form or type is a 400 naming the field, and the webhook keeps answering', async () => {
    const cases: [unknown, Record<string, unknown>, RegExp][] = [
      ['x'.repeat(64 * 1024), { name: 'p' }, /request\.namespace/],
      ['Team_A', { name: 'p' }, /request\.namespace/],
      ['team-a', { name: 1.5 }, /metadata\.name/],
      ['team-a', { name: true }, /metadata\.name/],
      ['team-a', { name: {} }, /metadata\.name/],
      ['team-a', { generateName: ['x'] }, /metadata\.generateName/],
      ['team-a', { name: 'a'.repeat(254) }, /metadata\.name/],
      ['team-a', { name: 'p', namespace: 7 }, /metadata\.namespace/],
    ];
    for (const [namespace, metadata, field] of cases) {
      const r = await send(review(namespace, metadata));
      assert.equal(r.status, 400, r.body);
      assert.equal(r.json().code, 'WIW_BAD_ADMISSION_REVIEW');
      assert.match(r.json().message, field);
      assert.ok(r.body.length < 400, 'the answer does not echo the value');
    }
    assert.equal((await send(review('team-b', { generateName: 'web-' }))).status, 200);
    assert.doesNotMatch(await webhook.metrics(), /Team_A|xxxxxxxx/);
  });
});
