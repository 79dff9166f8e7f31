// Several providers on one ServiceAccount, and the Pods the webhook leaves alone.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { pod } from '../support/builders.ts';
import {
  CLIENT as AZ_CLIENT,
  ROLE_ARN as AWS_ARN,
  TENANT as AZ_TENANT,
  WIF_PROVIDER as GCP_PROVIDER,
} from '../support/identities.ts';
import { denied, mutated, run } from '../support/mutate-pod.ts';

describe('several providers on one ServiceAccount', () => {
  const all = {
    'eks.amazonaws.com/role-arn': AWS_ARN,
    'azure.workload.identity/client-id': AZ_CLIENT,
    'azure.workload.identity/tenant-id': AZ_TENANT,
    'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
  };

  test('each gets its own token, audience, volume and path, with no collision', () => {
    const out = mutated(pod({ labels: { 'azure.workload.identity/use': 'true' } }), all);
    const volumes = out.spec!.volumes!;
    // The pfnet dialect without a Google service account: pfnet's direct mode, its own file volume.
    assert.deepEqual(
      volumes.map((v) => v.name),
      ['aws-iam-token', 'azure-identity-token', 'gcp-iam-token', 'external-credential-config'],
    );
    assert.deepEqual(
      volumes.slice(0, 3).map((v) => v.projected!.sources![0].serviceAccountToken!.audience),
      ['sts.amazonaws.com', 'api://AzureADTokenExchange', 'sts.googleapis.com'],
    );
    // Azure's token is mounted twice (its two layouts): five mount paths, all different.
    const paths = out.spec!.containers![0].volumeMounts!.map((m) => m.mountPath);
    assert.equal(new Set(paths).size, 5);
  });

  test('every invalid provider is reported in one denial', () => {
    const d = denied(
      pod(),
      {
        ...all,
        'eks.amazonaws.com/role-arn': 'nope',
        'cloud.google.com/workload-identity-provider': 'nope',
      },
      { strict: 'true' },
    );
    assert.match(d.message, /role-arn="nope".*; .*workload-identity-provider="nope"/);
  });

  test('the project skip label opts out of every provider', () => {
    const r = run(
      pod({ labels: { 'azure.workload.identity/use': 'true', 'workload-identity-webhook.io/skip': 'true' } }),
      all,
    );
    assert.deepEqual(r.allowed && r.patch, []);
  });

  test('a ServiceAccount with no identity leaves the Pod untouched', () => {
    const r = run(pod(), { 'example.com/unrelated': 'x' });
    assert.deepEqual(r.allowed && r.patch, []);
  });
});

describe('Pods the webhook leaves alone', () => {
  test('a mirror Pod (kubernetes.io/config.mirror) is admitted unchanged even when its ServiceAccount carries identities', () => {
    const p = pod({ annotations: { 'kubernetes.io/config.mirror': '3b1e3f0a' } });
    const result = run(p, {
      'eks.amazonaws.com/role-arn': AWS_ARN,
      'cloud.google.com/workload-identity-provider': GCP_PROVIDER,
    });
    assert.deepEqual(result.allowed && result.patch, []);
  });
});
