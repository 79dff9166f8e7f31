// The token requestor's privileges, proved with its own credentials on a real kube-apiserver:
// the chart's requestor objects (ServiceAccount, ClusterRole, per-namespace RoleBindings, Lease
// Role, ValidatingAdmissionPolicy and its binding) are created exactly as rendered, then every
// attack of issue 10 finding 3 is tried with a token of its ServiceAccount and must fail with a
// clear message, while the requestor itself, run with the Deployment's environment, still works.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  requestToken,
  startControlPlane,
  verifyServiceAccountToken,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { containerEnv, find, renderChart, resourcePath, type Manifest } from '../support/chart.ts';
import { serviceAccountKubeconfig, startLocalWebhook, type LocalWebhook } from '../support/chart-webhook.ts';
import { labelledSecret, textData } from '../support/secrets.ts';
import { until } from '../harness/until.ts';
import { httpsRequest } from '../support/https-client.ts';

const NS = 'wiw-system';
const NAME = 'wiw-workload-identity-webhook-token-requestor';
const GRANT = 'workload-identity-webhook.io/allowed-referrer-namespaces';
// apps and platform are served; sandbox is served but the webhook's selector leaves it out;
// outside is covered by the webhook but not served.
const SERVED = ['apps', 'platform', 'sandbox'];
const VALUES = {
  tokenRequestor: { enabled: true, namespaces: SERVED, config: { tokenExpiration: 3600 } },
  webhook: { namespaceSelector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['sandbox'] }] } },
};

let cp: ControlPlane;
let core: CoreV1Api;
let manifests: Manifest[];
/** A token of the requestor's ServiceAccount: what an attacker who took over its Pod holds. */
let stolen: string;

interface Answer {
  status: number;
  message: string;
  body: any;
}
async function asRequestor(
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
  token = stolen,
): Promise<Answer> {
  const res = await httpsRequest(`${cp.server}${path}`, {
    method,
    ca: cp.caPem,
    headers: { authorization: `Bearer ${token}`, 'content-type': contentType, accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = res.body ? JSON.parse(res.body) : {};
  return { status: res.status, message: parsed.message ?? '', body: parsed };
}
const tokenRequest = (namespace: string, name: string, spec: Record<string, unknown>, token = stolen) =>
  asRequestor(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec },
    'application/json',
    token,
  );
const mergePatch = (namespace: string, name: string, patch: unknown) =>
  asRequestor('PATCH', `/api/v1/namespaces/${namespace}/secrets/${name}`, patch, 'application/merge-patch+json');
const b64 = (s: string) => Buffer.from(s).toString('base64');

before(async () => {
  cp = await startControlPlane({ name: 'requestor-privileges' });
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  await createNamespace(cp, NS);
  for (const ns of ['apps', 'platform', 'outside']) await createNamespace(cp, ns);
  await createNamespace(cp, 'sandbox', { tier: 'sandbox' });
  ({ manifests } = await renderChart(VALUES, { release: 'wiw', namespace: NS, kubeVersion: cp.kubeVersion }));
  const kinds = [
    'ServiceAccount',
    'ClusterRole',
    'RoleBinding',
    'Role',
    'Lease',
    'ValidatingAdmissionPolicy',
    'ValidatingAdmissionPolicyBinding',
  ];
  const objects = manifests.filter(
    (m) => kinds.includes(m.kind) && m.metadata.labels?.['app.kubernetes.io/component'] === 'token-requestor',
  );
  assert.deepEqual([...new Set(objects.map((m) => m.kind))].sort(), [...kinds].sort());
  for (const m of objects) {
    const res = await cp.request('POST', await resourcePath(cp, m, NS), m);
    assert.equal(res.status, 201, `${m.kind} ${m.metadata.name}: ${res.body}`);
  }
  // A ServiceAccount bound to cluster-admin in kube-system, and one in a served namespace (a
  // tenant's own admin): the escalation targets.
  for (const [ns, sa] of [
    ['kube-system', 'root'],
    ['apps', 'tenant-admin'],
  ]) {
    await createServiceAccount(cp, ns, sa);
    const res = await cp.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: `${ns}-${sa}-admin` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
    });
    assert.equal(res.status, 201, res.body);
  }
  await core.createNamespacedSecret({
    namespace: 'kube-system',
    body: { metadata: { name: 'bootstrap' }, data: { secret: b64('keep-out') } },
  });
  await core.createNamespacedSecret({
    namespace: 'apps',
    body: { metadata: { name: 'database' }, data: { password: b64('keep-out') } },
  });
  for (const ns of ['apps', 'sandbox', 'outside']) await createServiceAccount(cp, ns, 'app');
  await createServiceAccount(cp, 'platform', 'shared', { [GRANT]: 'apps' });
  stolen = await requestToken(cp, NS, NAME, cp.issuer, 3600);
  // The policy is enforced once the API server has compiled it: wait for its first denial.
  await until(
    'the admission policy to be enforced',
    async () => {
      const res = await tokenRequest('apps', 'app', { audiences: [cp.issuer], expirationSeconds: 600 });
      return res.status === 403 && /ValidatingAdmissionPolicy/.test(res.message) ? true : undefined;
    },
    30_000,
  );
});

after(async () => {
  await cp?.stop();
});

describe('a stolen token-requestor credential', () => {
  test('cannot list Secrets cluster-wide or in any namespace it does not serve', async () => {
    const all = await asRequestor('GET', '/api/v1/secrets');
    assert.equal(all.status, 403);
    assert.match(all.message, /cannot list resource "secrets" in API group "" at the cluster scope/);
    for (const ns of ['kube-system', NS, 'outside']) {
      const res = await asRequestor('GET', `/api/v1/namespaces/${ns}/secrets`);
      assert.equal(res.status, 403, ns);
      assert.match(res.message, new RegExp(`cannot list resource "secrets" in API group "" in the namespace "${ns}"`));
    }
    // Where it serves, it lists (RBAC cannot narrow reads by label: the namespaces are the bound).
    assert.equal(
      (await asRequestor('GET', '/api/v1/namespaces/apps/secrets?labelSelector=workload-identity-webhook.io/provider'))
        .status,
      200,
    );
  });

  test('cannot patch an unlabelled Secret: in kube-system (RBAC) nor in a namespace it serves (policy)', async () => {
    const system = await mergePatch('kube-system', 'bootstrap', { data: { token: b64('x') } });
    assert.equal(system.status, 403);
    assert.match(system.message, /cannot patch resource "secrets" in API group "" in the namespace "kube-system"/);
    const served = await mergePatch('apps', 'database', { data: { token: b64('x') } });
    assert.equal(served.status, 403);
    assert.match(
      served.message,
      /denied request: the token requestor may write only Secrets labelled workload-identity-webhook\.io\/provider: aws\|azure\|gcp; apps\/database is not$/,
    );
    // Labelling it in the same write does not help: the stored object is judged.
    const relabel = await mergePatch('apps', 'database', {
      metadata: { labels: { 'workload-identity-webhook.io/provider': 'aws' } },
    });
    assert.equal(relabel.status, 403);
    assert.match(relabel.message, /may write only Secrets labelled/);
    assert.deepEqual(textData(await core.readNamespacedSecret({ namespace: 'apps', name: 'database' })), {
      password: 'keep-out',
    });
  });

  test("may write a labelled Secret's token, and nothing else of it", async () => {
    await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('aws', { name: 'creds', namespace: 'apps' }) as never,
    });
    const ok = await mergePatch('apps', 'creds', { data: { token: b64('a.b.c') } });
    assert.equal(ok.status, 200, ok.message);
    const config = await mergePatch('apps', 'creds', {
      data: { config: b64('{"roleARN":"arn:aws:iam::999999999999:role/admin"}') },
    });
    assert.equal(config.status, 403);
    assert.match(config.message, /may write only the token key of a Secret; it changed config$/);
    const extra = await mergePatch('apps', 'creds', { data: { token: b64('d.e.f'), stolen: b64('x') } });
    assert.match(extra.message, /it changed stolen$/);
    const unlabel = await mergePatch('apps', 'creds', {
      metadata: { labels: { 'workload-identity-webhook.io/provider': null } },
    });
    assert.equal(unlabel.status, 403);
    assert.match(unlabel.message, /may not change a Secret's labels or annotations/);
    const annotate = await mergePatch('apps', 'creds', {
      metadata: { annotations: { 'workload-identity-webhook.io/service-account': 'tenant-admin' } },
    });
    assert.match(annotate.message, /may not change a Secret's labels or annotations/);
    const owned = await mergePatch('apps', 'creds', { metadata: { finalizers: ['example.com/keep'] } });
    assert.match(owned.message, /may not change a Secret's type, immutability, finalizers or owners/);
    const stored = textData(await core.readNamespacedSecret({ namespace: 'apps', name: 'creds' }));
    assert.equal(stored.token, 'a.b.c');
    assert.equal(stored.stolen, undefined);
    assert.match(stored.config, /s3-reader/);
    // It may not delete Secrets either (no RBAC, and the policy would refuse).
    assert.equal((await asRequestor('DELETE', '/api/v1/namespaces/apps/secrets/creds')).status, 403);
  });

  test('cannot mint a token for a kube-system ServiceAccount bound to cluster-admin', async () => {
    const res = await tokenRequest('kube-system', 'root', { audiences: ['sts.amazonaws.com'], expirationSeconds: 600 });
    assert.equal(res.status, 403);
    assert.match(
      res.message,
      /cannot create resource "serviceaccounts\/token" in API group "" in the namespace "kube-system"/,
    );
  });

  test('cannot mint an API-server token even for a cluster-admin ServiceAccount where it serves, so cannot create a ClusterRoleBinding', async () => {
    const forApi = await tokenRequest('apps', 'tenant-admin', { audiences: [cp.issuer], expirationSeconds: 600 });
    assert.equal(forApi.status, 403);
    assert.match(
      forApi.message,
      /denied request: the token requestor may request tokens only for one cloud audience \(sts\.amazonaws\.com, api:\/\/AzureADTokenExchange, or a GCP workload identity provider\), not https:\/\/127\.0\.0\.1:\d+$/,
    );
    // No audience at all would default to the API server's: refused too.
    const none = await tokenRequest('apps', 'tenant-admin', { expirationSeconds: 600 });
    assert.equal(none.status, 403);
    assert.match(none.message, /only for one cloud audience/);
    const two = await tokenRequest('apps', 'tenant-admin', {
      audiences: ['sts.amazonaws.com', cp.issuer],
      expirationSeconds: 600,
    });
    assert.match(two.message, /only for one cloud audience .*, not sts\.amazonaws\.com, https:/);
    // A cloud-audience token it may mint does not authenticate to the API server.
    const cloud = await tokenRequest('apps', 'tenant-admin', {
      audiences: ['sts.amazonaws.com'],
      expirationSeconds: 600,
    });
    assert.equal(cloud.status, 201, cloud.message);
    const escalate = await asRequestor(
      'POST',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        metadata: { name: 'pwned' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: NS }],
      },
      'application/json',
      cloud.body.status.token,
    );
    assert.equal(escalate.status, 401);
    assert.equal((await cp.request('GET', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/pwned')).status, 404);
  });

  test('cannot mint tokens in namespaces the webhook excludes or it does not serve', async () => {
    const outside = await tokenRequest('outside', 'app', { audiences: ['sts.amazonaws.com'], expirationSeconds: 600 });
    assert.equal(outside.status, 403);
    assert.match(
      outside.message,
      /cannot create resource "serviceaccounts\/token" in API group "" in the namespace "outside"/,
    );
    // sandbox has its RoleBinding, but the webhook's namespaceSelector leaves it out: the policy refuses.
    const sandbox = await tokenRequest('sandbox', 'app', { audiences: ['sts.amazonaws.com'], expirationSeconds: 600 });
    assert.equal(sandbox.status, 403);
    assert.match(
      sandbox.message,
      /denied request: the token requestor may act only in the namespaces it serves and the webhook covers \(apps, platform, sandbox\), not in sandbox$/,
    );
  });

  test('may record only its own Events about Secrets', async () => {
    const event = (over: Record<string, unknown>) => ({
      metadata: { generateName: 'creds.' },
      involvedObject: { apiVersion: 'v1', kind: 'Secret', namespace: 'apps', name: 'creds' },
      reason: 'TokenRefused',
      message: 'x',
      type: 'Warning',
      source: { component: 'workload-identity-token-requestor' },
      reportingComponent: 'workload-identity-token-requestor',
      reportingInstance: 'r',
      ...over,
    });
    const post = (body: unknown) => asRequestor('POST', '/api/v1/namespaces/apps/events', body);
    assert.equal((await post(event({}))).status, 201);
    const forged = await post(
      event({
        involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: 'apps', name: 'web' },
        source: { component: 'kubelet' },
        reportingComponent: 'kubelet',
      }),
    );
    assert.equal(forged.status, 403);
    assert.match(
      forged.message,
      /denied request: the token requestor may only create Events about a Secret of their namespace, reported as workload-identity-token-requestor$/,
    );
    assert.equal(
      (
        await asRequestor(
          'POST',
          '/api/v1/namespaces/kube-system/events',
          event({ involvedObject: { apiVersion: 'v1', kind: 'Secret', namespace: 'kube-system', name: 'bootstrap' } }),
        )
      ).status,
      403,
    );
  });

  test('tokens are bound to a Secret, or unbound for at most 600 s; never longer than configured', async () => {
    const secret = await core.readNamespacedSecret({ namespace: 'apps', name: 'creds' });
    const ref = { apiVersion: 'v1', kind: 'Secret', name: 'creds', uid: secret.metadata!.uid };
    const unbound = await tokenRequest('apps', 'app', { audiences: ['sts.amazonaws.com'], expirationSeconds: 3600 });
    assert.equal(unbound.status, 403);
    assert.match(
      unbound.message,
      /only tokens bound to a Secret \(kind Secret, apiVersion v1, its uid\) that live at most 3600 s, or unbound tokens that live at most 600 s; this one was unbound for 3600 s$/,
    );
    const long = await tokenRequest('apps', 'app', {
      audiences: ['sts.amazonaws.com'],
      expirationSeconds: 7200,
      boundObjectRef: ref,
    });
    assert.equal(long.status, 403);
    const noUid = await tokenRequest('apps', 'app', {
      audiences: ['sts.amazonaws.com'],
      expirationSeconds: 600,
      boundObjectRef: { ...ref, uid: undefined },
    });
    assert.equal(noUid.status, 403);
    assert.equal(
      (await tokenRequest('apps', 'app', { audiences: ['sts.amazonaws.com'], expirationSeconds: 600 })).status,
      201,
    );
    const bound = await tokenRequest('apps', 'app', {
      audiences: ['sts.amazonaws.com'],
      expirationSeconds: 3600,
      boundObjectRef: ref,
    });
    assert.equal(bound.status, 201, bound.message);
    // The API server looks the bound Secret up in the ServiceAccount's namespace: a Secret of
    // another namespace cannot be bound (why cross-namespace tokens are short instead).
    const crossRef = await tokenRequest('platform', 'shared', {
      audiences: ['sts.amazonaws.com'],
      expirationSeconds: 600,
      boundObjectRef: ref,
    });
    assert.equal(crossRef.status, 404);
    assert.match(crossRef.message, /secrets "creds" not found/);
  });
});

describe('the token requestor as the chart deploys it', () => {
  let requestor: LocalWebhook;

  before(async () => {
    const deployment = find(manifests, 'Deployment', NAME)!;
    const kubeconfigPath = await serviceAccountKubeconfig(cp, NS, NAME);
    requestor = await startLocalWebhook(cp, {
      command: 'token-requestor',
      env: containerEnv(deployment),
      kubeconfigPath,
      args: ['--identity', 'local-requestor'],
    });
  });

  after(async () => {
    await requestor?.stop();
  });

  async function tokenOf(namespace: string, name: string): Promise<string> {
    return until(
      `a token in ${namespace}/${name}`,
      async () => {
        const token = textData(await core.readNamespacedSecret({ namespace, name })).token;
        return token && token.split('.').length === 3 && token.startsWith('eyJ') ? token : undefined;
      },
      30_000,
    );
  }
  async function authenticated(token: string, audience: string): Promise<boolean> {
    const res = await cp.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token, audiences: [audience] },
    });
    return JSON.parse(res.body).status.authenticated === true;
  }

  test('writes a token bound to its Secret: deleting the Secret revokes it', async () => {
    await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('azure', { name: 'bound', namespace: 'apps' }) as never,
    });
    const token = await tokenOf('apps', 'bound');
    const claims = await verifyServiceAccountToken(cp, token, {
      audience: 'api://AzureADTokenExchange',
      namespace: 'apps',
      name: 'app',
    });
    assert.equal(claims.exp! - claims.iat!, 3600);
    assert.equal((claims['kubernetes.io'] as { secret?: { name: string } }).secret?.name, 'bound');
    assert.equal(await authenticated(token, 'api://AzureADTokenExchange'), true);
    await core.deleteNamespacedSecret({ namespace: 'apps', name: 'bound' });
    await until('the token to be revoked', async () =>
      (await authenticated(token, 'api://AzureADTokenExchange')) ? undefined : true,
    );
  });

  test('a granted cross-namespace token is unbound and lives 600 s, so a withdrawn grant ends it within 10 minutes', async () => {
    await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('aws', { name: 'cross', namespace: 'apps', serviceAccount: 'platform/shared' }) as never,
    });
    const token = await tokenOf('apps', 'cross');
    const claims = await verifyServiceAccountToken(cp, token, {
      audience: 'sts.amazonaws.com',
      namespace: 'platform',
      name: 'shared',
    });
    assert.equal(claims.exp! - claims.iat!, 600);
  });

  test('a withdrawn grant removes the token from the Secret at its next check', async () => {
    await core.patchNamespacedServiceAccount({
      namespace: 'platform',
      name: 'shared',
      body: [{ op: 'remove', path: `/metadata/annotations/${GRANT.replace('/', '~1')}` }],
    });
    // The grant is checked before every token; the renew annotation asks for one now.
    await core.patchNamespacedSecret({
      namespace: 'apps',
      name: 'cross',
      body: [
        {
          op: 'add',
          path: '/metadata/annotations',
          value: {
            'workload-identity-webhook.io/service-account': 'platform/shared',
            'workload-identity-webhook.io/renew-requested-at': 'now',
          },
        },
      ],
    });
    await until(
      'the token to be removed',
      async () =>
        textData(await core.readNamespacedSecret({ namespace: 'apps', name: 'cross' })).token === undefined
          ? true
          : undefined,
      30_000,
    );
    const events = await core.listNamespacedEvent({ namespace: 'apps', fieldSelector: 'involvedObject.name=cross' });
    assert.match(
      events.items.find((e) => e.reason === 'TokenRefused')!.message!,
      /which has not granted references from namespace apps/,
    );
  });

  test('a reference into a namespace it does not serve gets a clear refusal, not a failed TokenRequest', async () => {
    await createServiceAccount(cp, 'outside', 'granting', { [GRANT]: 'apps' });
    await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('aws', { name: 'unserved', namespace: 'apps', serviceAccount: 'outside/granting' }) as never,
    });
    const event = await until(
      'a TokenRefused event',
      async () => {
        const events = await core.listNamespacedEvent({
          namespace: 'apps',
          fieldSelector: 'involvedObject.name=unserved',
        });
        return events.items.find((e) => e.reason === 'TokenRefused');
      },
      30_000,
    );
    assert.equal(
      event.message,
      'no token issued: ServiceAccount outside/granting is in namespace outside, which the token requestor does not serve (it serves apps, platform, sandbox; tokenRequestor.namespaces in the chart)',
    );
    assert.ok(!requestor.logs().some((l) => l.msg === 'token written' && l.secret === 'apps/unserved'));
  });

  test('watches only the namespaces it serves, and never logs a token', async () => {
    // The refusals are logged when the requestor handles those Secrets: wait for both lines.
    const expected = [
      'apps/cross: no token: the webhook would refuse this Secret',
      'apps/unserved: no token: the webhook would refuse this Secret',
    ];
    await until('the requestor to log both refusals', () => {
      const seen = new Set(
        requestor
          .logs()
          .filter((l) => (l.level as number) >= 40)
          .map((l) => `${l.secret}: ${l.msg}`),
      );
      return expected.every((e) => seen.has(e)) || undefined;
    });
    const logs = requestor.logs();
    const listed = logs.filter((l) => l.msg === 'labelled Secrets listed').map((l) => l.namespace);
    assert.deepEqual([...new Set(listed)].sort(), SERVED);
    const warnings = logs.filter((l) => (l.level as number) >= 40);
    assert.deepEqual([...new Set(warnings.map((l) => `${l.secret}: ${l.msg}`))].sort(), expected);
    for (const line of logs) assert.doesNotMatch(JSON.stringify(line), /eyJ[A-Za-z0-9_-]{10,}\.eyJ/);
  });
});

describe('watchScope: cluster, as the chart deploys it', () => {
  let requestor: LocalWebhook;
  let clusterManifests: Manifest[];

  before(async () => {
    ({ manifests: clusterManifests } = await renderChart(
      { ...VALUES, tokenRequestor: { ...VALUES.tokenRequestor, watchScope: 'cluster' } },
      { release: 'wiw', namespace: NS },
    ));
    // What watchScope: cluster adds to the objects above: a list-and-watch ClusterRole, bound cluster-wide.
    for (const m of clusterManifests.filter((m) => m.metadata.name === `${NAME}-watch`)) {
      const res = await cp.request('POST', await resourcePath(cp, m, NS), m);
      assert.equal(res.status, 201, `${m.kind} ${m.metadata.name}: ${res.body}`);
    }
    const deployment = find(clusterManifests, 'Deployment', NAME)!;
    assert.equal(containerEnv(deployment).WIW_WATCH_SCOPE, 'cluster');
    requestor = await startLocalWebhook(cp, {
      command: 'token-requestor',
      env: containerEnv(deployment),
      kubeconfigPath: await serviceAccountKubeconfig(cp, NS, NAME),
      args: ['--identity', 'cluster-requestor'],
    });
  });

  after(async () => {
    await requestor?.stop();
  });

  test('its credential may then read every Secret of the cluster (the privilege the choice grants), and still writes only where it serves', async () => {
    await until('the cluster-wide binding to take effect', async () =>
      (await asRequestor('GET', '/api/v1/secrets')).status === 200 ? true : undefined,
    );
    const all = await asRequestor('GET', '/api/v1/secrets');
    assert.ok(
      all.body.items.some((s: any) => s.metadata.namespace === 'kube-system' && s.metadata.name === 'bootstrap'),
    );
    const system = await mergePatch('kube-system', 'bootstrap', { data: { token: b64('x') } });
    assert.equal(system.status, 403);
    assert.match(system.message, /cannot patch resource "secrets" in API group "" in the namespace "kube-system"/);
    const outside = await tokenRequest('outside', 'app', { audiences: ['sts.amazonaws.com'], expirationSeconds: 600 });
    assert.equal(outside.status, 403);
  });

  test('one cluster-wide watch: a Secret of a served namespace gets its token, one of another namespace is not kept', async () => {
    // Created first, so the watch delivers it before the served one.
    await core.createNamespacedSecret({
      namespace: 'outside',
      body: labelledSecret('aws', { name: 'unserved-ns', namespace: 'outside' }) as never,
    });
    await core.createNamespacedSecret({
      namespace: 'apps',
      body: labelledSecret('aws', { name: 'cluster-watched', namespace: 'apps' }) as never,
    });
    await until('a token in apps/cluster-watched', async () =>
      textData(await core.readNamespacedSecret({ namespace: 'apps', name: 'cluster-watched' })).token?.startsWith('eyJ')
        ? true
        : undefined,
    );
    assert.equal(
      textData(await core.readNamespacedSecret({ namespace: 'outside', name: 'unserved-ns' })).token,
      undefined,
    );
    const logs = requestor.logs();
    assert.ok(!logs.some((l) => typeof l.secret === 'string' && l.secret.startsWith('outside/')));
    const listed = logs.filter((l) => l.msg === 'labelled Secrets listed');
    assert.equal(listed.length, 1, 'one watch');
    assert.equal(listed[0].namespace, undefined);
    const events = await core.listNamespacedEvent({
      namespace: 'outside',
      fieldSelector: 'involvedObject.name=unserved-ns',
    });
    assert.equal(events.items.length, 0);
  });
});
