// --max-connection-age-seconds (issue #30 §1): a connection past its age ends so kube-apiserver
// redials and a Service spreads its reviews over the replicas (kubernetes/kubernetes#75791).
// HTTP/2 gets GOAWAY and its streams in progress finish; HTTP/1.1's next answer closes the
// connection; no review is refused either way.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import { createMetrics } from '../../src/metrics.ts';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { until } from '../harness/until.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { podReview } from '../support/review-fuzz.ts';
import { httpsRequest } from '../support/https-client.ts';
import { ROLE_ARN } from '../support/identities.ts';

let certs: Awaited<ReturnType<typeof generateCertificates>>;
const apps: FastifyInstance[] = [];
const sessions: ClientHttp2Session[] = [];

before(async () => {
  certs = await generateCertificates(['localhost', '127.0.0.1']);
});
after(async () => {
  for (const session of sessions) session.destroy();
  await Promise.all(apps.map((a) => a.close()));
});

const AGE_MS = 400;

/** A server whose connections end after AGE_MS; each review waits for `gate` when one is set. */
async function start(maxConnectionAgeMs = AGE_MS) {
  const metrics = createMetrics();
  const p = providers({});
  const state: { gate?: Promise<void> } = {};
  const app = buildApp({
    https: { cert: certs.certPem, key: certs.keyPem },
    log: pino({ level: 'silent' }),
    metrics,
    admit: async (req) => {
      await state.gate;
      return admitPod(p, () => sa({ 'eks.amazonaws.com/role-arn': ROLE_ARN }), req, undefined, { maxContainers: 10 });
    },
    isReady: () => true,
    limits: { maxConnectionAgeMs },
  });
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const closedForAge = async () =>
    Number(/wiw_connections_closed_total\{reason="max_age"\} (\d+)/.exec(await metrics.registry.metrics())?.[1] ?? 0);
  return { url, state, closedForAge };
}

const REVIEW = JSON.stringify(
  podReview(pod({ spec: { serviceAccountName: 'app', containers: [{ name: 'c', image: 'i' }] } }), 'u', 'team-a'),
);

function h2post(session: ClientHttp2Session): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': '/mutate',
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(REVIEW),
    });
    let status = 0;
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.resume();
    stream.on('end', () => resolve(status));
    stream.on('error', reject);
    stream.end(REVIEW);
  });
}

describe('--max-connection-age-seconds', () => {
  test('HTTP/2: past its age the connection gets GOAWAY, the review in progress finishes, the next goes on a new one', async () => {
    const s = await start();
    const session = h2connect(s.url, { ca: certs.caPem, servername: 'localhost' });
    sessions.push(session);
    let goaway = false;
    session.on('goaway', () => (goaway = true));
    assert.equal(await h2post(session), 200);
    let open!: () => void;
    s.state.gate = new Promise((resolve) => (open = resolve));
    const inProgress = h2post(session);
    await until('GOAWAY once the connection is past its age', () => goaway);
    assert.equal(session.destroyed, false, 'the connection waits for its stream');
    open();
    assert.equal(await inProgress, 200, 'the stream in progress when GOAWAY came is answered');
    await until('the old connection to close once its streams are done', () => session.destroyed);
    const next = h2connect(s.url, { ca: certs.caPem, servername: 'localhost' });
    sessions.push(next);
    assert.equal(await h2post(next), 200);
    next.close();
    assert.equal(await s.closedForAge(), 1);
  });

  test('HTTP/1.1: past its age the next answer says Connection: close, and every review is answered', async () => {
    const s = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    const statuses: number[] = [];
    const closing = await until('an answer with Connection: close', async () => {
      const r = await httpsRequest(`${s.url}/mutate`, {
        method: 'POST',
        ca: certs.caPem,
        body: REVIEW,
        headers: { 'content-type': 'application/json' },
        agent,
      });
      statuses.push(r.status);
      for (const list of Object.values(agent.sockets)) for (const socket of list ?? []) sockets.add(socket);
      return r.headers.connection === 'close' ? r : undefined;
    });
    assert.ok(statuses.length > 1, 'the connection served reviews before its age');
    assert.ok(
      statuses.every((x) => x === 200),
      `every review answered: ${statuses.join(',')}`,
    );
    assert.equal(closing.status, 200);
    assert.equal(sockets.size, 1, 'one connection until then');
    assert.equal(await s.closedForAge(), 1);
    const fresh = await httpsRequest(`${s.url}/mutate`, {
      method: 'POST',
      ca: certs.caPem,
      body: REVIEW,
      headers: { 'content-type': 'application/json' },
      agent,
    });
    assert.equal(fresh.status, 200);
    assert.notEqual(fresh.headers.connection, 'close', 'a new connection starts its own age');
    agent.destroy();
  });
});
