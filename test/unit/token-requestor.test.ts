// The token requestor's decisions without a cluster: when to renew, what it refuses, what it asks
// the API for. Its behaviour against a real kube-apiserver is in test/e2e/secrets.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiException } from '@kubernetes/client-node';
import pino from 'pino';
import { admitSecret, secretShapeError } from '../../src/admission/secrets.ts';
import { ConfigError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { createSecretProviders } from '../../src/clouds/index.ts';
import { loadRequestorConfig, MAX_NAMESPACES } from '../../src/token-requestor/config.ts';
import { MAX_LISTS_AT_ONCE, startGradually, watchScopes } from '../../src/token-requestor/run.ts';
import { WorkQueue } from '../../src/token-requestor/work-queue.ts';
import { createRequestorMetrics } from '../../src/token-requestor/metrics.ts';
import { apiMessage, type RequestorApi } from '../../src/token-requestor/api.ts';
import { MAX_CONCURRENT_STEPS, TokenRequestor, UNBOUND_TOKEN_SECONDS } from '../../src/token-requestor/requestor.ts';
import { readTokenClaims, renewal, renewalFraction, type RenewalInput } from '../../src/token-requestor/schedule.ts';
import { trackSecret, type TrackedSecret } from '../../src/token-requestor/secret-informer.ts';
import { until } from '../harness/until.ts';
import { config } from '../support/builders.ts';
import { GCP_AUDIENCE, ROLE_ARN } from '../support/identities.ts';
import { b64, fakeJwt, labelledSecret } from '../support/secrets.ts';

const SUBJECT = 'system:serviceaccount:team-a:app';
const GRANT = 'workload-identity-webhook.io/allowed-referrer-namespaces';

describe('renewal schedule', () => {
  const base = (claims: RenewalInput['claims'], extra: Partial<RenewalInput> = {}): RenewalInput => ({
    claims,
    subject: SUBJECT,
    audience: 'sts.amazonaws.com',
    expirationSeconds: 3600,
    now: 10_000,
    jitterSeed: 'uid-1',
    forced: false,
    ...extra,
  });
  const fresh = { sub: SUBJECT, aud: ['sts.amazonaws.com'], iat: 9_000, exp: 12_600 };

  test('renews at 45 % to 55 % of the lifetime, the same moment for the same token', () => {
    const r = renewal(base(fresh));
    assert.equal(r.now, false);
    const at = (r as { at: number }).at;
    assert.ok(at >= 9_000 + 3600 * 0.45 && at < 9_000 + 3600 * 0.55, String(at));
    assert.deepEqual(renewal(base(fresh)), r);
  });

  test('jitter spreads Secrets written at the same moment', () => {
    const fractions = new Set(Array.from({ length: 50 }, (_, i) => renewalFraction(`uid-${i}`, 9_000)));
    assert.ok(fractions.size > 45);
    for (const f of fractions) assert.ok(f >= 0.45 && f < 0.55);
  });

  test('renews now when due, forced, missing, or not a token it would have issued', () => {
    assert.deepEqual(renewal(base(fresh, { now: 12_000 })), { now: true, reason: 'due' });
    assert.deepEqual(renewal(base(fresh, { forced: true })), { now: true, reason: 'forced' });
    assert.deepEqual(renewal(base(undefined)), { now: true, reason: 'missing' });
    assert.deepEqual(renewal(base({ sub: SUBJECT })), { now: true, reason: 'unreadable' });
    assert.deepEqual(renewal(base({ ...fresh, sub: 'system:serviceaccount:team-a:other' })), {
      now: true,
      reason: 'subject',
    });
    assert.deepEqual(renewal(base({ ...fresh, aud: 'api://AzureADTokenExchange' })), { now: true, reason: 'audience' });
    // Claims of a token that lives far longer than requested, e.g. written by hand.
    assert.deepEqual(renewal(base({ ...fresh, exp: 9_000 + 86_400 * 365 })), { now: true, reason: 'lifetime' });
  });

  test('reads JWT claims and nothing that is not a JWT', () => {
    assert.deepEqual(readTokenClaims(fakeJwt({ sub: SUBJECT, aud: 'a', iat: 1, exp: 2, extra: 'x' })), {
      sub: SUBJECT,
      aud: 'a',
      iat: 1,
      exp: 2,
    });
    assert.equal(readTokenClaims('not a jwt'), undefined);
    assert.equal(readTokenClaims('a.b.c'), undefined);
    assert.equal(readTokenClaims(undefined), undefined);
  });

  test('tracking a Secret keeps the claims of its token, not the token', () => {
    const token = fakeJwt({ sub: SUBJECT, iat: 5, exp: 10 });
    const secret = labelledSecret('aws', { data: { token, other: 'x' } });
    const tracked = trackSecret({
      ...secret,
      metadata: { ...secret.metadata, uid: 'u', resourceVersion: '7' },
    } as Parameters<typeof trackSecret>[0])!;
    assert.deepEqual(tracked.claims, { sub: SUBJECT, aud: undefined, iat: 5, exp: 10 });
    const kept = JSON.stringify(tracked);
    assert.equal(kept.includes(token) || kept.includes(b64(token)), false);
    assert.equal(tracked.config, secret.data!.config);
  });
});

// Issue 28: the requestor kept every annotation and the whole `config` of each labelled Secret.
describe('what the requestor keeps of a labelled Secret (bounded)', () => {
  const track = (secret: ReturnType<typeof labelledSecret>) => tracked(secret);

  test('only the labels and annotations it reads; the renew annotation for its presence; nothing else', () => {
    const t = track(
      labelledSecret('aws', {
        labels: { 'example.com/big': 'x'.repeat(63) },
        annotations: {
          'workload-identity-webhook.io/token-path': '/var/run/token',
          'workload-identity-webhook.io/renew-requested-at': 'r'.repeat(60_000),
          'workload-identity-webhook.io/x': 'x'.repeat(60_000),
          'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(60_000),
        },
      }),
    );
    assert.deepEqual(t.labels, { 'workload-identity-webhook.io/provider': 'aws' });
    assert.deepEqual(t.annotations, {
      'workload-identity-webhook.io/service-account': 'app',
      'workload-identity-webhook.io/token-path': '/var/run/token',
      'workload-identity-webhook.io/renew-requested-at': '',
    });
    assert.equal(t.unreadable, undefined);
    assert.ok(JSON.stringify(t).length < 2000, `${JSON.stringify(t).length} characters kept`);
  });

  test('an annotation or a config over its size is a marker: only why admission would refuse it is kept', () => {
    const reference = labelledSecret('aws', { serviceAccount: `team-b/${'a'.repeat(600)}` });
    const t = track(reference);
    assert.equal(
      t.unreadable,
      'the Secret cannot be read: metadata.annotations["workload-identity-webhook.io/service-account"] is 607 characters long, more than the 512 it may have',
    );
    assert.deepEqual(t.annotations, {});
    assert.equal(t.config, undefined);
    const config = track(labelledSecret('aws', { config: `# ${'x'.repeat(70_000)}\nroleARN: ${ROLE_ARN}` }));
    assert.match(config.unreadable!, /data\.config is \d+ characters of base64, more than the 87384 of 65536 bytes/);
    assert.equal(config.config, undefined);
    assert.ok(JSON.stringify(config).length < 1000);
    const atBound = track(labelledSecret('aws', { config: 'x'.repeat(65_536) }));
    assert.equal(atBound.unreadable, undefined);
  });

  test("a token too long to be a TokenRequest's is not decoded: read as no token of ours", () => {
    const long = fakeJwt({ sub: SUBJECT, iat: 5, exp: 10, pad: 'p'.repeat(20_000) });
    assert.equal(track(labelledSecret('aws', { data: { token: long } })).claims, undefined);
  });

  test("a marker Secret is refused with admission's message, as an event, and no token is asked for", async () => {
    const fake = fakeApi();
    const metrics = createRequestorMetrics();
    const r = requestor(fake.api, [], { metrics });
    const big = labelledSecret('aws', { config: `# ${'x'.repeat(70_000)}\nroleARN: ${ROLE_ARN}` });
    const ref = labelledSecret('aws', { name: 'ref', serviceAccount: 'x'.repeat(600) });
    r.onChange('team-a/aws', tracked(big));
    r.onChange('team-a/ref', tracked(ref));
    await until('two events', () => fake.events.length === 2 || undefined);
    assert.deepEqual(
      fake.events,
      [big, ref].map((secret) => ({
        reason: 'TokenRefused',
        message: `no token issued: the Secret cannot be read: ${secretShapeError(secret)}`,
      })),
    );
    assert.deepEqual(fake.calls, []);
    assert.match(await metrics.registry.metrics(), /reason="MalformedObject"\} 2/);
    r.stop();
  });
});

/** A RequestorApi that records calls and issues fake tokens. */
function fakeApi(accounts: ServiceAccountView[] = []) {
  const calls: string[] = [];
  const writes: { key: string; token: string | null; cleared: boolean }[] = [];
  const events: { reason: string; message: string }[] = [];
  let n = 0;
  const api: RequestorApi = {
    async readServiceAccount(namespace, name) {
      calls.push(`get ${namespace}/${name}`);
      return accounts.find((a) => a.namespace === namespace && a.name === name);
    },
    async requestToken({ namespace, name, audience, expirationSeconds, boundSecret }) {
      calls.push(
        `token ${namespace}/${name} ${audience} ${expirationSeconds} ${boundSecret ? `bound:${boundSecret.name}` : 'unbound'}`,
      );
      const iat = Math.floor(Date.now() / 1000);
      return fakeJwt({
        sub: `system:serviceaccount:${namespace}:${name}`,
        aud: [audience],
        iat,
        exp: iat + expirationSeconds,
        n: n++,
      });
    },
    async writeToken(secret, token, cleared) {
      writes.push({ key: `${secret.namespace}/${secret.name}`, token, cleared });
      return String(Number(secret.resourceVersion) + 1);
    },
    async warn(_secret, reason, message) {
      events.push({ reason, message });
    },
  };
  return { api, calls, writes, events };
}

function tracked(secret: ReturnType<typeof labelledSecret>, uid = 'uid-1'): TrackedSecret {
  return trackSecret({ ...secret, metadata: { ...secret.metadata, uid, resourceVersion: '1' } } as Parameters<
    typeof trackSecret
  >[0])!;
}

function secretCore() {
  const c = config();
  return { providers: createSecretProviders(c), defaultTokenPath: c.secretTokenPath };
}

function requestor(
  api: RequestorApi,
  namespaces: string[] = [],
  { log = pino({ level: 'silent' }), metrics = createRequestorMetrics() } = {},
) {
  return new TokenRequestor({ namespaces, core: secretCore(), api, log, metrics, expirationSeconds: 1200 });
}

describe('TokenRequestor', () => {
  test('requests a token bound to the Secret with the provider audience and writes it once', async () => {
    const fake = fakeApi();
    const r = requestor(fake.api);
    r.onChange('team-a/gcp', tracked(labelledSecret('gcp')));
    await until('a write', () => fake.writes.length === 1 || undefined);
    assert.deepEqual(fake.calls, [`token team-a/app ${GCP_AUDIENCE} 1200 bound:gcp-credentials`]);
    assert.equal(fake.writes[0].cleared, false);
    r.stop();
  });

  test('a cross-namespace reference reads the target and, unbindable (the Secret is elsewhere), gets the shortest lifetime', async () => {
    const fake = fakeApi([
      {
        namespace: 'team-b',
        name: 'shared',
        uid: 'x',
        annotations: { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' },
      },
    ]);
    const r = requestor(fake.api);
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { serviceAccount: 'team-b/shared' })));
    await until('a write', () => fake.writes.length === 1 || undefined);
    assert.deepEqual(fake.calls, [
      'get team-b/shared',
      `token team-b/shared sts.amazonaws.com ${UNBOUND_TOKEN_SECONDS} unbound`,
    ]);
    r.stop();
  });

  test('a reference into a namespace it does not serve is refused before any call, with a message naming the setting', async () => {
    const fake = fakeApi([
      {
        namespace: 'team-b',
        name: 'shared',
        uid: 'x',
        annotations: { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'team-a' },
      },
    ]);
    const r = requestor(fake.api, ['team-a']);
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { serviceAccount: 'team-b/shared' })));
    await until('an event', () => fake.events.length === 1 || undefined);
    assert.deepEqual(fake.calls, []);
    assert.deepEqual(fake.events[0], {
      reason: 'TokenRefused',
      message:
        'no token issued: ServiceAccount team-b/shared is in namespace team-b, which the token requestor does not serve (it serves team-a; tokenRequestor.namespaces in the chart)',
    });
    r.stop();
  });

  test('a withdrawn grant removes the live token it lent, and only a live one', async () => {
    const fake = fakeApi([{ namespace: 'team-b', name: 'shared', uid: 'x', annotations: {} }]);
    const r = requestor(fake.api);
    const now = Math.floor(Date.now() / 1000);
    const live = fakeJwt({
      sub: 'system:serviceaccount:team-b:shared',
      aud: ['sts.amazonaws.com'],
      iat: now - 60,
      exp: now + 540,
    });
    r.onChange(
      'team-a/live',
      tracked(labelledSecret('aws', { name: 'live', serviceAccount: 'team-b/shared', data: { token: live } })),
    );
    await until('the removal', () => fake.writes.length === 1 || undefined);
    assert.deepEqual(fake.writes, [{ key: 'team-a/live', token: null, cleared: false }]);
    assert.equal(fake.events[0].reason, 'TokenRefused');
    const expired = fakeJwt({
      sub: 'system:serviceaccount:team-b:shared',
      aud: ['sts.amazonaws.com'],
      iat: now - 700,
      exp: now - 100,
    });
    r.onChange(
      'team-a/expired',
      tracked(labelledSecret('aws', { name: 'expired', serviceAccount: 'team-b/shared', data: { token: expired } })),
    );
    await until('the second refusal', () => fake.events.length === 2 || undefined);
    assert.equal(fake.writes.length, 1, 'an expired token is left alone');
    r.stop();
  });

  test('never requests a token for a reference the webhook would refuse', async () => {
    const fake = fakeApi([{ namespace: 'team-b', name: 'private', uid: 'x', annotations: {} }]);
    const r = requestor(fake.api);
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { serviceAccount: 'team-b/private' })));
    await until('an event', () => fake.events.length === 1 || undefined);
    assert.equal(fake.events[0].reason, 'TokenRefused');
    assert.match(
      fake.events[0].message,
      /^no token issued: annotation workload-identity-webhook\.io\/service-account references ServiceAccount team-b\/private/,
    );
    assert.deepEqual(fake.calls, ['get team-b/private']);
    assert.deepEqual(fake.writes, []);
    r.stop();
  });

  test('never requests a token for a Secret whose config the webhook would refuse', async () => {
    const fake = fakeApi();
    const r = requestor(fake.api);
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { config: { roleARN: 'nope' } })));
    await until('an event', () => fake.events.length === 1 || undefined);
    assert.match(fake.events[0].message, /^no token issued: config\.roleARN="nope" is not an IAM role ARN/);
    assert.deepEqual(fake.calls, []);
    r.stop();
  });

  test("leaves Secrets with only Gardener's labels to Gardener's requestor", async () => {
    const fake = fakeApi();
    const r = requestor(fake.api);
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { provider: null, gardener: 'aws' })));
    // A project-labelled Secret after it is a barrier: the requestor handles changes in order.
    r.onChange('team-a/barrier', tracked(labelledSecret('aws', { name: 'barrier' }), 'uid-2'));
    await until("the barrier's write", () => fake.writes.length === 1 || undefined);
    assert.deepEqual(
      fake.writes.map((w) => w.key),
      ['team-a/barrier'],
    );
    r.stop();
  });

  test('the renew annotation forces a token and is cleared with the write', async () => {
    const fake = fakeApi();
    const r = requestor(fake.api);
    const iat = Math.floor(Date.now() / 1000);
    const current = fakeJwt({ sub: SUBJECT, aud: ['sts.amazonaws.com'], iat, exp: iat + 1200 });
    r.onChange(
      'team-a/aws',
      tracked(
        labelledSecret('aws', {
          data: { token: current },
          annotations: { 'workload-identity-webhook.io/renew-requested-at': 'now' },
        }),
      ),
    );
    await until('a write', () => fake.writes.length === 1 || undefined);
    assert.equal(fake.writes[0].cleared, true);
    r.stop();
  });

  test('a fresh token is left alone', async () => {
    const fake = fakeApi();
    const r = requestor(fake.api);
    const iat = Math.floor(Date.now() / 1000);
    const current = fakeJwt({ sub: SUBJECT, aud: ['sts.amazonaws.com'], iat, exp: iat + 1200 });
    r.onChange('team-a/fresh', tracked(labelledSecret('aws', { name: 'fresh', data: { token: current } })));
    r.onChange('team-a/barrier', tracked(labelledSecret('aws', { name: 'barrier' }), 'uid-2'));
    await until("the barrier's write", () => fake.writes.length === 1 || undefined);
    assert.deepEqual(
      fake.writes.map((w) => w.key),
      ['team-a/barrier'],
    );
    r.stop();
  });

  test('gives the verdict admission gives: the same refusals with the same messages, tokens for the rest', async () => {
    const accounts: ServiceAccountView[] = [
      { namespace: 'team-b', name: 'shared', uid: 'x', annotations: { [GRANT]: 'team-a' } },
      { namespace: 'team-b', name: 'private', uid: 'y', annotations: {} },
    ];
    const cases: Record<string, ReturnType<typeof labelledSecret>> = {
      own: labelledSecret('aws'),
      granted: labelledSecret('gcp', { serviceAccount: 'team-b/shared' }),
      'not granted': labelledSecret('aws', { serviceAccount: 'team-b/private' }),
      'no such ServiceAccount': labelledSecret('azure', { serviceAccount: 'team-b/ghost' }),
      'bad config': labelledSecret('aws', { config: { roleARN: 'nope' } }),
      'config over its size': labelledSecret('aws', { config: `# ${'x'.repeat(70_000)}\nroleARN: ${ROLE_ARN}` }),
      'reference over its size': labelledSecret('aws', { serviceAccount: 'x'.repeat(600) }),
      'bad config, not granted': labelledSecret('aws', { serviceAccount: 'team-b/private', config: { roleARN: 'x' } }),
      'malformed reference, bad config': labelledSecret('azure', {
        serviceAccount: 'a/b/c',
        config: { clientID: 'x' },
      }),
      'no reference': labelledSecret('gcp', { serviceAccount: null }),
      'unknown provider': labelledSecret('aws', { provider: 'alicloud' }),
    };
    const verdicts: Record<string, { admission: string; requestor: string }> = {};
    for (const [name, secret] of Object.entries(cases)) {
      const decision = await admitSecret(
        secretCore(),
        (ns, n) => accounts.find((a) => a.namespace === ns && a.name === n),
        {
          uid: name,
          kind: { group: '', version: 'v1', kind: 'Secret' },
          namespace: 'team-a',
          operation: 'CREATE',
          object: secret,
        },
      );
      const fake = fakeApi(accounts);
      const r = requestor(fake.api);
      r.onChange(`team-a/${name}`, tracked(secret));
      await until(`${name}: a token or a refusal`, () => fake.writes.length + fake.events.length > 0 || undefined);
      r.stop();
      verdicts[name] = {
        admission: decision.allowed ? 'token' : `no token issued: ${decision.denial?.message}`,
        requestor: fake.writes.length ? 'token' : fake.events.map((e) => `${e.message}`).join(' | '),
      };
      if (fake.events.length) assert.equal(fake.events[0].reason, 'TokenRefused');
    }
    for (const [name, { admission, requestor }] of Object.entries(verdicts)) assert.equal(requestor, admission, name);
    const tokens = Object.entries(verdicts).filter(([, v]) => v.admission === 'token');
    assert.deepEqual(
      tokens.map(([name]) => name),
      ['own', 'granted'],
    );
  });

  test('reads the reference from the Secret once per pass, and the ServiceAccount once', async () => {
    const fake = fakeApi([{ namespace: 'team-b', name: 'shared', uid: 'x', annotations: { [GRANT]: 'team-a' } }]);
    const r = requestor(fake.api);
    const secret = tracked(labelledSecret('aws', { serviceAccount: 'team-b/shared' }));
    let referenceReads = 0;
    const annotations = new Proxy(secret.annotations, {
      get(target, key, receiver) {
        if (key === 'workload-identity-webhook.io/service-account') referenceReads++;
        return Reflect.get(target, key, receiver);
      },
    });
    // Counted when the pass is over and the token is requested (the write copies the annotations).
    let readsBeforeToken: number | undefined;
    const requestToken = fake.api.requestToken;
    fake.api.requestToken = (request) => {
      readsBeforeToken = referenceReads;
      return requestToken(request);
    };
    r.onChange('team-a/aws', { ...secret, annotations });
    await until('a write', () => fake.writes.length === 1 || undefined);
    r.stop();
    assert.equal(readsBeforeToken, 1);
    assert.deepEqual(
      fake.calls.filter((c) => c.startsWith('get ')),
      ['get team-b/shared'],
    );
  });

  test('a ServiceAccount it cannot read is tried again later, not refused; the log has the error, not the response', async () => {
    const lines: string[] = [];
    const log = createLogger('debug', { write: (line: string) => void lines.push(line) });
    const metrics = createRequestorMetrics();
    const fake = fakeApi();
    fake.api.readServiceAccount = async (namespace, name) => {
      fake.calls.push(`get ${namespace}/${name}`);
      const status = { kind: 'Status', reason: 'ServiceUnavailable', message: 'etcdserver: request timed out' };
      throw new ApiException(503, 'Unknown API Status Code!', JSON.stringify(status), { 'audit-id': 'a1b2' });
    };
    const r = requestor(fake.api, [], { log, metrics });
    r.onChange('team-a/aws', tracked(labelledSecret('aws', { serviceAccount: 'team-b/shared' })));
    // The second read comes after a backoff of 1 to 2 s.
    await until('a second read', () => fake.calls.length === 2 || undefined);
    r.stop();
    assert.deepEqual(fake.events, []);
    assert.deepEqual(fake.writes, []);
    assert.deepEqual((await metrics.refused.get()).values, []);
    const failed = (await metrics.failures.get()).values.find((v) => v.labels.stage === 'serviceaccount');
    assert.ok(failed && failed.value >= 1);
    const warning = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'cannot read the referenced ServiceAccount');
    assert.ok(warning, lines.join('\n'));
    assert.equal(warning.serviceAccount, 'team-b/shared');
    assert.equal(warning.err.type, 'ApiException');
    assert.equal(warning.err.message, 'HTTP 503 ServiceUnavailable: etcdserver: request timed out');
    assert.equal(lines.join('\n').includes('audit-id'), false);
  });

  test("the API server's message is passed on, not the raw error", () => {
    assert.equal(
      apiMessage({ body: JSON.stringify({ message: 'admission webhook denied the request: x' }) }),
      'admission webhook denied the request: x',
    );
    assert.equal(apiMessage(new Error('socket hang up')), 'socket hang up');
  });
});

describe('token-requestor settings', () => {
  test('the Lease namespace comes from the flag, else the in-cluster namespace file, else is an error naming the flag', () => {
    assert.equal(loadRequestorConfig(new Map([['lease-namespace', 'wiw']]), {}).leaseNamespace, 'wiw');
    assert.throws(
      () => loadRequestorConfig(new Map(), {}, '/nonexistent'),
      new ConfigError('--lease-namespace is required outside a cluster'),
    );
    assert.equal(loadRequestorConfig(new Map(), { WIW_LEASE_NAMESPACE: 'from-env' }).leaseNamespace, 'from-env');
  });

  test('values are validated at start-up', () => {
    assert.throws(
      () =>
        loadRequestorConfig(
          new Map([
            ['lease-namespace', 'x'],
            ['token-expiration', '60'],
          ]),
          {},
        ),
      new ConfigError('--token-expiration=60 is out of range; expected 600 to 4294967296'),
    );
    assert.throws(
      () =>
        loadRequestorConfig(
          new Map([
            ['lease-namespace', 'x'],
            ['lease-name', 'Bad_Name'],
          ]),
          {},
        ),
      new ConfigError('--lease-name="Bad_Name" is not a DNS subdomain'),
    );
    assert.throws(
      () =>
        loadRequestorConfig(
          new Map([
            ['lease-namespace', 'x'],
            ['namespaces', 'apps,Team_B'],
          ]),
          {},
        ),
      new ConfigError('--namespaces: "Team_B" is not a namespace name'),
    );
    assert.deepEqual(
      loadRequestorConfig(new Map([['lease-namespace', 'x']]), { WIW_NAMESPACES: 'apps, platform,apps' }).namespaces,
      ['apps', 'platform'],
    );
    const c = loadRequestorConfig(new Map([['lease-namespace', 'x']]), {});
    assert.equal(c.tokenExpiration, 3600);
    assert.deepEqual(c.namespaces, [], 'no list: every namespace (cluster-wide access)');
    assert.equal(c.leaseDurationSeconds, 15);
    assert.match(c.identity, /_[0-9a-f]{8}$/);
  });

  test('b64 fixture round-trips', () => assert.equal(Buffer.from(b64('x'), 'base64').toString(), 'x'));
});

describe('the token requestor at scale (issue 30)', () => {
  test('the work queue runs at most its concurrency at once, the lowest priority (soonest due) first', async () => {
    const queue = new WorkQueue(2);
    const order: number[] = [];
    let running = 0;
    let peak = 0;
    const releases: (() => void)[] = [];
    const task = (n: number) => async () => {
      running++;
      peak = Math.max(peak, running);
      order.push(n);
      await new Promise<void>((resolve) => releases.push(resolve));
      running--;
    };
    for (const n of [50, 10, 40, 20, 30]) queue.add(n, task(n));
    assert.deepEqual(order, [50, 10], 'the first two start at once, in arrival order');
    assert.equal(queue.waiting, 3);
    while (order.length < 5 || releases.length) {
      releases.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.deepEqual(order, [50, 10, 20, 30, 40]);
    assert.equal(peak, 2);
  });

  test('a new leader works through its Secrets soonest-due first, MAX_CONCURRENT_STEPS at once', async () => {
    const now = 1_700_000_000;
    let inFlight = 0;
    let peak = 0;
    const requested: string[] = [];
    const api: RequestorApi = {
      readServiceAccount: async (namespace, name) => ({ namespace, name, uid: 'u', annotations: {} }) as never,
      async requestToken({ namespace }) {
        inFlight++;
        peak = Math.max(peak, inFlight);
        requested.push(namespace);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
        return fakeJwt({ sub: 'x', aud: ['sts.amazonaws.com'], iat: now, exp: now + 600 });
      },
      writeToken: async () => '2',
      warn: async () => {},
    };
    const requestor = new TokenRequestor({
      core: secretCore(),
      api,
      log: pino({ level: 'silent' }),
      metrics: createRequestorMetrics(),
      expirationSeconds: 600,
      now: () => now * 1000,
    });
    // 40 Secrets whose tokens expired long ago (due: renewed now), listed in reverse order of due
    // time, 100 s apart (more than the jitter of 10 % of 600 s).
    for (let i = 39; i >= 0; i--) {
      const ns = `ns-${String(i).padStart(2, '0')}`;
      const token = fakeJwt({
        sub: `system:serviceaccount:${ns}:app`,
        aud: ['sts.amazonaws.com'],
        iat: now - 10_000 + i * 100,
        exp: now - 9_400 + i * 100,
      });
      const secret = tracked(labelledSecret('aws', { name: 's', namespace: ns }), `uid-${i}`);
      requestor.onChange(`${ns}/s`, { ...secret, claims: readTokenClaims(token) });
    }
    await until('every token requested', () => (requested.length === 40 ? true : undefined));
    requestor.stop();
    assert.ok(peak <= MAX_CONCURRENT_STEPS, `${peak} at once`);
    // Soonest due first (ns-00 is the oldest token), except those started before the rest arrived.
    assert.deepEqual(requested.slice(MAX_CONCURRENT_STEPS), [...requested.slice(MAX_CONCURRENT_STEPS)].sort());
    assert.equal(requested.at(-1), 'ns-' + String(39 - MAX_CONCURRENT_STEPS).padStart(2, '0'));
  });

  test('--watch-scope: one watch per namespace, or one cluster-wide kept to them; no namespaces: one cluster-wide', () => {
    assert.deepEqual(watchScopes({ namespaces: ['a', 'b'], watchScope: 'namespaces' }), [
      { namespace: 'a' },
      { namespace: 'b' },
    ]);
    assert.deepEqual(watchScopes({ namespaces: ['a', 'b'], watchScope: 'cluster' }), [{ served: new Set(['a', 'b']) }]);
    assert.deepEqual(watchScopes({ namespaces: [], watchScope: 'namespaces' }), [{}]);
    const flags = (extra: [string, string][]) => new Map([['lease-namespace', 'x'], ...extra]);
    assert.equal(loadRequestorConfig(flags([]), {}).watchScope, 'namespaces');
    assert.equal(loadRequestorConfig(flags([['watch-scope', 'cluster']]), {}).watchScope, 'cluster');
    assert.throws(
      () => loadRequestorConfig(flags([['watch-scope', 'all']]), {}),
      new ConfigError('--watch-scope="all" must be one of: namespaces, cluster'),
    );
    const many = Array.from({ length: MAX_NAMESPACES + 1 }, (_, i) => `n${i}`).join(',');
    assert.throws(
      () => loadRequestorConfig(flags([['namespaces', many]]), {}),
      new ConfigError(
        `--namespaces: ${MAX_NAMESPACES + 1} namespaces, more than ${MAX_NAMESPACES}; with that many, use --watch-scope=cluster and grant its cluster-wide Secret read`,
      ),
    );
  });

  test('a new term starts its watches MAX_LISTS_AT_ONCE at a time, each next one once one has listed, and no more once stopped', async () => {
    let listing = 0;
    let peak = 0;
    let started = 0;
    let stopped = false;
    const pending: (() => void)[] = [];
    const informers = Array.from({ length: 100 }, () => ({
      start: () =>
        new Promise<void>((resolve) => {
          started++;
          listing++;
          peak = Math.max(peak, listing);
          pending.push(() => {
            listing--;
            resolve();
          });
        }),
    }));
    const done = startGradually(informers, () => stopped);
    assert.equal(started, MAX_LISTS_AT_ONCE);
    for (let i = 0; i < 50 - MAX_LISTS_AT_ONCE; i++) {
      pending.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(started, 50);
    stopped = true;
    while (pending.length) {
      pending.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await done;
    assert.equal(started, 50, 'none started after the term ended');
    assert.equal(peak, MAX_LISTS_AT_ONCE);
  });
});
