// The patch's discipline: additive operations only, the user's fields and values kept, idempotent,
// reinvocation, a changed ServiceAccount's injection undone, conflicts refused, pointers escaped.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pod } from '../../src/kube/types.ts';
import { apply, envOf, pod, providers, sa } from '../support/builders.ts';
import {
  CLIENT as AZ_CLIENT,
  ROLE_ARN as AWS_ARN,
  TENANT as AZ_TENANT,
  WIF_PROVIDER as GCP_PROVIDER,
} from '../support/identities.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { denied, mutated, run } from '../support/mutate-pod.ts';

describe('patch discipline', () => {
  const annotations = {
    'eks.amazonaws.com/role-arn': AWS_ARN,
    'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
  };
  const rich = (): Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'rich', annotations: { 'example.com/a~b/c': 'kept' }, labels: { app: 'x' } },
    spec: {
      serviceAccountName: 'app',
      futureField: { nested: [1, 2, 3] },
      volumes: [{ name: 'data', emptyDir: {} }],
      initContainers: [
        { name: 'mesh-proxy', image: 'proxy', restartPolicy: 'Always', startupProbe: { exec: { command: ['true'] } } },
      ],
      containers: [
        {
          name: 'app',
          image: 'app',
          startupProbe: { httpGet: { path: '/', port: 80 } },
          resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }],
          env: [
            { name: 'AWS_ROLE_ARN', value: 'user-chose-this' },
            { name: 'X', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        },
      ],
      ephemeralContainers: [{ name: 'debug', image: 'busybox' }],
    },
  });

  test('only additive operations; no container, containers array or volumes array is replaced', () => {
    const r = run(rich(), annotations);
    assert.ok(r.allowed);
    for (const op of r.patch) {
      assert.ok(
        op.op === 'add' || (op.op === 'replace' && op.path.startsWith('/metadata/annotations/')),
        JSON.stringify(op),
      );
      assert.doesNotMatch(op.path, /^\/spec\/(containers|initContainers|volumes)(\/\d+)?$/);
    }
  });

  test('every field the webhook does not know survives, and user env vars are never overwritten', () => {
    const before = rich();
    const out = mutated(before, annotations);
    assert.deepEqual(out.spec!.futureField, before.spec!.futureField);
    assert.deepEqual(out.spec!.ephemeralContainers, before.spec!.ephemeralContainers);
    assert.equal(out.spec!.initContainers![0].restartPolicy, 'Always');
    assert.deepEqual(out.spec!.initContainers![0].startupProbe, before.spec!.initContainers![0].startupProbe);
    assert.deepEqual(out.spec!.containers![0].startupProbe, before.spec!.containers![0].startupProbe);
    assert.deepEqual(out.spec!.containers![0].resizePolicy, before.spec!.containers![0].resizePolicy);
    assert.deepEqual(out.spec!.containers![0].env!.slice(0, 2), before.spec!.containers![0].env);
    assert.equal(envOf(out.spec!.containers![0]).AWS_ROLE_ARN, 'user-chose-this');
    assert.equal(out.metadata!.annotations!['example.com/a~b/c'], 'kept');
    // Native sidecars are treated like containers.
    assert.equal(envOf(out.spec!.initContainers![0]).AWS_ROLE_ARN, AWS_ARN);
  });

  test('idempotent: run on its own output, the patch is empty', () => {
    const once = mutated(rich(), annotations);
    const again = run(once, annotations);
    assert.deepEqual(again.allowed && again.patch, []);
    // The API server adds defaultMode to projected volumes; still recognised as ours.
    for (const v of once.spec!.volumes!) if (v.projected) v.projected.defaultMode = 420;
    assert.deepEqual((run(once, annotations) as { patch: unknown }).patch, []);
  });

  test('reinvocation: a container added after the first call is completed, others untouched', () => {
    const once = mutated(pod(), annotations);
    once.spec!.containers!.push({ name: 'sidecar', image: 'mesh' });
    const r = run(once, annotations);
    assert.ok(r.allowed);
    assert.ok(r.patch.length > 0);
    assert.ok(
      r.patch.every(
        (op) =>
          op.path.startsWith('/spec/containers/1/') ||
          op.path === '/metadata/annotations/workload-identity-webhook.io~1injected',
      ),
      JSON.stringify(r.patch),
    );
    const twice = apply(once, r.patch);
    assert.deepEqual(envOf(twice.spec!.containers![1]), envOf(twice.spec!.containers![0]));
  });

  test("a ServiceAccount changed by a later webhook: the old identity is removed, the user's values kept", () => {
    const azure = { 'azure.workload.identity/client-id': AZ_CLIENT, 'azure.workload.identity/tenant-id': AZ_TENANT };
    const first = pod({
      labels: { 'azure.workload.identity/use': 'true' },
      spec: {
        containers: [
          {
            name: 'app',
            env: [
              { name: 'AZURE_TENANT_ID', value: 'contoso.onmicrosoft.com' },
              { name: 'KEEP', value: '1' },
            ],
          },
        ],
      },
    });
    const once = mutated(first, azure);
    const raw = (p: typeof once) => p.metadata!.annotations!['workload-identity-webhook.io/injected'];
    const record = JSON.parse(raw(once));
    assert.deepEqual(
      record.env.map(([name]: [string]) => name),
      ['AZURE_CLIENT_ID', 'AZURE_FEDERATED_TOKEN_FILE', 'AZURE_AUTHORITY_HOST'],
    );
    assert.ok(!raw(once).includes(AZ_CLIENT), 'the record holds digests, never values');
    // Another webhook moves the Pod to a ServiceAccount with an AWS role and no Azure client.
    once.spec!.serviceAccountName = 'other';
    const r = mutatePod(providers(), {
      pod: once,
      namespace: 'team-a',
      serviceAccount: sa({ 'eks.amazonaws.com/role-arn': AWS_ARN }, 'other'),
    });
    assert.ok(r.allowed);
    const twice = apply(once, r.patch);
    // The Pod still opts into Azure, but the new ServiceAccount names no client: the old
    // AZURE_CLIENT_ID must not linger; the user's own AZURE_TENANT_ID stays.
    assert.deepEqual(envOf(twice.spec!.containers![0]), {
      AZURE_TENANT_ID: 'contoso.onmicrosoft.com',
      KEEP: '1',
      AZURE_FEDERATED_TOKEN_FILE: '/var/run/secrets/azure/tokens/azure-identity-token',
      AZURE_AUTHORITY_HOST: 'https://login.microsoftonline.com/',
      AWS_ROLE_ARN: AWS_ARN,
      AWS_WEB_IDENTITY_TOKEN_FILE: '/var/run/secrets/eks.amazonaws.com/serviceaccount/token',
    });
    assert.deepEqual(twice.spec!.volumes!.map((v) => v.name).sort(), ['aws-iam-token', 'azure-identity-token']);
    assert.deepEqual(
      (
        mutatePod(providers(), {
          pod: twice,
          namespace: 'team-a',
          serviceAccount: sa({ 'eks.amazonaws.com/role-arn': AWS_ARN }, 'other'),
        }) as { patch: unknown }
      ).patch,
      [],
    );
  });

  test('a ServiceAccount changed to one without identity: everything the webhook added is removed', () => {
    const once = mutated(pod(), annotations);
    once.spec!.serviceAccountName = 'plain';
    const r = mutatePod(providers(), { pod: once, namespace: 'team-a', serviceAccount: sa({}, 'plain') });
    assert.ok(r.allowed);
    const back = apply(once, r.patch);
    const expected = pod({ spec: { serviceAccountName: 'plain' } });
    expected.metadata!.annotations = {};
    expected.spec!.volumes = [];
    expected.spec!.containers![0].env = [];
    expected.spec!.containers![0].volumeMounts = [];
    assert.deepEqual(back, expected);
  });

  test("a user volume that merely shares the name is not taken for the webhook's own", () => {
    const p = pod({ spec: { volumes: [{ name: 'aws-iam-token', secret: { secretName: 'static-keys' } }] } });
    const d = denied(p, annotations);
    assert.equal(d.status, 409);
    assert.match(d.message, /already has a volume named "aws-iam-token"/);
  });

  test("a user mount at the webhook's path denies naming container, volume and path", () => {
    const p = pod({
      spec: {
        volumes: [{ name: 'mine', emptyDir: {} }],
        containers: [
          {
            name: 'app',
            volumeMounts: [{ name: 'mine', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount' }],
          },
        ],
      },
    });
    const d = denied(p, annotations);
    assert.match(
      d.message,
      /container "app" already mounts volume "mine" at \/var\/run\/secrets\/eks\.amazonaws\.com\/serviceaccount/,
    );
  });

  test('annotation keys with "/" and "~" are escaped in JSON Pointers', () => {
    const p = pod({ annotations: { 'a~b/c': 'x' } });
    const r = run(p, annotations);
    assert.ok(r.allowed);
    const op = r.patch.find((o) => o.path.startsWith('/metadata/annotations/cloud.google.com'));
    assert.equal(op?.path, '/metadata/annotations/cloud.google.com~1workload-identity-provider');
    assert.equal(apply(p, r.patch).metadata!.annotations!['a~b/c'], 'x');
  });

  test("a stale credential annotation is replaced: the key is the webhook's own", () => {
    const p = pod({ annotations: { 'cloud.google.com/external-credentials-json': '{}' } });
    const r = run(p, annotations);
    assert.ok(r.allowed);
    assert.ok(
      r.patch.some(
        (o) => o.op === 'replace' && o.path === '/metadata/annotations/cloud.google.com~1external-credentials-json',
      ),
    );
  });
});
