// What kube-apiserver (v1.34, k8s.io/apiserver pkg/util/webhook/client.go) speaks to a webhook:
// HTTP/1.1 alone to one referenced by a Service (kubernetes/kubernetes#75791) and to a URL whose
// host is not localhost or loopback; h2 is offered only to a localhost or loopback URL. README.md
// and docs/hardening.md rest on this (behind the chart's Service, kube-apiserver opens HTTP/1.1
// connections, one per review in flight): here one `serve`, which offers h2 and HTTP/1.1, is
// registered at a non-loopback address of this host and at 127.0.0.1, and its
// wiw_connections_total{protocol} tells which protocol each connection kube-apiserver opened got.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { podBurst } from '../support/pod-burst.ts';
import { hostAddress, registerWebhook, startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { ROLE_ARN } from '../support/identities.ts';

const ADDRESS = hostAddress();
let cp: ControlPlane;
let wh: WebhookProcess;

before(async () => {
  cp = await startControlPlane({ name: 'kube-apiserver-alpn' });
  wh = await startWebhook(cp, ['--self-signed-hosts', `localhost,127.0.0.1,${ADDRESS}`], { host: '0.0.0.0' });
});

after(async () => {
  await wh?.stop();
  await cp?.stop();
});

/** Connections serve accepted so far, by the protocol ALPN picked. */
async function connections() {
  const text = await wh.metrics();
  const of = (protocol: string) =>
    Number(new RegExp(`^wiw_connections_total\\{protocol="${protocol}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { h2: of('h2'), 'http/1.1': of('http/1.1') };
}

/** Registers serve at `host` for `namespace`'s Pods only, then sends 40 dry-run Pods, 8 at a time. */
async function reviewsVia(host: string, namespace: string) {
  await createNamespace(cp, namespace, { 'e2e.workload-identity-webhook.io/alpn': namespace });
  await createServiceAccount(cp, namespace, 'default', {});
  await createServiceAccount(cp, namespace, 'app', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
  const before = await connections();
  await registerWebhook(
    cp,
    { url: `https://${host}:${wh.port}`, caPem: wh.caPem, logs: wh.logs },
    `alpn-${namespace}`,
    [{ namespaceSelector: { matchLabels: { 'e2e.workload-identity-webhook.io/alpn': namespace } } }],
    namespace,
  );
  const burst = await podBurst(cp, namespace, 'app', 40, 8);
  assert.deepEqual(Object.fromEntries(burst.refused), {}, 'refused');
  assert.equal(burst.mutated, 40);
  const now = await connections();
  return { h2: now.h2 - before.h2, 'http/1.1': now['http/1.1'] - before['http/1.1'] };
}

test('kube-apiserver speaks HTTP/1.1 to a webhook at a non-loopback address, as to a Service, and h2 only to a loopback one', async () => {
  const remote = await reviewsVia(ADDRESS, 'alpn-remote');
  assert.equal(remote.h2, 0, `no h2 connection to https://${ADDRESS}: ${JSON.stringify(remote)}`);
  assert.ok(remote['http/1.1'] >= 1, `HTTP/1.1 connections to https://${ADDRESS}: ${JSON.stringify(remote)}`);
  const loopback = await reviewsVia('127.0.0.1', 'alpn-loopback');
  assert.ok(loopback.h2 >= 1, `an h2 connection to https://127.0.0.1: ${JSON.stringify(loopback)}`);
  assert.equal(loopback['http/1.1'], 0, `no HTTP/1.1 connection to https://127.0.0.1: ${JSON.stringify(loopback)}`);
  console.log(
    `connections kube-apiserver opened: to ${ADDRESS} ${JSON.stringify(remote)}, to 127.0.0.1 ${JSON.stringify(loopback)}`,
  );
});
