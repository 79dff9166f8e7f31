import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  requestToken,
  startControlPlane,
  verifyServiceAccountToken,
} from './harness/control-plane.ts';
import type { ControlPlane } from './harness/control-plane.ts';

let cp: ControlPlane;

before(async () => {
  cp = await startControlPlane({ name: 'control-plane-test' });
});

after(async () => {
  await cp?.stop();
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('the API server reports the pinned Kubernetes version', async () => {
  const res = await cp.request('GET', '/version');
  assert.equal(res.status, 200);
  assert.equal(JSON.parse(res.body).gitVersion, 'v1.34.4');
});

test('the kubeconfig gives admin access through @kubernetes/client-node', async () => {
  await createNamespace(cp, 'kubeconfig-check', { team: 'a' });
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const ns = await core.readNamespace({ name: 'kubeconfig-check' });
  assert.equal(ns.metadata?.labels?.team, 'a');
});

test('a requested ServiceAccount token verifies against the issuer discovery keys', async () => {
  await createNamespace(cp, 'apps');
  const sa = await createServiceAccount(cp, 'apps', 'billing', { 'example.com/role': 'billing' });
  assert.equal(sa.metadata?.annotations?.['example.com/role'], 'billing');

  const token = await requestToken(cp, 'apps', 'billing', 'sts.amazonaws.com', 3600);
  const payload = await verifyServiceAccountToken(cp, token, {
    audience: 'sts.amazonaws.com',
    namespace: 'apps',
    name: 'billing',
  });
  assert.equal(payload.iss, cp.issuer);
  assert.deepEqual(payload.aud, ['sts.amazonaws.com']);
  assert.equal(payload.sub, 'system:serviceaccount:apps:billing');
  assert.equal(payload.exp! - payload.iat!, 3600);
});

test('a token for another audience fails verification', async () => {
  await createNamespace(cp, 'other-audience');
  await createServiceAccount(cp, 'other-audience', 'worker');
  const token = await requestToken(cp, 'other-audience', 'worker', 'api://AzureADTokenExchange', 3600);
  await assert.rejects(
    verifyServiceAccountToken(cp, token, { audience: 'sts.amazonaws.com', namespace: 'other-audience', name: 'worker' }),
    { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'aud' },
  );
});

test('stop() ends both processes and removes the folder', async () => {
  // A second, private control plane, so the shared one stays up for the other tests.
  const own = await startControlPlane({ name: 'stop-test' });
  assert.ok(isRunning(own.pids.etcd) && isRunning(own.pids.kubeApiserver));
  await own.stop();
  assert.equal(isRunning(own.pids.kubeApiserver), false);
  assert.equal(isRunning(own.pids.etcd), false);
  assert.equal(existsSync(own.dir), false);
});
