import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { createMetrics } from '../../src/metrics.ts';
import { createPeerMetrics } from '../../src/clouds/index.ts';
import type { Injection } from '../../src/clouds/types.ts';
import { Registry, Summary } from 'prom-client';
import { SumCountSummary } from '../../src/clouds/aws/metrics.ts';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { apply, pod, providers, sa } from '../support/builders.ts';
import { httpsRequest } from '../support/https-client.ts';
import { ROLE_ARN, roleArn } from '../support/identities.ts';

const ARN = roleArn('r');
let app: FastifyInstance;
let url: string;
let ca: string;
const accounts = new Map<string, ServiceAccountView>([
  ['team-a/app', sa({ 'eks.amazonaws.com/role-arn': ARN })],
  // The AWS peer's handler_test.go ServiceAccount.
  [
    'default/default',
    sa(
      {
        'eks.amazonaws.com/role-arn': ROLE_ARN,
        'eks.amazonaws.com/token-expiration': '3600',
      },
      'default',
      'default',
    ),
  ],
]);
const metrics = createMetrics();

function review(object: unknown, extra: Record<string, unknown> = {}, apiVersion = 'admission.k8s.io/v1') {
  return {
    apiVersion,
    kind: 'AdmissionReview',
    request: {
      uid: 'e911857d-c318-11e8-bbad-025000000001',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'team-a',
      operation: 'CREATE',
      object,
      ...extra,
    },
  };
}

function post(body: unknown, contentType = 'application/json') {
  return httpsRequest(`${url}/mutate`, {
    method: 'POST',
    ca,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': contentType },
  });
}

before(async () => {
  const certs = await generateCertificates(['localhost', '127.0.0.1']);
  ca = certs.caPem;
  const p = providers();
  app = buildApp({
    https: { cert: certs.certPem, key: certs.keyPem },
    log: pino({ level: 'silent' }),
    metrics,
    admit: (request) => admitPod(p, (ns, name) => accounts.get(`${ns}/${name}`), request),
    isReady: () => true,
    observePod: createPeerMetrics(metrics.registry, { namespaceLabel: true }).observePod,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

after(() => app.close());

describe('POST /mutate', () => {
  test('answers in admission.k8s.io/v1 with the same uid and a base64 JSONPatch', async () => {
    const res = await post(review(pod()));
    assert.equal(res.status, 200);
    const body = res.json();
    assert.equal(body.apiVersion, 'admission.k8s.io/v1');
    assert.equal(body.kind, 'AdmissionReview');
    assert.equal(body.response.uid, 'e911857d-c318-11e8-bbad-025000000001');
    assert.equal(body.response.allowed, true);
    assert.equal(body.response.patchType, 'JSONPatch');
    const patch = JSON.parse(Buffer.from(body.response.patch, 'base64').toString());
    const env = apply(pod(), patch).spec!.containers![0].env!;
    assert.deepEqual(
      env.map((e) => e.name),
      ['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE'],
    );
    assert.deepEqual(body.response.auditAnnotations, { 'injected-providers': 'aws' });
  });

  test('tolerates v1beta1 and answers in v1beta1', async () => {
    const body = (await post(review(pod(), {}, 'admission.k8s.io/v1beta1'))).json();
    assert.equal(body.apiVersion, 'admission.k8s.io/v1beta1');
    assert.equal(body.response.allowed, true);
  });

  test('a Pod without identity is allowed with no patch', async () => {
    const p = pod({ spec: { serviceAccountName: 'nobody' } });
    const body = (await post(review(p))).json();
    assert.equal(body.response.allowed, true);
    assert.equal(body.response.patch, undefined);
  });

  test('a denial carries the code and the message naming the annotation', async () => {
    // A role that goes into the profiles' config file is refused with or without --strict.
    accounts.set('team-a/bad', sa({ 'eks.amazonaws.com/role-arns': 'writer=arn:aws:iam::1:role/x' }, 'bad'));
    const body = (await post(review(pod({ spec: { serviceAccountName: 'bad' } })))).json();
    assert.equal(body.response.allowed, false);
    assert.equal(body.response.status.code, 400);
    assert.match(
      body.response.status.message,
      /eks\.amazonaws\.com\/role-arns profile writer="arn:aws:iam::1:role\/x" is not an IAM role ARN/,
    );
  });

  test('UPDATE of a Pod is allowed untouched', async () => {
    const body = (await post(review(pod(), { operation: 'UPDATE', oldObject: pod() }))).json();
    assert.equal(body.response.allowed, true);
    assert.equal(body.response.patch, undefined);
  });

  test('a wrong content type is 415', async () => {
    const res = await post(JSON.stringify(review(pod())), 'text/plain');
    assert.equal(res.status, 415);
  });

  test('invalid JSON is 400 with a message', async () => {
    const res = await post('{"apiVersion":', 'application/json');
    assert.equal(res.status, 400);
    assert.ok(res.json().message.length > 0);
  });

  test('a __proto__ or constructor.prototype key is refused however it is spelled; the words as values pass', async () => {
    const text = JSON.stringify(review(pod()));
    const poisoned = [
      text.replace('{', '{"__proto__":{"allowed":true},'),
      text.replace('{', '{"\\u005f_proto__":{"allowed":true},'),
      text.replace('{', '{"constructor":{"prototype":{"allowed":true}},'),
      text.replace('{', '{"c\\u006fnstructor":{"prototype":{"allowed":true}},'),
    ];
    for (const body of poisoned) {
      const res = await post(body, 'application/json');
      assert.equal(res.status, 400, body.slice(0, 60));
      assert.match(res.json().message, /not valid JSON/);
    }
    const containers = [
      { name: 'app', image: 'busybox', env: [{ name: 'NOTE', value: '__proto__ constructor \\u0041' }] },
    ];
    const words = review(pod({ spec: { serviceAccountName: 'app', containers } }));
    const res = await post(JSON.stringify(words), 'application/json');
    assert.equal(res.status, 200);
    assert.equal(res.json().response.allowed, true);
  });

  test('a body that is not an AdmissionReview is 400 naming what is wrong', async () => {
    const cases: [unknown, RegExp][] = [
      [[1, 2], /not a JSON object/],
      [{ apiVersion: 'v1', kind: 'Pod' }, /kind is "Pod"; expected "AdmissionReview"/],
      [
        { apiVersion: 'admission.k8s.io/v2', kind: 'AdmissionReview', request: {} },
        /apiVersion is "admission.k8s.io\/v2"/,
      ],
      [{ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, /request is missing/],
      [{ ...review(pod()), request: { ...review(pod()).request, uid: 7 } }, /request.uid/],
      [{ ...review(pod()), request: { ...review(pod()).request, operation: 'PATCH' } }, /request.operation is "PATCH"/],
    ];
    for (const [body, message] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json().code, 'WIW_BAD_ADMISSION_REVIEW');
      assert.match(res.json().message, message);
    }
  });

  test('a Pod of the wrong shape is denied in the review, not a crash', async () => {
    const body = (await post(review({ metadata: {}, spec: { containers: 'app' } }))).json();
    assert.equal(body.response.allowed, false);
    assert.match(body.response.status.message, /spec.containers is not a list/);
    // The server is still answering.
    assert.equal((await post(review(pod()))).json().response.allowed, true);
  });
});

// aws/amazon-eks-pod-identity-webhook pkg/handler/handler_test.go TestModifierHandler (and
// TestMutatePod's nilBody/NoRequest), at 3bf80a348116483b2162190e43232e4d243f76c4. The peer answers
// a review it cannot read with HTTP 200 and a response without uid, which the API server counts as
// a failed call; we answer 4xx, which it counts the same way (docs/compatibility.md,
// envelope-unreadable-review).
describe("the AWS peer's handler cases, at the HTTP envelope", () => {
  const uid = '918ef1dc-928f-4525-99ef-988389f263c3';
  const rawPodWithoutVolume = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'balajilovesoreos', uid: 'be8695c4-4ad0-4038-8786-c508853aa255' },
    spec: { containers: [{ image: 'amazonlinux', name: 'balajilovesoreos' }], serviceAccountName: 'default' },
  };
  const validReview = (typeMeta: boolean) => ({
    ...(typeMeta ? { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' } : {}),
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace: 'default',
      operation: 'CREATE',
      userInfo: { username: 'kubernetes-admin', groups: ['system:authenticated', 'system:masters'] },
      object: rawPodWithoutVolume,
    },
  });
  // validPatchIfNoVolumesPresent applied to rawPodWithoutVolume (Go's `resources: {}` left out).
  const peersPod = {
    ...rawPodWithoutVolume,
    spec: {
      ...rawPodWithoutVolume.spec,
      containers: [
        {
          name: 'balajilovesoreos',
          image: 'amazonlinux',
          env: [
            { name: 'AWS_ROLE_ARN', value: ROLE_ARN },
            { name: 'AWS_WEB_IDENTITY_TOKEN_FILE', value: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token' },
          ],
          volumeMounts: [
            { name: 'aws-iam-token', readOnly: true, mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' },
          ],
        },
      ],
      volumes: [
        {
          name: 'aws-iam-token',
          projected: {
            sources: [
              { serviceAccountToken: { audience: 'sts.amazonaws.com', expirationSeconds: 3600, path: 'token' } },
            ],
          },
        },
      ],
    },
  };

  test('nilBody, NoRequest, InvalidJSON, InvalidPodBytes: refused with a message, not a crash', async () => {
    const cases: [string, string, RegExp][] = [
      ['nilBody', '', /body/i],
      [
        'NoRequest',
        JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: null }),
        /request/,
      ],
      ['InvalidJSON', '{"request": {"object": "\\"metadata\\":{\\"name\\":\\"fake\\""}', /JSON/],
    ];
    for (const [name, body, message] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, name);
      assert.match(res.json().message, message, name);
    }
    // InvalidPodBytes: the object is a string, not a Pod.
    const invalidPod = await post(review('"metadata":{"name":"fake"'));
    assert.equal(invalidPod.status, 400);
    assert.match(invalidPod.json().message, /request.object must be an object/);
  });

  test('BadContentType: application/xml is 415', async () => {
    assert.equal((await post(JSON.stringify(validReview(true)), 'application/xml')).status, 415);
  });

  for (const typeMeta of [false, true]) {
    const name = typeMeta ? 'ValidRequestV1TypeMetaEchoed' : 'ValidRequestSuccessWithoutVolumes';
    test(`${name}: the uid echoed, and the patch gives the peer's Pod`, async () => {
      const res = await post(validReview(typeMeta));
      if (!typeMeta) {
        // The API server always sends apiVersion and kind; a review without them is not one.
        assert.equal(res.status, 400);
        assert.match(res.json().message, /apiVersion|kind/);
        return;
      }
      assert.equal(res.status, 200);
      const body = res.json();
      assert.equal(body.apiVersion, 'admission.k8s.io/v1');
      assert.equal(body.kind, 'AdmissionReview');
      assert.equal(body.response.uid, uid);
      assert.equal(body.response.allowed, true);
      assert.equal(body.response.patchType, 'JSONPatch');
      const ours = apply(
        rawPodWithoutVolume as Parameters<typeof apply>[0],
        JSON.parse(Buffer.from(body.response.patch, 'base64').toString()),
      );
      delete ours.metadata!.annotations;
      assert.deepEqual(ours, peersPod);
    });
  }
});

describe('TLS and probes', () => {
  test('refuses TLS 1.1 and speaks TLS 1.2+', async () => {
    const { port } = app.server.address() as AddressInfo;
    const old = await new Promise<string>((resolve) => {
      const s = connect({
        port,
        host: '127.0.0.1',
        ca,
        servername: 'localhost',
        maxVersion: 'TLSv1.1',
        minVersion: 'TLSv1',
      });
      s.on('secureConnect', () => {
        resolve('connected');
        s.end();
      });
      s.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? 'error'));
    });
    assert.notEqual(old, 'connected');
    const modern = await new Promise<string>((resolve, reject) => {
      const s = connect({ port, host: '127.0.0.1', ca, servername: 'localhost' });
      s.on('secureConnect', () => {
        resolve(s.getProtocol() ?? '');
        s.end();
      });
      s.on('error', reject);
    });
    assert.match(modern, /^TLSv1\.[23]$/);
  });

  test('/healthz and /readyz answer', async () => {
    assert.equal((await httpsRequest(`${url}/healthz`, { ca })).status, 200);
    assert.equal((await httpsRequest(`${url}/readyz`, { ca })).status, 200);
  });

  test('metrics count requests by kind, operation and result', async () => {
    const text = await metrics.registry.metrics();
    assert.match(text, /wiw_admission_requests_total\{kind="Pod",operation="CREATE",result="mutated"\} [1-9]/);
    assert.match(text, /wiw_denials_total\{reason="InvalidRoleArn"\} 1/);
    assert.match(text, /wiw_admission_duration_seconds_bucket\{le="0.0001",kind="Pod"\}/);
  });

  test("the peers' metric names are served beside ours, so their dashboards keep working", async () => {
    const text = await metrics.registry.metrics();
    // aws/amazon-eks-pod-identity-webhook
    assert.match(text, /^http_request_count\{verb="POST",path="\/mutate",code="200"\} [1-9]/m);
    assert.match(text, /^http_request_latencies_bucket\{le="125000",verb="POST",path="\/mutate"\} [1-9]/m);
    assert.match(text, /^http_request_duration_microseconds_count\{verb="POST",path="\/mutate"\} [1-9]/m);
    assert.match(text, /^pod_identity_webhook_pod_count\{method="sts_web_identity"\} [1-9]/m);
    assert.match(text, /^pod_identity_webhook_missing_sa_count [0-9]/m);
    // pfnet-research/gcp-workload-identity-federation-webhook (controller-runtime)
    assert.match(text, /^controller_runtime_webhook_requests_total\{webhook="\/mutate-v1-pod",code="200"\} [1-9]/m);
    assert.match(text, /^controller_runtime_webhook_latency_seconds_count\{webhook="\/mutate-v1-pod"\} [1-9]/m);
    assert.match(text, /^controller_runtime_webhook_requests_in_flight\{webhook="\/mutate-v1-pod"\} 0/m);
    // Azure/azure-workload-identity: declared (observed for Pods labelled azure.workload.identity/use)
    assert.match(text, /^# TYPE azwi_mutation_request histogram/m);
  });

  test("the AWS peer's latency summary reads exactly as prom-client's Summary without quantiles", async () => {
    // SumCountSummary replaces prom-client's Summary (percentiles [], maxAgeSeconds 3600, ageBuckets
    // 5), whose t-digests nothing read; the exposition must not change, line for line.
    const theirs = new Registry();
    const ours = new Registry();
    const name = 'http_request_duration_microseconds';
    const help = 'Response latency summary in microseconds for each verb and path.';
    const reference = new Summary({
      name,
      help,
      labelNames: ['verb', 'path'],
      percentiles: [],
      maxAgeSeconds: 3600,
      ageBuckets: 5,
      registers: [theirs],
    });
    const summary = new SumCountSummary(name, help, [ours]);
    const observations: [Record<string, string>, number][] = [
      [{ verb: 'POST', path: '/mutate' }, 812.5],
      [{ verb: 'POST', path: '/mutate/fail' }, 1e6],
      [{ verb: 'POST', path: '/mutate' }, 0.25],
      [{ verb: 'POST', path: '/mutate' }, 3e9],
    ];
    for (const [labels, value] of observations) {
      reference.observe(labels, value);
      summary.observe(labels, value);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.match(await ours.metrics(), /^http_request_duration_microseconds_count\{verb="POST",path="\/mutate"\} 3$/m);
    assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON());
    ours.resetMetrics();
    theirs.resetMetrics();
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  test("the Azure peer's histogram counts the Pods it would have seen: those labelled azure.workload.identity/use", async () => {
    const registry = new Registry();
    const peers = createPeerMetrics(registry, { namespaceLabel: true });
    const aws = (identity: Record<string, string>) => ({ provider: 'aws', identity }) as unknown as Injection;
    const review = { path: '/mutate', code: 200, seconds: 0.002 };
    peers.observePod({
      ...review,
      namespace: 'team-a',
      labels: { 'azure.workload.identity/use': 'true' },
      injections: [],
    });
    peers.observePod({ ...review, namespace: 'team-b', labels: {}, injections: [aws({ roleArn: 'r' })] });
    peers.observePod({
      ...review,
      namespace: 'team-b',
      labels: { 'azure.workload.identity/use': 'false' },
      injections: [aws({ mode: 'eks-pod-identity' })],
    });
    let text = await registry.metrics();
    assert.match(text, /^azwi_mutation_request_count\{namespace="team-a"\} 1$/m);
    assert.doesNotMatch(text, /namespace="team-b"/);
    assert.match(text, /^pod_identity_webhook_missing_sa_count 1$/m);
    assert.match(text, /^pod_identity_webhook_pod_count\{method="sts_web_identity"\} 1$/m);
    assert.match(text, /^pod_identity_webhook_pod_count\{method="container_credentials"\} 1$/m);
    // A namespace that goes takes its series with it.
    peers.forgetNamespace('team-a');
    text = await registry.metrics();
    assert.doesNotMatch(text, /namespace="team-a"/);
  });

  test('with the namespace label off, the Azure histogram is one series', async () => {
    const registry = new Registry();
    const peers = createPeerMetrics(registry, { namespaceLabel: false });
    for (const namespace of ['a', 'b', 'c'])
      peers.observePod({
        path: '/mutate',
        code: 200,
        seconds: 0.001,
        namespace,
        labels: { 'azure.workload.identity/use': 'true' },
        injections: [],
      });
    const text = await registry.metrics();
    assert.match(text, /^azwi_mutation_request_count 3$/m);
    assert.doesNotMatch(text, /namespace=/);
  });
});
