// `doctor` against real kube-apiservers: one set up as the clouds need it, and one per way of
// getting it wrong (trailing slash, http issuer, discovery not anonymous, a rotated signing key
// not yet published, a self-hosted public copy lacking the new key). Each failure is named by its
// check id and its message; the fix is printed with it. Also `issuer publish`, from the API
// server and from the key files, and a self-hosted issuer it serves.
import { runCliAsync } from '../harness/cli-process.ts';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { createCa, createServingCert } from '../harness/certs.ts';
import {
  createNamespace,
  createServiceAccount,
  freePorts,
  startControlPlane,
  type ControlPlane,
  type ControlPlaneOptions,
} from '../harness/control-plane.ts';
import { OTHER_ACCOUNT_ROLE_ARN, ROLE_ARN as ROLE } from '../support/identities.ts';

interface Check {
  id: string;
  verdict: 'pass' | 'warn' | 'fail' | 'unknown';
  message: string;
  fix?: string;
  subject?: string;
}
interface Report {
  issuer: string | null;
  result: string;
  exitCode: number;
  checks: Check[];
}

/** The CLI (the build, as every e2e file runs it: test/harness/cli-process.ts), its exit code 1 when killed. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await runCliAsync(args);
  return { code: code ?? 1, stdout, stderr };
}

async function doctor(cp: ControlPlane, ...extra: string[]): Promise<{ code: number; report: Report }> {
  const ca = extra.includes('--issuer-ca') ? [] : ['--issuer-ca', join(cp.dir, 'ca.crt')];
  const { code, stdout, stderr } = await cli([
    'doctor',
    '--kubeconfig',
    cp.kubeconfigPath,
    ...ca,
    '-o',
    'json',
    ...extra,
  ]);
  assert.equal(stderr, '');
  const report = JSON.parse(stdout) as Report;
  assert.equal(report.exitCode, code);
  return { code, report };
}

const failed = (r: Report) =>
  r.checks
    .filter((c) => c.verdict === 'fail')
    .map((c) => c.id)
    .sort();
const check = (r: Report, id: string) => {
  const found = r.checks.find((c) => c.id === id);
  assert.ok(found, `no check ${id} in ${JSON.stringify(r.checks, null, 2)}`);
  return found;
};

const planes: ControlPlane[] = [];
after(async () => {
  await Promise.all(planes.map((cp) => cp.stop()));
});

/** A control plane with one ServiceAccount carrying an AWS identity; `anonymous` binds discovery for system:unauthenticated. */
async function cluster(
  name: string,
  options: ControlPlaneOptions & { anonymous?: boolean } = {},
): Promise<ControlPlane> {
  const cp = await startControlPlane({ name, ...options });
  planes.push(cp);
  await createNamespace(cp, 'apps');
  await createServiceAccount(cp, 'apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE });
  if (options.anonymous !== false) {
    await cp
      .kubeConfig()
      .makeApiClient(RbacAuthorizationV1Api)
      .createClusterRoleBinding({
        body: {
          metadata: { name: 'service-account-issuer-discovery-unauthenticated' },
          roleRef: {
            apiGroup: 'rbac.authorization.k8s.io',
            kind: 'ClusterRole',
            name: 'system:service-account-issuer-discovery',
          },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:unauthenticated' }],
        },
      });
  }
  return cp;
}

describe('doctor on a cluster set up as the clouds need it', () => {
  test("every check passes: exit 0, the identity's token verifies against the public JWKS", async () => {
    const cp = await cluster('doctor-good');
    // Role chaining: the token goes to [default]'s role only; writer is assumed with its credentials.
    await createServiceAccount(cp, 'apps', 'chained', {
      'eks.amazonaws.com/role-arn': ROLE,
      'eks.amazonaws.com/role-arns': `writer=${OTHER_ACCOUNT_ROLE_ARN}`,
      'eks.amazonaws.com/source-profiles': 'writer=default',
    });
    const { code, report } = await doctor(cp);
    assert.equal(code, 0, JSON.stringify(report.checks, null, 2));
    assert.equal(report.issuer, cp.issuer);
    assert.deepEqual(
      report.checks.filter((c) => c.verdict !== 'pass'),
      [],
    );
    for (const id of [
      'discovery',
      'issuer-https',
      'issuer-form',
      'token-issuer',
      'jwks-uri',
      'anonymous-discovery',
      'public-discovery',
      'public-jwks',
      'algorithm',
      'identity',
    ])
      check(report, id);
    // One token check per token presented: none for the chained role, which its source role assumes.
    assert.deepEqual(
      report.checks.filter((c) => c.id === 'identity').map((c) => c.subject),
      ['ServiceAccount apps/chained', 'ServiceAccount apps/reader'],
    );
    const identity = report.checks.find((c) => c.id === 'identity' && c.subject === 'ServiceAccount apps/reader')!;
    assert.match(
      identity.message,
      /aws token \(aud sts\.amazonaws\.com, expires in 86400 s\) verifies against https:\/\/127\.0\.0\.1:\d+\/openid\/v1\/jwks/,
    );

    // The text form says the same for people.
    const text = await cli(['doctor', '--kubeconfig', cp.kubeconfigPath, '--issuer-ca', join(cp.dir, 'ca.crt')]);
    assert.equal(text.code, 0);
    assert.match(text.stdout, new RegExp(`^issuer: ${cp.issuer}\n`));
    assert.match(text.stdout, /all \d+ checks passed\n$/);

    // issuer publish from the API server writes the keys it serves.
    const dir = await mkdtemp(join(tmpdir(), 'wiw-publish-'));
    try {
      const fromApi = await cli([
        'issuer',
        'publish',
        '--kubeconfig',
        cp.kubeconfigPath,
        '--dir',
        join(dir, 'api'),
        '--issuer',
        'https://oidc.example.com/cluster-a',
      ]);
      assert.equal(fromApi.code, 0, fromApi.stderr);
      assert.match(
        fromApi.stdout,
        /--service-account-issuer=https:\/\/oidc\.example\.com\/cluster-a\n {2}--service-account-jwks-uri=https:\/\/oidc\.example\.com\/cluster-a\/openid\/v1\/jwks\n$/,
      );
      const fromFiles = await cli([
        'issuer',
        'publish',
        '--key-file',
        cp.serviceAccountKeyFiles[0],
        '--dir',
        join(dir, 'files'),
        '--issuer',
        'https://oidc.example.com/cluster-a',
      ]);
      assert.equal(fromFiles.code, 0, fromFiles.stderr);
      const served = JSON.parse((await cp.request('GET', '/openid/v1/jwks')).body);
      for (const sub of ['api', 'files']) {
        assert.deepEqual(
          JSON.parse(await readFile(join(dir, sub, 'openid/v1/jwks'), 'utf8')),
          served,
          `${sub}: the JWKS the API server serves, key ids included`,
        );
        assert.deepEqual(JSON.parse(await readFile(join(dir, sub, '.well-known/openid-configuration'), 'utf8')), {
          issuer: 'https://oidc.example.com/cluster-a',
          jwks_uri: 'https://oidc.example.com/cluster-a/openid/v1/jwks',
          response_types_supported: ['id_token'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
        });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('doctor names the failure on broken clusters', () => {
  test('discovery not anonymous: the ClusterRoleBinding is missing', async () => {
    const cp = await cluster('doctor-private', { anonymous: false });
    const { code, report } = await doctor(cp);
    assert.equal(code, 1);
    assert.deepEqual(failed(report), ['anonymous-discovery', 'public-discovery']);
    assert.match(check(report, 'anonymous-discovery').message, /refuses discovery without credentials \(HTTP 403/);
    assert.match(
      check(report, 'anonymous-discovery').fix!,
      /kubectl create clusterrolebinding \S+ --clusterrole=system:service-account-issuer-discovery --group=system:unauthenticated/,
    );
    assert.match(check(report, 'public-discovery').message, /discovery is not readable without credentials/);
    // The token itself is fine: it verifies against the API server's keys.
    assert.equal(check(report, 'identity').verdict, 'pass');
  });

  test('issuer with a trailing slash', async () => {
    const cp = await cluster('doctor-slash', { issuer: (server) => `${server}/` });
    const { code, report } = await doctor(cp);
    assert.equal(code, 1);
    assert.deepEqual(failed(report), ['issuer-form']);
    const form = check(report, 'issuer-form');
    assert.match(form.message, /ends with "\/".*No OpenIDConnect provider found/);
    assert.equal(form.fix!.split(' ')[0], `--service-account-issuer=${cp.issuer.slice(0, -1)}`);
  });

  test('http issuer: no discovery is served, and the clouds would not fetch it', async () => {
    const cp = await cluster('doctor-http', { issuer: (server) => server.replace('https:', 'http:') });
    const { code, report } = await doctor(cp);
    assert.equal(code, 1);
    assert.equal(report.issuer, cp.issuer);
    assert.deepEqual(failed(report), ['discovery', 'identity', 'issuer-https']);
    assert.match(check(report, 'issuer-https').message, /is not an https URL/);
    assert.equal(check(report, 'issuer-https').fix, `--service-account-issuer=${cp.issuer.replace('http:', 'https:')}`);
    assert.match(check(report, 'discovery').message, /serves no discovery document .*HTTP 404/);
  });

  test('a rotated signing key not yet published: the API server signs with a key its JWKS lacks', async () => {
    const cp = await cluster('doctor-rotated', { rotatedSigningKey: { published: false } });
    const { code, report } = await doctor(cp);
    assert.equal(code, 1);
    assert.deepEqual(
      failed(report),
      ['identity', 'token-signature'].filter((id) => report.checks.some((c) => c.id === id)),
    );
    const identity = check(report, 'identity');
    assert.equal(identity.verdict, 'fail');
    assert.match(
      identity.message,
      /is signed with key kid [\w-]{43}, which the published JWKS \(https:\/\/127\.0\.0\.1:\d+\/openid\/v1\/jwks\) lacks: a rotated signing key not yet published/,
    );
    assert.match(identity.fix!, /--service-account-key-file/);
  });

  test('the API server cannot be reached: exit 3, could not check', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'wiw-doctor-'));
    try {
      const [port] = await freePorts(1);
      const kubeconfig = join(dir, 'kubeconfig');
      await writeFile(
        kubeconfig,
        `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
      );
      const { code, stdout } = await cli(['doctor', '--kubeconfig', kubeconfig, '-o', 'json']);
      assert.equal(code, 3);
      const report = JSON.parse(stdout) as Report;
      assert.equal(report.result, 'incomplete');
      assert.deepEqual(
        report.checks.map((c) => [c.id, c.verdict]),
        [['api-server', 'unknown']],
      );
      assert.match(report.checks[0].message, /ECONNREFUSED/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a self-hosted issuer (issuer publish, served statically)', () => {
  /** An https static file server for `dir` on a free port, its CA written to `dir/../ca.pem`. */
  async function staticHost(root: string): Promise<{ url: string; caFile: string; server: Server }> {
    const ca = await createCa('issuer-host-ca');
    const serving = await createServingCert(ca, 'issuer-host', { ips: ['127.0.0.1'] });
    const caFile = join(root, 'ca.pem');
    await writeFile(caFile, ca.cert);
    const site = join(root, 'site');
    const server = createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
      const path = normalize(join(site, decodeURIComponent(new URL(req.url ?? '/', 'https://x').pathname)));
      if (!path.startsWith(site)) return void res.writeHead(404).end();
      readFile(path).then(
        (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(body),
        () => res.writeHead(404).end(),
      );
    });
    const [port] = await freePorts(1);
    await new Promise<void>((done) => server.listen(port, '127.0.0.1', done));
    return { url: `https://127.0.0.1:${port}`, caFile, server };
  }

  test('the public copy lacks the rotated key: named by key id; republishing both keys fixes it', async () => {
    const root = await mkdtemp(join(tmpdir(), 'wiw-issuer-host-'));
    const host = await staticHost(root);
    try {
      const cp = await cluster('doctor-hosted', {
        issuer: () => host.url,
        jwksUri: `${host.url}/openid/v1/jwks`,
        rotatedSigningKey: { published: true },
        anonymous: false,
      });
      const publish = (...keyFiles: string[]) =>
        cli([
          'issuer',
          'publish',
          '--dir',
          join(root, 'site'),
          '--issuer',
          host.url,
          ...keyFiles.flatMap((f) => ['--key-file', f]),
        ]);
      const run = () => doctor(cp, '--issuer-ca', host.caFile);

      // Published before the rotation: only the original key.
      assert.equal((await publish(cp.serviceAccountKeyFiles[0])).code, 0);
      const stale = await run();
      assert.equal(stale.code, 1);
      assert.deepEqual(failed(stale.report), ['identity', 'public-jwks']);
      assert.match(
        check(stale.report, 'public-jwks').message,
        /lacks key\(s\) the API server verifies with: kid [\w-]{43}; tokens they sign are refused/,
      );
      assert.match(check(stale.report, 'identity').message, /a rotated signing key not yet published/);
      // Discovery is served by the host, so the API server need not serve it anonymously.
      assert.equal(check(stale.report, 'anonymous-discovery').verdict, 'pass');

      assert.equal((await publish(...cp.serviceAccountKeyFiles)).code, 0);
      const fixed = await run();
      assert.equal(fixed.code, 0, JSON.stringify(fixed.report.checks, null, 2));
      assert.match(check(fixed.report, 'public-jwks').message, /holds the API server's 2 key\(s\)/);
    } finally {
      host.server.closeAllConnections();
      await new Promise((done) => host.server.close(done));
      await rm(root, { recursive: true, force: true });
    }
  });
});
