import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  requestToken,
  startControlPlane,
  verifyServiceAccountToken,
} from '../harness/control-plane.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import { chosenKubeVersion, type KubeVersion } from '../harness/binaries.ts';

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

/** The version scripts/provide-binaries.sh pins for each choice of WIW_KUBE_VERSION. */
function pinned(version: KubeVersion): string {
  const name = { oldest: 'K8S_OLDEST_VERSION', tested: 'K8S_VERSION', newest: 'K8S_NEWEST_VERSION' }[version];
  const script = readFileSync(new URL('../../scripts/provide-binaries.sh', import.meta.url), 'utf8');
  return new RegExp(`^${name}=\\$\\{${name}:-(v[\\d.]+)\\}$`, 'm').exec(script)![1];
}

test('the API server reports the version WIW_KUBE_VERSION chooses (tested when unset), as the script pins it', async () => {
  const res = await cp.request('GET', '/version');
  assert.equal(res.status, 200);
  const expected = pinned(chosenKubeVersion());
  assert.equal(JSON.parse(res.body).gitVersion, expected);
  assert.equal(cp.kubeVersion, expected);
  assert.equal(pinned('tested'), 'v1.34.4');
});

test('WIW_KUBE_VERSION other than oldest, tested or newest is refused, naming the variable and the choices', () => {
  assert.equal(chosenKubeVersion({}), 'tested');
  assert.equal(chosenKubeVersion({ WIW_KUBE_VERSION: 'oldest' }), 'oldest');
  assert.throws(
    () => chosenKubeVersion({ WIW_KUBE_VERSION: '1.29' }),
    /^Error: WIW_KUBE_VERSION="1\.29" is not one of oldest, tested, newest$/,
  );
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
    verifyServiceAccountToken(cp, token, {
      audience: 'sts.amazonaws.com',
      namespace: 'other-audience',
      name: 'worker',
    }),
    { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'aud' },
  );
});

test("a failed start reports the end of the failing process's log and leaves nothing behind", async (t) => {
  const bin = await mkdtemp(join(tmpdir(), 'fake-etcd-'));
  t.after(() => rm(bin, { recursive: true, force: true }));
  const fakeEtcd = join(bin, 'etcd');
  await writeFile(
    fakeEtcd,
    '#!/bin/sh\nfor i in $(seq 1 60); do echo "line $i"; done\necho "fatal: no disk" >&2\nexit 3\n',
    {
      mode: 0o755,
    },
  );
  const saved = process.env.TEST_ASSET_ETCD;
  process.env.TEST_ASSET_ETCD = fakeEtcd;
  t.after(() => {
    if (saved === undefined) delete process.env.TEST_ASSET_ETCD;
    else process.env.TEST_ASSET_ETCD = saved;
  });

  const name = `startup-failure-${process.pid}`;
  const err: Error = await startControlPlane({ name }).then(
    () => assert.fail('started with a failing etcd'),
    (e: Error) => e,
  );
  assert.match(err.message, /^etcd exited \(3\)/);
  assert.match(err.message, /line 22\n[\s\S]*line 60\nfatal: no disk$/);
  assert.doesNotMatch(err.message, /line 21\n/);
  assert.deepEqual(
    (await readdir(tmpdir())).filter((f) => f.startsWith(`wiw-${name}-`)),
    [],
  );
});

// Last, as it stops the control plane the other tests share (after() then finds it stopped).
test('stop() ends kube-apiserver and etcd and removes the folder', async () => {
  assert.ok(isRunning(cp.pids.etcd) && isRunning(cp.pids.kubeApiserver));
  assert.ok(existsSync(cp.dir));
  await cp.stop();
  assert.equal(isRunning(cp.pids.kubeApiserver), false);
  assert.equal(isRunning(cp.pids.etcd), false);
  assert.equal(existsSync(cp.dir), false);
});
