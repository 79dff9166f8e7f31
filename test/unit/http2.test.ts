// HTTP/2 beside HTTP/1.1 (issue #28 §5), and the limits HTTP/2 itself needs: the reviews of one
// connection, the rapid reset of CVE-2023-44487, a stalled body, an answer nobody reads. And the
// review budget of §4: answers count until they are written, over either protocol.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connect, type TLSSocket } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp, type AppOptions } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import type { AdmissionRequest } from '../../src/admission/review.ts';
import type { ServerLimits } from '../../src/limits.ts';
import { createMetrics } from '../../src/metrics.ts';
import { RESET_BURST } from '../../src/http/stream-limits.ts';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { createCa, createClientCert, type KeyPair } from '../harness/certs.ts';
import { until } from '../harness/until.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { httpsRequest } from '../support/https-client.ts';
import { CLIENT, ROLE_ARN, TENANT, WIF_PROVIDER } from '../support/identities.ts';

let certs: Awaited<ReturnType<typeof generateCertificates>>;
const apps: FastifyInstance[] = [];
const sessions: ClientHttp2Session[] = [];

before(async () => {
  certs = await generateCertificates(['localhost', '127.0.0.1']);
});

after(async () => {
  for (const s of sessions) s.destroy();
  await Promise.all(apps.map((a) => a.close()));
});

/** A ServiceAccount of three clouds: each container gets ~1.5 KB of patch. */
const THREE_CLOUDS = sa({
  'eks.amazonaws.com/role-arn': ROLE_ARN,
  'azure.workload.identity/client-id': CLIENT,
  'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
});

interface Server {
  port: number;
  url: string;
  metrics: ReturnType<typeof createMetrics>;
  /** Reviews worked out, by namespace. */
  admitted: Map<string, number>;
}

async function start(
  limits: Partial<ServerLimits> = {},
  extra: Partial<AppOptions> & { gate?: () => Promise<void> } = {},
): Promise<Server> {
  const metrics = createMetrics();
  const p = providers({ 'azure-tenant-id': TENANT });
  const admitted = new Map<string, number>();
  const app = buildApp({
    https: { cert: certs.certPem, key: certs.keyPem },
    log: pino({ level: 'silent' }),
    metrics,
    admit: async (req: AdmissionRequest) => {
      admitted.set(req.namespace ?? '', (admitted.get(req.namespace ?? '') ?? 0) + 1);
      await extra.gate?.();
      return admitPod(p, () => THREE_CLOUDS, req, undefined, { maxContainers: limits.maxContainers ?? 500 });
    },
    isReady: () => true,
    limits,
    ...extra,
  });
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { port, url: `https://127.0.0.1:${port}`, metrics, admitted };
}

function review(namespace = 'team-a', containers = 1): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace,
      operation: 'CREATE',
      object: pod({
        labels: { 'azure.workload.identity/use': 'true' },
        spec: {
          serviceAccountName: 'app',
          containers: Array.from({ length: containers }, (_, i) => ({ name: `c${i}`, image: 'i' })),
        },
      }),
    },
  });
}

function h2(s: Server, cert?: KeyPair): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2connect(s.url, {
      ca: certs.caPem,
      servername: 'localhost',
      ...(cert ? { cert: cert.cert, key: cert.key } : {}),
    });
    sessions.push(session);
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

const headersFor = (body: string) => ({
  ':method': 'POST',
  ':path': '/mutate',
  'content-type': 'application/json',
  'content-length': Buffer.byteLength(body),
});

/** The answer on a client stream: status and body. */
function answerOf(stream: ClientHttp2Stream): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let text = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: Buffer) => (text += c));
    stream.on('end', () => resolve({ status, body: text }));
    stream.on('error', reject);
  });
}

/** A review POSTed on an HTTP/2 session: status and body. */
function h2post(session: ClientHttp2Session, body: string): Promise<{ status: number; body: string }> {
  const stream = session.request(headersFor(body));
  const answer = answerOf(stream);
  stream.end(body);
  return answer;
}

const metric = async (s: Server, name: string, labels: string) =>
  Number(new RegExp(`${name}\\{${labels}\\} (\\d+)`).exec(await s.metrics.registry.metrics())?.[1] ?? 0);
/** Bytes the review budget holds now. */
const heldBytes = async (s: Server) =>
  Number(/^wiw_inflight_bytes (\d+)/m.exec(await s.metrics.registry.metrics())?.[1] ?? Number.NaN);

/** The protocol a client offering both gets. */
function negotiated(s: Server): Promise<string | false> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      port: s.port,
      host: '127.0.0.1',
      ca: certs.caPem,
      servername: 'localhost',
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    socket.once('secureConnect', () => {
      resolve(socket.alpnProtocol ?? false);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

describe('HTTP/2 beside HTTP/1.1', () => {
  // Before, each stream waited for its body: the timeout is how that fails.
  test('a body on a stream of any method but POST gets the 404 at its headers, unread', {
    timeout: 10_000,
  }, async () => {
    const s = await start();
    const session = await h2(s);
    for (const method of ['DELETE', 'PUT', 'PATCH', 'OPTIONS']) {
      const stream = session.request(
        { ':method': method, ':path': '/mutate', 'content-type': 'application/json' },
        { endStream: false },
      );
      const pending = answerOf(stream);
      stream.write('{"kind":"AdmissionReview"'); // and never ends: the answer must not wait for it
      const answer = await pending;
      assert.equal(answer.status, 404, method);
      assert.match(answer.body, /"code":"WIW_NOT_FOUND"/);
    }
    assert.equal(await heldBytes(s), 0);
  });

  test('a client offering both gets h2, and its reviews are answered; HTTP/1.1 is still served', async () => {
    const s = await start();
    assert.equal(await negotiated(s), 'h2');
    const session = await h2(s);
    const answers = await Promise.all(Array.from({ length: 20 }, () => h2post(session, review())));
    for (const a of answers) {
      assert.equal(a.status, 200);
      assert.ok(JSON.parse(a.body).response.patch, 'a patch');
    }
    const h1 = await httpsRequest(`${s.url}/mutate`, {
      method: 'POST',
      ca: certs.caPem,
      body: review(),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(h1.status, 200);
    assert.ok(h1.json().response.patch);
    // The probe may close before the server sees its handshake done: at least the session.
    assert.ok((await metric(s, 'wiw_connections_total', 'protocol="h2"')) >= 1);
    assert.ok((await metric(s, 'wiw_connections_total', 'protocol="http/1.1"')) >= 1);
  });

  test('with http2 off, the same client gets HTTP/1.1', async () => {
    const s = await start({}, { http2: false });
    assert.notEqual(await negotiated(s), 'h2');
  });
});

describe('the limits of HTTP/1.1 hold over HTTP/2', () => {
  test('body size, Content-Length, client authentication and the metrics', async () => {
    const clientCa = await createCa('webhook-clients');
    const apiServer = await createClientCert(clientCa, 'kube-apiserver');
    const s = await start(
      { maxRequestBytes: 64 * 1024, maxInflightRequestBytes: 1024 * 1024 },
      { clientCa: clientCa.cert },
    );
    const anonymous = await h2(s);
    const refused = await h2post(anonymous, review());
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.body).code, 'WIW_CLIENT_CERTIFICATE_REQUIRED');
    const authenticated = await h2(s, apiServer);
    assert.equal((await h2post(authenticated, review())).status, 200);
    const tooLarge = await h2post(authenticated, review('team-a', 3000));
    assert.equal(tooLarge.status, 413, `${review('team-a', 3000).length} bytes: ${tooLarge.body.slice(0, 200)}`);
    const unsized = await new Promise<number>((resolve, reject) => {
      const stream = authenticated.request({
        ':method': 'POST',
        ':path': '/mutate',
        'content-type': 'application/json',
      });
      stream.on('response', (h) => resolve(Number(h[':status'])));
      stream.on('error', reject);
      stream.end(review());
    });
    assert.equal(unsized, 411);
    const text = await s.metrics.registry.metrics();
    assert.match(text, /wiw_requests_rejected_total\{reason="unauthenticated"\} 1/);
    assert.match(text, /wiw_requests_rejected_total\{reason="too_large"\} 1/);
    assert.match(text, /wiw_admission_requests_total\{kind="Pod",operation="CREATE",result="mutated"\} 1/);
  });
});

describe('drain over HTTP/2', () => {
  test('a draining replica answers the stream and sends GOAWAY: the client opens its next one elsewhere', async () => {
    const s = await start({}, { isDraining: () => true });
    const session = await h2(s);
    const goaway = new Promise<number>((resolve) => session.once('goaway', (code) => resolve(code)));
    const answer = await h2post(session, review());
    assert.equal(answer.status, 200);
    assert.ok(JSON.parse(answer.body).response.patch);
    assert.equal(await goaway, constants.NGHTTP2_NO_ERROR);
    await until('the connection to close', () => session.closed || session.destroyed || undefined);
  });
});

describe('closing after the drain', () => {
  test('a request on a connection still open as the server closes gets a 503 with Retry-After, which kube-apiserver retries', async () => {
    const s = await start();
    const app = apps.at(-1)!;
    // HTTP/1.1, as kube-apiserver calls a webhook behind a Service. A request begun when close()
    // is called keeps its connection open (only idle ones are closed), and is answered meanwhile.
    let serverRead = false;
    app.server.once('secureConnection', (tls: TLSSocket) => tls.once('data', () => (serverRead = true)));
    const socket = connect({ host: '127.0.0.1', port: s.port, ca: certs.caPem, ALPNProtocols: ['http/1.1'] });
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    const body = review();
    try {
      socket.write('POST /mutate HTTP/1.1\r\nHost: localhost\r\n');
      // The request line parsed: the connection is busy, not idle.
      await until('the server to read the request line', () => serverRead || undefined);
      const closed = app.close();
      socket.write(`Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      const answer = await until('the answer', () => (received.includes('}') ? received : undefined));
      assert.match(answer, /^HTTP\/1\.1 503 /);
      assert.match(answer, /\r\nretry-after: 1\r\n/i);
      assert.match(answer, /"code":"WIW_CLOSING"/);
      await closed;
    } finally {
      socket.destroy();
    }
  });
});

describe('the limits HTTP/2 needs', () => {
  test("a connection's reviews in progress are bounded, and a stream the client resets counts until its review's work is done", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const s = await start({ maxConcurrentStreams: 4 }, { gate: () => gate });
    const session = await h2(s);
    // Four reviews held in the admission step, then reset by the client.
    try {
      const held = Array.from({ length: 4 }, () => {
        const stream = session.request(headersFor(review('held')));
        stream.on('error', () => {});
        stream.end(review('held'));
        return stream;
      });
      await until('the four reviews to be in progress', () => s.admitted.get('held') === 4 || undefined);
      for (const stream of held) stream.close(constants.NGHTTP2_CANCEL);
      // Their streams are gone, their work is not: the connection has no room for more.
      const refused = await h2post(session, review());
      assert.equal(refused.status, 503);
      assert.match(JSON.parse(refused.body).message, /too many reviews in progress on this connection/);
    } finally {
      open();
    }
    await until(
      'room once the work is done',
      async () => (await h2post(session, review())).status === 200 || undefined,
    );
  });

  test('rapid reset (CVE-2023-44487): a client that opens and resets streams in a loop is cut off after a bounded number of reviews; others are served meanwhile', async () => {
    const s = await start();
    const attacker = await h2(s);
    attacker.on('error', () => {});
    const other = await h2(s);
    const served: Promise<{ status: number }>[] = [];
    const attack = review('attacker');
    for (let sent = 0; sent < 5000; sent++) {
      const stream = attacker.request(headersFor(attack));
      stream.on('error', () => {});
      stream.end(attack);
      stream.close(constants.NGHTTP2_CANCEL);
      if (sent % 50 === 0) {
        served.push(h2post(other, review()));
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    await until('the attacker to be cut off', async () =>
      (await metric(s, 'wiw_connections_closed_total', 'reason="rapid_reset"')) === 1 ? true : undefined,
    );
    await until('only the other connection to be left', async () => {
      const n = await new Promise<number>((resolve) => apps.at(-1)!.server.getConnections((_e, c) => resolve(c)));
      return n === 1 || undefined;
    });
    // Node's own limit (nghttp2's 1,000 resets) would have let about a thousand of them run.
    const worked = s.admitted.get('attacker') ?? 0;
    assert.ok(worked <= 3 * RESET_BURST, `${worked} of the attacker's 5000 streams were worked out`);
    for (const r of await Promise.all(served)) assert.equal(r.status, 200);
    assert.equal((await h2post(other, review())).status, 200, 'the other connection is untouched');
  });

  test('a stalled body on one stream is cut off after the request timeout; the connection serves on', async () => {
    const s = await start({ headersTimeoutMs: 200, requestTimeoutMs: 300 });
    const session = await h2(s);
    const stalled = session.request({
      ':method': 'POST',
      ':path': '/mutate',
      'content-type': 'application/json',
      'content-length': 100_000,
    });
    stalled.write('{"apiVersion":');
    const code = await new Promise<number>((resolve) => stalled.once('close', () => resolve(stalled.rstCode ?? -1)));
    assert.equal(code, constants.NGHTTP2_CANCEL);
    assert.equal((await h2post(session, review())).status, 200);
  });

  test('a stream whose answer is not read is cut off after the answer timeout; other streams of the connection are answered', async () => {
    const s = await start({ maxContainers: 2000, maxPatchBytes: 16 * 1024 * 1024, responseTimeoutMs: 300 });
    const session = await h2(s);
    const big = review('team-a', 1500);
    const unread = session.request(headersFor(big));
    unread.on('error', () => {});
    unread.pause();
    unread.end(big);
    const code = await new Promise<number>((resolve) => unread.once('close', () => resolve(unread.rstCode ?? -1)));
    assert.equal(code, constants.NGHTTP2_CANCEL);
    assert.equal((await h2post(session, review())).status, 200);
    await until('the budget to come back', async () => (await heldBytes(s)) === 0 || undefined);
  });
});

describe('the review budget counts answers', () => {
  test('answers waiting to be written hold the budget: beyond it, 503 with Retry-After; all of it comes back', async () => {
    const limit = 8 * 1024 * 1024;
    const s = await start({ maxContainers: 2000, maxPatchBytes: 16 * 1024 * 1024, maxInflightRequestBytes: limit });
    // About 1 MiB of answer each (600 containers, three clouds), from a ~50 KB review, on streams
    // the client does not read: HTTP/2's flow control keeps all but 64 KiB of them in the server.
    const session = await h2(s);
    const body = review('team-a', 600);
    const streams = Array.from({ length: 12 }, () => {
      const stream = session.request(headersFor(body));
      stream.pause();
      stream.end(body);
      return stream;
    });
    const answers = streams.map(
      (stream) =>
        new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
          let text = '';
          let head: Record<string, unknown> = {};
          stream.on('response', (h) => (head = h));
          stream.on('data', (c: Buffer) => (text += c));
          stream.on('end', () => resolve({ status: Number(head[':status']), headers: head, body: text }));
          stream.on('error', reject);
        }),
    );
    await until('every review answered or refused', () => (s.admitted.get('team-a') ?? 0) >= 2 || undefined);
    const held = await heldBytes(s);
    assert.ok(held > 1024 * 1024 && held <= limit, `${held} bytes held of ${limit}`);
    for (const stream of streams) stream.resume();
    const all = await Promise.all(answers);
    const statuses = all.map((a) => a.status);
    assert.ok(statuses.filter((x) => x === 200).length >= 2, `statuses ${statuses}`);
    const busy = all.filter((a) => a.status === 503);
    assert.ok(busy.length >= 4, `statuses ${statuses}`);
    for (const a of busy) {
      assert.equal(a.headers['retry-after'], '1');
      assert.equal(JSON.parse(a.body).code, 'WIW_BUSY');
    }
    await until('the budget to come back', async () => (await heldBytes(s)) === 0 || undefined);
  });
});
