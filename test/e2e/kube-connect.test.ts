// How `serve` reaches the API server without client-node (src/kube/connect.ts, src/kube/api.ts):
// kubeconfig files with static credentials read directly, token files read again as the kubelet
// rotates them, a plugin handed to client-node, and clear errors for what cannot be used.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { ConfigError } from '../../src/errors.ts';
import { KubeApi, KubeApiError } from '../../src/kube/api.ts';
import { connectKube, inCluster, tokenFile } from '../../src/kube/connect.ts';
import {
  createNamespace,
  createServiceAccount,
  requestToken,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';

let cp: ControlPlane;
let dir: string;

before(async () => {
  cp = await startControlPlane({ name: 'kube-connect' });
  await createNamespace(cp, 'ns1');
  await createServiceAccount(cp, 'ns1', 'first');
  await createServiceAccount(cp, 'ns1', 'second');
  dir = mkdtempSync(join(tmpdir(), 'wiw-kube-connect-'));
});
after(async () => {
  await cp?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Who the API server takes the caller for (a SelfSubjectReview: every authenticated user may ask). */
async function whoAmI(api: KubeApi): Promise<string> {
  const review = await api.request<{ status: { userInfo: { username: string } } }>(
    'POST',
    '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
  );
  return review.status.userInfo.username;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(name: string, cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: cp.server, ...cluster } }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return file;
}

describe('a kubeconfig read without client-node', () => {
  test('embedded CA and client certificate', async () => {
    const file = kubeconfig(
      'embedded',
      { 'certificate-authority-data': b64(cp.caPem) },
      { 'client-certificate-data': b64(cp.clientCertPem), 'client-key-data': b64(cp.clientKeyPem) },
    );
    assert.equal(await whoAmI(await connectKube(file)), 'admin');
  });

  test("files named relative to the kubeconfig's folder", async () => {
    writeFileSync(join(dir, 'ca.crt'), cp.caPem);
    writeFileSync(join(dir, 'admin.crt'), cp.clientCertPem);
    writeFileSync(join(dir, 'admin.key'), cp.clientKeyPem);
    const file = kubeconfig(
      'relative',
      { 'certificate-authority': 'ca.crt' },
      { 'client-certificate': 'admin.crt', 'client-key': join(dir, 'admin.key') },
    );
    assert.equal(await whoAmI(await connectKube(file)), 'admin');
  });

  test('a bearer token, and a token file read again once a minute has passed', async () => {
    const [first, second] = await Promise.all(
      ['first', 'second'].map((sa) => requestToken(cp, 'ns1', sa, cp.issuer, 3600)),
    );
    const inline = kubeconfig('token', { 'certificate-authority-data': b64(cp.caPem) }, { token: first });
    assert.equal(await whoAmI(await connectKube(inline)), 'system:serviceaccount:ns1:first');

    const path = join(dir, 'token');
    writeFileSync(path, `${first}\n`);
    const fromFile = kubeconfig('token-file', { 'certificate-authority-data': b64(cp.caPem) }, { tokenFile: 'token' });
    assert.equal(await whoAmI(await connectKube(fromFile)), 'system:serviceaccount:ns1:first');
    // The kubelet rotates a projected token by replacing the file.
    let now = 0;
    const read = tokenFile(path, () => now);
    assert.equal(read(), first);
    writeFileSync(path, second);
    now = 59_999;
    assert.equal(read(), first, 'not read again within the minute');
    now = 60_000;
    assert.equal(read(), second);
  });

  test('a user that needs a plugin (exec) is handed to client-node, which runs it', async () => {
    const token = await requestToken(cp, 'ns1', 'second', cp.issuer, 3600);
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token },
    });
    const file = kubeconfig(
      'exec',
      { 'certificate-authority-data': b64(cp.caPem) },
      {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: '/bin/sh',
          args: ['-c', `printf '%s' '${credential}'`],
          interactiveMode: 'Never',
        },
      },
    );
    assert.equal(await whoAmI(await connectKube(file)), 'system:serviceaccount:ns1:second');
  });

  test('--context picks a context other than the current one, read directly or by client-node; an unknown one is named', async () => {
    const first = await requestToken(cp, 'ns1', 'first', cp.issuer, 3600);
    const second = await requestToken(cp, 'ns1', 'second', cp.issuer, 3600);
    const file = join(dir, 'two-contexts');
    const config = (secondUser: Record<string, unknown>) => ({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: cp.server, 'certificate-authority-data': b64(cp.caPem) } }],
      users: [
        { name: 'first', user: { token: first } },
        { name: 'second', user: secondUser },
      ],
      contexts: [
        { name: 'one', context: { cluster: 'c', user: 'first' } },
        { name: 'two', context: { cluster: 'c', user: 'second' } },
      ],
      'current-context': 'one',
    });
    writeFileSync(file, stringify(config({ token: second })));
    assert.equal(await whoAmI(await connectKube(file)), 'system:serviceaccount:ns1:first');
    assert.equal(await whoAmI(await connectKube(file, 'two')), 'system:serviceaccount:ns1:second');
    const exec = {
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: '/bin/sh',
        args: [
          '-c',
          `printf '%s' '${JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: second } })}'`,
        ],
        interactiveMode: 'Never',
      },
    };
    writeFileSync(file, stringify(config(exec)));
    assert.equal(
      await whoAmI(await connectKube(file, 'two')),
      'system:serviceaccount:ns1:second',
      'through client-node',
    );
    await assert.rejects(
      connectKube(file, 'three'),
      (err: unknown) =>
        err instanceof ConfigError &&
        /--context "three": the kubeconfig has no such context \(it has "one", "two"\)/.test(err.message),
    );
  });

  test("in a Pod: the service's address from the environment, the service account's token and ca.crt", async () => {
    const mount = join(dir, 'serviceaccount');
    mkdirSync(mount);
    writeFileSync(join(mount, 'token'), await requestToken(cp, 'ns1', 'first', cp.issuer, 3600));
    writeFileSync(join(mount, 'ca.crt'), cp.caPem);
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    const { hostname, port } = new URL(cp.server);
    process.env.KUBERNETES_SERVICE_HOST = hostname;
    process.env.KUBERNETES_SERVICE_PORT = port;
    try {
      const credentials = inCluster(mount);
      assert.equal(credentials.server, cp.server);
      assert.equal(await whoAmI(new KubeApi(credentials)), 'system:serviceaccount:ns1:first');
    } finally {
      for (const [k, v] of [
        ['KUBERNETES_SERVICE_HOST', saved.host],
        ['KUBERNETES_SERVICE_PORT', saved.port],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });

  test('$KUBECONFIG when no --kubeconfig is given and not in a cluster', async () => {
    const file = kubeconfig(
      'env',
      { 'certificate-authority-data': b64(cp.caPem) },
      { 'client-certificate-data': b64(cp.clientCertPem), 'client-key-data': b64(cp.clientKeyPem) },
    );
    const saved = { KUBECONFIG: process.env.KUBECONFIG, HOST: process.env.KUBERNETES_SERVICE_HOST };
    process.env.KUBECONFIG = file;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      assert.equal(await whoAmI(await connectKube(undefined)), 'admin');
    } finally {
      for (const [k, v] of [
        ['KUBECONFIG', saved.KUBECONFIG],
        ['KUBERNETES_SERVICE_HOST', saved.HOST],
      ] as const)
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
  });

  test('a missing file or a context without a cluster is a configuration error naming it', async () => {
    await assert.rejects(
      connectKube(join(dir, 'absent')),
      (err: Error) =>
        err instanceof ConfigError &&
        err.message.startsWith(`cannot load the kubeconfig from --kubeconfig=${dir}/absent`),
    );
    const file = join(dir, 'no-cluster');
    writeFileSync(file, stringify({ apiVersion: 'v1', kind: 'Config', 'current-context': 'nowhere' }));
    await assert.rejects(
      connectKube(file),
      (err: Error) => err instanceof ConfigError && /no Kubernetes cluster configured/.test(err.message),
    );
  });
});

describe('errors of the API', () => {
  test('a refusal carries the status and the Status message, not the body', async () => {
    const api = await connectKube(cp.kubeconfigPath);
    await assert.rejects(
      api.request('GET', '/api/v1/namespaces/ns1/secrets/absent'),
      (err: Error) =>
        err instanceof KubeApiError &&
        err.code === 404 &&
        err.message === 'HTTP 404 NotFound: secrets "absent" not found',
    );
  });
});
