// Issue #19 §4: the connection cap was global, so one client holding every connection locked out
// all others, kube-apiserver included, until its connections timed out. Here hostile clients hold
// all they can get (each connection sends one request, so no first-request deadline closes it, and
// then idles on keep-alive) and a kube-apiserver-like client, from another address, must still get
// its AdmissionReview answered within the chart's webhook timeout (10 s: a locked-out client waits
// forever, and a loaded machine may take over 1 s for a handshake). Loopback has every 127.0.0.0/8
// address: each is a source.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:https';
import type { AddressInfo, BlockList } from 'node:net';
import { connect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { sourceList } from '../../src/http/connection-limits.ts';
import { admitPod } from '../../src/admission/pods.ts';
import type { ServerLimits } from '../../src/limits.ts';
import { createMetrics } from '../../src/metrics.ts';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { createCa, createClientCert, type KeyPair } from '../harness/certs.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { podReview } from '../support/review-fuzz.ts';
import { until } from '../harness/until.ts';
import { roleArn } from '../support/identities.ts';

const LIMITS = { maxConnections: 48, maxConnectionsPerSource: 12, firstRequestTimeoutMs: 300 };
const API_SERVER = '127.0.0.2';
const HOGS = ['127.0.0.1', '127.0.0.3', '127.0.0.4', '127.0.0.5'];

let certs: Awaited<ReturnType<typeof generateCertificates>>;
let clientCa: KeyPair;
let apiServerCert: KeyPair;
const apps: FastifyInstance[] = [];
const held: TLSSocket[] = [];

before(async () => {
  certs = await generateCertificates(['localhost', '127.0.0.1']);
  clientCa = await createCa('webhook-clients');
  apiServerCert = await createClientCert(clientCa, 'kube-apiserver');
});

after(async () => {
  for (const s of held) s.destroy();
  await Promise.all(apps.map((a) => a.close()));
});

async function start(limits: Partial<ServerLimits>, withClientAuth = false, proxySources?: BlockList) {
  const metrics = createMetrics();
  const p = providers();
  const app = buildApp({
    https: { cert: certs.certPem, key: certs.keyPem },
    log: pino({ level: 'silent' }),
    metrics,
    admit: (req) => admitPod(p, () => sa({ 'eks.amazonaws.com/role-arn': roleArn('r') }), req),
    isReady: () => true,
    limits,
    clientCa: withClientAuth ? clientCa.cert : undefined,
    proxySources,
  });
  apps.push(app);
  await app.listen({ port: 0, host: '0.0.0.0' });
  return { port: (app.server.address() as AddressInfo).port, metrics };
}

/**
 * One connection from `source` (with `cert`: authenticated, as kube-apiserver's) that sent a
 * request and idles; resolves false if refused.
 */
function hold(port: number, source: string, cert?: KeyPair): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      localAddress: source,
      ca: certs.caPem,
      servername: 'localhost',
      ...(cert ? { cert: cert.cert, key: cert.key } : {}),
    } as ConnectionOptions);
    socket.once('secureConnect', () => socket.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n'));
    socket.once('data', () => {
      held.push(socket);
      resolve(true);
    });
    socket.on('error', () => resolve(false));
    socket.once('close', () => resolve(false));
  });
}

/** As many connections as `source` can get, up to `tries`, one after another; the count held. */
async function hogFrom(port: number, source: string, tries: number): Promise<number> {
  let got = 0;
  for (let i = 0; i < tries; i++) if (await hold(port, source)) got++;
  return got;
}

/** A review as kube-apiserver sends it, from its own address; rejects after 10 s without an answer, as kube-apiserver gives up after the chart's timeoutSeconds. */
function apiServerReview(port: number, cert?: KeyPair): Promise<{ status: number; body: any }> {
  const body = REVIEW;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        localAddress: API_SERVER,
        ca: certs.caPem,
        servername: 'localhost',
        agent: false,
        ...(cert ? { cert: cert.cert, key: cert.key } : {}),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/** A connection from kube-apiserver's address that sends reviews one after another, as its HTTP/1.1 pool does. */
async function keptAlive(port: number): Promise<{ socket: TLSSocket; review(): Promise<{ status: number }> }> {
  const socket = await new Promise<TLSSocket>((resolve, reject) => {
    const s = connect({
      host: '127.0.0.1',
      port,
      localAddress: API_SERVER,
      ca: certs.caPem,
      servername: 'localhost',
    } as ConnectionOptions);
    s.once('secureConnect', () => resolve(s));
    s.once('error', reject);
  });
  held.push(socket);
  const body = REVIEW;
  const review = () =>
    new Promise<{ status: number }>((resolve, reject) => {
      let text = '';
      const onData = (chunk: Buffer) => {
        text += chunk.toString('latin1');
        const head = text.indexOf('\r\n\r\n');
        const length = /content-length: (\d+)/i.exec(text)?.[1];
        if (head < 0 || length === undefined || text.length < head + 4 + Number(length)) return;
        done();
        resolve({ status: Number(text.slice(9, 12)) });
      };
      const onEnd = () => {
        done();
        reject(new Error('the server closed the connection under the review'));
      };
      const done = () => {
        socket.off('data', onData);
        socket.off('close', onEnd);
        socket.off('error', onEnd);
      };
      if (socket.destroyed || !socket.writable) return reject(new Error('the server had closed the connection'));
      socket.on('data', onData);
      socket.once('close', onEnd);
      socket.once('error', onEnd);
      socket.write(
        `POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    });
  return { socket, review };
}

/** A review as kube-apiserver sends it, of a Pod in team-a (test/support/review-fuzz.ts's shape). */
const REVIEW = JSON.stringify(podReview(pod(), 'u', 'team-a'));

const closedFor = async (metrics: ReturnType<typeof createMetrics>, reason: string) =>
  Number(
    new RegExp(`wiw_connections_closed_total\\{reason="${reason}"\\} (\\d+)`).exec(
      await metrics.registry.metrics(),
    )?.[1] ?? 0,
  );

describe('connection fairness', () => {
  test('one client holding all the connections it can get leaves room: kube-apiserver is answered within its timeout', async () => {
    const { port, metrics } = await start(LIMITS);
    // It takes the whole cap: below it nothing is closed for room (issue 30).
    const got = await hogFrom(port, HOGS[0], LIMITS.maxConnections);
    assert.equal(got, LIMITS.maxConnections, 'every newcomer was served');
    assert.equal(await closedFor(metrics, 'per_source_limit'), 0);
    // At the cap, kube-apiserver's newcomer takes the room of the hog's longest-idle connection.
    const answer = await apiServerReview(port);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.response.allowed, true);
    assert.ok(answer.body.response.patch, 'the review got its patch');
    assert.equal(await closedFor(metrics, 'per_source_limit'), 1);
    assert.equal(await closedFor(metrics, 'limit'), 0);
  });

  test('a proxy address listed in --proxy-sources is not held to the per-source cap', async () => {
    const { port, metrics } = await start(LIMITS, false, sourceList([`${HOGS[0]}/32`]));
    const got = await hogFrom(port, HOGS[0], 2 * LIMITS.maxConnectionsPerSource);
    assert.equal(got, 2 * LIMITS.maxConnectionsPerSource);
    const answer = await apiServerReview(port);
    assert.equal(answer.status, 200);
    assert.equal(await closedFor(metrics, 'per_source_limit'), 0, 'none of its idle connections was closed');
  });

  test('kube-apiserver over HTTP/1.1 with more connections between reviews than the per-source cap, below the overall cap: every one it reuses is answered, none closed', async () => {
    // Issue 30: a connection kube-apiserver is about to reuse looks idle from here. A cap that
    // closed a source's idle ones beyond 12 cut the reviews sent on them (`broken pipe`).
    const { port, metrics } = await start(LIMITS);
    const pool = LIMITS.maxConnections - 8;
    const reviewers = await Promise.all(Array.from({ length: pool }, () => keptAlive(port)));
    for (const r of reviewers) assert.equal((await r.review()).status, 200);
    // Newcomers from the same address while those idle, then a review on every pooled one.
    const newcomers = await Promise.all(Array.from({ length: 4 }, () => keptAlive(port)));
    const answers = await Promise.allSettled([...reviewers, ...newcomers].map((r) => r.review()));
    const failed = answers.filter((a) => a.status === 'rejected').map((a) => String(a.reason));
    assert.deepEqual(failed, [], 'every reused connection was answered');
    assert.equal(await closedFor(metrics, 'per_source_limit'), 0);
    for (const r of [...reviewers, ...newcomers]) r.socket.destroy();
  });

  test("a burst of silent connections from one address takes the whole cap, and at it gives way to another address's newcomer", async () => {
    // A deadline long enough that none of them is closed for it on a loaded machine.
    const { port, metrics } = await start({ ...LIMITS, firstRequestTimeoutMs: 30_000 });
    // Connections that never send a request, opened at once.
    const fresh = await Promise.all(
      Array.from(
        { length: LIMITS.maxConnections },
        () =>
          new Promise<TLSSocket>((resolve) => {
            const socket = connect({
              host: '127.0.0.1',
              port,
              localAddress: HOGS[0],
              ca: certs.caPem,
              servername: 'localhost',
            } as ConnectionOptions);
            socket.on('error', () => {});
            socket.once('secureConnect', () => resolve(socket));
            socket.once('close', () => resolve(socket));
          }),
      ),
    );
    held.push(...fresh);
    assert.equal(await closedFor(metrics, 'limit'), 0, 'all were let in');
    const answer = await apiServerReview(port);
    assert.equal(answer.status, 200);
    assert.equal(await closedFor(metrics, 'per_source_limit'), 1, "the burst's oldest made room");
  });

  test('with --client-ca-file, clients holding every connection from many addresses make room for kube-apiserver', async () => {
    const { port, metrics } = await start(LIMITS, true);
    const counts = [];
    for (const source of HOGS) counts.push(await hogFrom(port, source, LIMITS.maxConnectionsPerSource));
    assert.deepEqual(
      counts,
      HOGS.map(() => LIMITS.maxConnectionsPerSource),
      'the hogs hold the whole cap',
    );
    const answer = await apiServerReview(port, apiServerCert);
    assert.equal(answer.status, 200);
    assert.ok(answer.body.response.patch, 'the review got its patch');
    assert.equal(await closedFor(metrics, 'evicted'), 1, 'one unauthenticated connection made room');
    // Still room for kube-apiserver's next connections while the hogs try to take theirs back.
    const again = await Promise.all([hogFrom(port, HOGS[0], 4), apiServerReview(port, apiServerCert)]);
    assert.equal(again[1].status, 200);
  });

  test('at a cap held by authenticated connections, an unauthenticated newcomer is closed and an authenticated one is served', async () => {
    // kube-apiserver's address may hold them all (and the reserve above them).
    const { port } = await start({ ...LIMITS, maxConnectionsPerSource: 2 * LIMITS.maxConnections }, true);
    // Authenticated connections hold the whole cap: nothing unauthenticated can make room.
    const apiServerHeld = await Promise.all(
      Array.from({ length: LIMITS.maxConnections }, () => hold(port, API_SERVER, apiServerCert)),
    );
    assert.ok(apiServerHeld.every(Boolean));
    assert.equal(await hold(port, HOGS[0]), false, 'an unauthenticated newcomer over the cap is closed');
    assert.equal(
      (await apiServerReview(port, apiServerCert)).status,
      200,
      'an authenticated one is served from the reserve',
    );
  });
});

describe('first request deadline', () => {
  test('a TCP connection that never starts TLS, and a TLS one that never sends a request, are closed', async () => {
    const { port, metrics } = await start(LIMITS);
    const { connect: tcpConnect } = await import('node:net');
    const tcp = tcpConnect({ host: '127.0.0.1', port });
    const tcpClosed = new Promise((resolve) => tcp.once('close', resolve));
    tcp.on('error', () => {});
    const tls = connect({ host: '127.0.0.1', port, ca: certs.caPem, servername: 'localhost' });
    const tlsClosed = new Promise((resolve) => tls.once('close', resolve));
    tls.on('error', () => {});
    await Promise.all([tcpClosed, tlsClosed]);
    await until(
      'both closes counted',
      async () => (await closedFor(metrics, 'first_request_timeout')) === 2 || undefined,
    );
  });
});
