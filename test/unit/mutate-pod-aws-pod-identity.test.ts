// EKS Pod Identity's container credentials as the core renders them, from the associations file:
// precedence over IRSA, the token, the label, and what a container that configures itself keeps.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/kube/types.ts';
import { apply, envOf, pod, providers, sa } from '../support/builders.ts';
import { ROLE_ARN as AWS_ARN } from '../support/identities.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { denied, mutated, run } from '../support/mutate-pod.ts';

describe('AWS EKS Pod Identity (container credentials)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-pod-identity-'));
  const file = join(dir, 'associations.json');
  writeFileSync(file, JSON.stringify({ identities: [{ namespace: 'team-a', serviceAccount: 'app' }] }));
  const flags = { 'aws-container-credentials-config': file };
  const ccEnv = {
    AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials',
    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE:
      '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token',
  };

  test('an associated ServiceAccount gets the agent URI, the token file, its volume and the label, with the peer defaults', () => {
    const out = mutated(pod(), {}, flags);
    assert.equal(out.metadata!.labels!['eks.amazonaws.com/pod-identity'], 'enabled');
    assert.deepEqual(out.spec!.volumes, [
      {
        name: 'eks-pod-identity-token',
        projected: {
          sources: [
            {
              serviceAccountToken: {
                audience: 'pods.eks.amazonaws.com',
                expirationSeconds: 86400,
                path: 'eks-pod-identity-token',
              },
            },
          ],
        },
      },
    ]);
    const c = out.spec!.containers![0];
    assert.deepEqual(c.volumeMounts, [
      {
        name: 'eks-pod-identity-token',
        mountPath: '/var/run/secrets/pods.eks.amazonaws.com/serviceaccount',
        readOnly: true,
      },
    ]);
    assert.deepEqual(envOf(c), ccEnv);
  });

  test('takes precedence over IRSA: an associated ServiceAccount with a role ARN gets no web identity', () => {
    const out = mutated(
      pod(),
      { 'eks.amazonaws.com/role-arn': AWS_ARN, 'eks.amazonaws.com/sts-regional-endpoints': 'true' },
      { ...flags, 'aws-default-region': 'eu-west-1' },
    );
    assert.deepEqual(envOf(out.spec!.containers![0]), {
      AWS_STS_REGIONAL_ENDPOINTS: 'regional',
      AWS_DEFAULT_REGION: 'eu-west-1',
      AWS_REGION: 'eu-west-1',
      ...ccEnv,
    });
    assert.deepEqual(
      out.spec!.volumes!.map((v) => v.name),
      ['eks-pod-identity-token'],
    );
  });

  test('applies before the ServiceAccount is known, and not to ServiceAccounts the file does not name', () => {
    assert.deepEqual(envOf(mutated(pod(), undefined, flags).spec!.containers![0]), ccEnv);
    const other = pod({ spec: { serviceAccountName: 'other' } });
    const r = mutatePod(providers(flags), { pod: other, namespace: 'team-a', serviceAccount: undefined });
    assert.ok(r.allowed);
    assert.deepEqual(r.patch, []);
    const elsewhere = mutatePod(providers(flags), { pod: pod(), namespace: 'team-b', serviceAccount: undefined });
    assert.ok(elsewhere.allowed);
    assert.deepEqual(elsewhere.patch, []);
  });

  test("the Pod's token expiration wins, skip-containers and the skip label apply, Windows gets a Windows path", () => {
    const out = mutated(
      pod({
        annotations: { 'eks.amazonaws.com/token-expiration': '3600', 'eks.amazonaws.com/skip-containers': 'side' },
        spec: {
          nodeSelector: { 'kubernetes.io/os': 'windows' },
          containers: [{ name: 'app' }, { name: 'side' }],
        },
      }),
      { 'eks.amazonaws.com/token-expiration': '7200' },
      flags,
    );
    assert.equal(out.spec!.volumes![0].projected!.sources![0].serviceAccountToken!.expirationSeconds, 3600);
    assert.equal(
      envOf(out.spec!.containers![0]).AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE,
      'C:\\var\\run\\secrets\\pods.eks.amazonaws.com\\serviceaccount\\eks-pod-identity-token',
    );
    assert.equal(out.spec!.containers![1].env, undefined);
    const skipped = run(pod({ labels: { 'eks.amazonaws.com/skip-pod-identity-webhook': '' } }), {}, flags);
    assert.ok(skipped.allowed);
    assert.deepEqual(skipped.patch, []);
  });

  test('a container that sets either container-credentials variable gets neither; one that configures itself fully gets no mount', () => {
    const out = mutated(
      pod({
        spec: {
          containers: [
            { name: 'half', env: [{ name: 'AWS_CONTAINER_CREDENTIALS_FULL_URI', value: 'http://127.0.0.1/creds' }] },
            {
              name: 'full',
              env: [
                { name: 'AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE', value: '/mine' },
                { name: 'AWS_REGION', value: 'eu-west-1' },
                { name: 'AWS_STS_REGIONAL_ENDPOINTS', value: 'legacy' },
              ],
            },
          ],
        },
      }),
      {},
      flags,
    );
    const [half, full] = out.spec!.containers!;
    assert.deepEqual(envOf(half), { AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://127.0.0.1/creds' });
    assert.equal(half.volumeMounts?.length, 1);
    assert.equal(full.volumeMounts, undefined);
    assert.equal(full.env!.length, 3);
  });

  test("a Pod's own volume under the token volume's name is refused, naming it", () => {
    const d = denied(
      pod({ spec: { volumes: [{ name: 'eks-pod-identity-token', hostPath: { path: '/token' } }] } }),
      {},
      flags,
    );
    assert.equal(d.reason, 'Conflict');
    assert.match(d.message, /volume named "eks-pod-identity-token"/);
  });

  test('a label the user set stays when a later ServiceAccount change removes the injection; ours goes', () => {
    const moved = (p: Pod) => {
      p.spec!.serviceAccountName = 'other';
      const r = mutatePod(providers(flags), { pod: p, namespace: 'team-a', serviceAccount: sa({}, 'other') });
      assert.ok(r.allowed);
      return apply(p, r.patch);
    };
    const ours = moved(mutated(pod({ labels: { app: 'x' } }), {}, flags));
    assert.deepEqual(ours.metadata!.labels, { app: 'x' });
    assert.deepEqual(ours.spec!.volumes, []);
    const users = moved(mutated(pod({ labels: { 'eks.amazonaws.com/pod-identity': 'enabled' } }), {}, flags));
    assert.deepEqual(users.metadata!.labels, { 'eks.amazonaws.com/pod-identity': 'enabled' });
  });
});
