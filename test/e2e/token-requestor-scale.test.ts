// Issue 30 item 5: the token requestor at many namespaces, on a real kube-apiserver, at a scale CI
// affords (200 namespaces; bench/token-requestor.ts runs 2,000 and 20,000 Secrets). Before, each
// listed namespace's watch held a connection of its own and every call opened another: 200
// namespaces held 566 connections. Now its watches and calls share an HTTP/2 pool (100
// streams a connection); --watch-scope cluster is one watch. Both see Secrets of namespaces
// created after they started. And a leader failover (SIGKILL) in which no token expires: tokens
// of 60 s whose renewals fall due around the kill are all renewed before they expire, the later
// ones by the new leader.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createNamespace, startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { kubeApiOf } from '../../src/kube/connect.ts';
import type { OpenWatch } from '../../src/kube/api.ts';
import { MAX_STREAMS_PER_CONNECTION } from '../../src/kube/http2-pool.ts';
import { MAX_CONCURRENT_STEPS } from '../../src/token-requestor/requestor.ts';
import { labelledSecret } from '../support/secrets.ts';
import {
  connectionsTo,
  inParallel,
  leaseHolder,
  requestorKubeconfig,
  startTokenRequestor,
  type RequestorProcess,
} from '../support/token-requestor.ts';

const NAMESPACES = 200;
const SYSTEM = 'wiw-system';
/** One Lease for every test's requestors, one test after another (its RBAC names it). */
const LEASE = 'scale';
const AUDIENCE = 'sts.amazonaws.com';
const LABEL = 'workload-identity-webhook.io/provider';
const names = Array.from({ length: NAMESPACES }, (_, i) => `scale-${String(i).padStart(3, '0')}`);
/** Created only after the requestors started. */
const LATE = names.slice(-20);

let cp: ControlPlane;
let kubeconfig: string;
let port: number;
const running: RequestorProcess[] = [];

function createSecret(namespace: string, name: string, data: Record<string, string> = {}) {
  const body = labelledSecret('aws', { name, namespace }) as { data: Record<string, string> };
  Object.assign(body.data, data);
  return cp.request('POST', `/api/v1/namespaces/${namespace}/secrets`, body).then((res) => {
    assert.equal(res.status, 201, res.body);
    return JSON.parse(res.body) as { metadata: { uid: string } };
  });
}

async function createNamespaces(list: readonly string[]) {
  await inParallel(list, 16, async (ns) => {
    await createNamespace(cp, ns);
    const res = await cp.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: 'app' } });
    assert.equal(res.status, 201, res.body);
  });
}

/** The claims of the Secret's token, undefined when it has none. */
async function claimsOf(namespace: string, name: string): Promise<Record<string, any> | undefined> {
  const secret = JSON.parse((await cp.request('GET', `/api/v1/namespaces/${namespace}/secrets/${name}`)).body);
  const token = secret.data?.token && Buffer.from(secret.data.token, 'base64').toString();
  return token ? JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) : undefined;
}

/** A token the API server issued: a real one, 600 s (the requestors run with --token-expiration 600). */
const issued = (claims: Record<string, any> | undefined) => claims !== undefined && claims.exp - claims.iat === 600;

/** Stops the requestors a test started (also when it failed), so the next test's take the Lease. */
async function stopAll() {
  for (const r of running.splice(0)) await r.stop();
}

async function start(extra: string[], env: Record<string, string> = {}): Promise<RequestorProcess> {
  const r = await startTokenRequestor(
    cp,
    kubeconfig,
    [
      '--lease-namespace',
      SYSTEM,
      '--lease-name',
      LEASE,
      '--lease-duration-seconds',
      '3',
      '--token-expiration',
      '600',
      ...extra,
    ],
    { env },
  );
  running.push(r);
  return r;
}

before(async () => {
  cp = await startControlPlane({ name: 'requestor-scale' });
  port = Number(new URL(cp.server).port);
  await createNamespace(cp, SYSTEM);
  kubeconfig = await requestorKubeconfig(cp, SYSTEM, LEASE);
  await createNamespaces(names.filter((n) => !LATE.includes(n)));
});

afterEach(stopAll);

after(async () => {
  await stopAll();
  await cp?.stop();
});

describe('the token requestor at 200 namespaces', () => {
  test('one watch per namespace over a bounded pool of connections; namespaces created later are served too', async () => {
    await inParallel(
      names.filter((n) => !LATE.includes(n)),
      16,
      (ns) => createSecret(ns, 'per-namespace'),
    );
    const r = await start([], { WIW_NAMESPACES: names.join(',') });
    await until(
      'the requestor to lead',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === r.identity || undefined,
      30_000,
    );
    await until(
      'a token in every existing namespace',
      async () => {
        const list = JSON.parse(
          (await cp.request('GET', '/api/v1/secrets?fieldSelector=metadata.name=per-namespace')).body,
        );
        return list.items.filter((s: any) => s.data?.token).length === NAMESPACES - LATE.length || undefined;
      },
      120_000,
    );
    // 200 watches and the steps in flight, all streams of HTTP/2 connections of
    // MAX_STREAMS_PER_CONNECTION each, and the Lease's own (before: one per watch and per call, 500+).
    const bound = Math.ceil((NAMESPACES + MAX_CONCURRENT_STEPS) / MAX_STREAMS_PER_CONNECTION) + 1;
    const connections = connectionsTo(r.process.pid, port);
    assert.ok(connections <= bound, `${connections} connections to kube-apiserver, at most ${bound}`);
    await createNamespaces(LATE);
    await inParallel(LATE, 8, (ns) => createSecret(ns, 'per-namespace'));
    for (const ns of LATE)
      await until(
        `a token in ${ns}/per-namespace`,
        async () => issued(await claimsOf(ns, 'per-namespace')) || undefined,
        60_000,
      );
    const listed = r.logs().filter((l) => l.msg === 'labelled Secrets listed');
    assert.equal(new Set(listed.map((l) => l.namespace)).size, NAMESPACES);
    await r.stop();
  });

  test('--watch-scope cluster: one watch, Secrets of a namespace created after it started get tokens, unlisted ones are not kept', async () => {
    // scale-000 exists but is not listed; scale-late is listed and created once it runs.
    const listed = [...names.filter((n) => n !== 'scale-000'), 'scale-late'];
    const r = await start(['--watch-scope', 'cluster'], { WIW_NAMESPACES: listed.join(',') });
    await until(
      'the requestor to lead',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === r.identity || undefined,
      30_000,
    );
    await createNamespace(cp, 'scale-late');
    await createServiceAccountIn('scale-late');
    await createSecret('scale-000', 'cluster-unlisted');
    await createSecret('scale-late', 'cluster-late');
    await until(
      'a token in scale-late/cluster-late',
      async () => issued(await claimsOf('scale-late', 'cluster-late')) || undefined,
      60_000,
    );
    assert.equal(await claimsOf('scale-000', 'cluster-unlisted'), undefined);
    assert.ok(!r.logs().some((l) => String(l.secret).startsWith('scale-000/')));
    const lists = r.logs().filter((l) => l.msg === 'labelled Secrets listed');
    assert.equal(lists.length, 1);
    assert.equal(lists[0].namespace, undefined);
    // The watch and the calls on one HTTP/2 connection, and the Lease's.
    assert.ok(connectionsTo(r.process.pid, port) <= 2);
    await r.stop();
    // Without --namespaces (every namespace served) the same one watch serves a namespace created later.
    const all = await start([]);
    await until(
      'the requestor to lead',
      async () => (await leaseHolder(cp, SYSTEM, LEASE)) === all.identity || undefined,
      30_000,
    );
    await createNamespace(cp, 'scale-new');
    await createServiceAccountIn('scale-new');
    await createSecret('scale-new', 'late-namespace');
    await until(
      'a token in scale-new/late-namespace',
      async () => issued(await claimsOf('scale-new', 'late-namespace')) || undefined,
      60_000,
    );
    await all.stop();
  });

  test('a leader failover (SIGKILL) in which no token expires: the new leader renews every token due after the kill before it expires', async (t) => {
    // Two Secrets a namespace with tokens of 60 s (as the requestor would renew them: subject,
    // audience, a lifetime under --token-expiration), issued so that their renewals (at 45-55 %
    // of the lifetime) fall due over the 30 s around the kill, and they expire 27-33 s later.
    const early = names.filter((n) => !LATE.includes(n));
    const t0 = Math.floor(Date.now() / 1000);
    const secrets: { ns: string; name: string; exp: number }[] = [];
    await inParallel(
      early.flatMap((ns) => [0, 1].map((k) => ({ ns, name: `failover-${k}` }))),
      16,
      async ({ ns, name }) => {
        const iat = t0 - 20 + Math.floor(Math.random() * 30);
        const token = fakeToken({ sub: `system:serviceaccount:${ns}:app`, aud: [AUDIENCE], iat, exp: iat + 60 });
        await createSecret(ns, name, { token: Buffer.from(token).toString('base64') });
        secrets.push({ ns, name, exp: iat + 60 });
      },
    );
    // When each Secret got a token the API server issued, from a watch of our own.
    const renewedAt = new Map<string, number>();
    const watch: OpenWatch = await kubeApiOf(cp.kubeConfig()).watch(
      '/api/v1/secrets',
      { labelSelector: LABEL },
      (type, obj: any) => {
        const key = `${obj?.metadata?.namespace}/${obj?.metadata?.name}`;
        if (type !== 'MODIFIED' || !obj?.metadata?.name?.startsWith('failover-')) return;
        if (renewedAt.has(key) || !obj.data?.token) return;
        const claims = JSON.parse(
          Buffer.from(Buffer.from(obj.data.token, 'base64').toString().split('.')[1], 'base64url').toString(),
        );
        if (issued(claims)) renewedAt.set(key, Date.now() / 1000);
      },
    );
    try {
      const env = { WIW_NAMESPACES: names.join(',') };
      const leader = await start([], env);
      await until(
        'the first requestor to lead',
        async () => (await leaseHolder(cp, SYSTEM, LEASE)) === leader.identity || undefined,
        30_000,
      );
      const standby = await start([], env);
      // The leader dies once it has renewed some, with most still due.
      await until('the leader to renew some tokens', () => (renewedAt.size >= 20 ? true : undefined), 60_000);
      process.kill(leader.process.pid, 'SIGKILL');
      await until(
        'the standby to lead',
        async () => (await leaseHolder(cp, SYSTEM, LEASE)) === standby.identity || undefined,
        30_000,
      );
      // Renewals seen from here on are the new leader's. Not from the kill: a write the old
      // leader had sent just before it can reach our watch after it (it failed CI once so).
      const ledAt = Date.now() / 1000;
      await until('every token renewed', () => (renewedAt.size >= secrets.length ? true : undefined), 120_000);
      const late = secrets.filter((s) => renewedAt.get(`${s.ns}/${s.name}`)! >= s.exp);
      assert.deepEqual(
        late.map(
          (s) =>
            `${s.ns}/${s.name}: renewed ${(renewedAt.get(`${s.ns}/${s.name}`)! - s.exp).toFixed(1)} s after it expired`,
        ),
        [],
      );
      const byStandby = [...renewedAt.values()].filter((at) => at > ledAt).length;
      const margin = Math.min(...secrets.map((s) => s.exp - renewedAt.get(`${s.ns}/${s.name}`)!));
      t.diagnostic(
        `${byStandby} of ${secrets.length} renewed by the new leader; the closest ${margin.toFixed(1)} s before expiry`,
      );
      assert.ok(byStandby >= secrets.length / 4, `the new leader renewed ${byStandby} of ${secrets.length}`);
      // Its log line follows each write, so it may reach the file after our watch saw the write.
      const written = () =>
        standby.logs().filter((l) => l.msg === 'token written' && String(l.secret).includes('/failover-')).length;
      await until(
        'the new leader to log the renewals seen since it leads',
        () => written() >= byStandby || undefined,
        10_000,
      ).catch(() =>
        assert.fail(`the renewals after the kill are the new leader’s: ${byStandby} seen, ${written()} in its log`),
      );
    } finally {
      watch.abort();
    }
  });
});

async function createServiceAccountIn(ns: string) {
  const res = await cp.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: 'app' } });
  assert.equal(res.status, 201, res.body);
}

/** An unsigned JWT: the requestor reads a token's claims without verifying it (schedule.ts). */
function fakeToken(claims: Record<string, unknown>): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256', typ: 'JWT' })}.${part(claims)}.${Buffer.from('signature').toString('base64url')}`;
}
