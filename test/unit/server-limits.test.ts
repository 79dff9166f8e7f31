// The admission server under hostile callers: bounded bodies, bodies in flight, connections,
// patch size, timeouts, closed metric labels, clipped log fields and a modern TLS 1.2 suite list.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/http/app.ts';
import { admitPod } from '../../src/admission/pods.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { DEFAULT_LIMITS, type ServerLimits } from '../../src/limits.ts';
import { ERROR_CODES } from '../../src/errors.ts';
import { createMetrics } from '../../src/metrics.ts';
import { REVIEW_OVERHEAD_BYTES } from '../../src/http/review-budget.ts';
import { generateCertificates } from '../../src/tls/self-signed.ts';
import { parseCipherSuites, parseTlsVersion, tlsPolicy } from '../../src/tls/policy.ts';
import { pod, providers, sa } from '../support/builders.ts';
import { httpsRequest } from '../support/https-client.ts';
import { CLIENT, roleArn } from '../support/identities.ts';

const ARN = roleArn('r');
const accounts = new Map<string, ServiceAccountView>([
  [
    'team-a/app',
    sa({
      'eks.amazonaws.com/role-arn': ARN,
      'azure.workload.identity/client-id': CLIENT,
    }),
  ],
]);
let certs: Awaited<ReturnType<typeof generateCertificates>>;

before(async () => {
  certs = await generateCertificates(['localhost', '127.0.0.1']);
});

interface Server {
  app: FastifyInstance;
  url: string;
  port: number;
  metrics: ReturnType<typeof createMetrics>;
  logs: Record<string, unknown>[];
}

const servers: Server[] = [];
after(() => Promise.all(servers.map((s) => s.app.close())));

async function start(limits: Partial<ServerLimits> = {}, tls = tlsPolicy('TLSv1.2')): Promise<Server> {
  const metrics = createMetrics();
  const logs: Record<string, unknown>[] = [];
  const p = providers();
  const app = buildApp({
    https: { cert: certs.certPem, key: certs.keyPem },
    log: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    metrics,
    admit: (request) =>
      admitPod(p, (ns, name) => accounts.get(`${ns}/${name}`), request, undefined, {
        maxContainers: limits.maxContainers ?? DEFAULT_LIMITS.maxContainers,
      }),
    isReady: () => true,
    limits,
    tls,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const server = { app, url: `https://127.0.0.1:${port}`, port, metrics, logs };
  servers.push(server);
  return server;
}

function review(object: unknown, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace: 'team-a',
      operation: 'CREATE',
      object,
      ...extra,
    },
  };
}

function post(s: Server, body: unknown) {
  return httpsRequest(`${s.url}/mutate`, {
    method: 'POST',
    ca: certs.caPem,
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
}

/** A TLS connection that sends headers announcing `length` bytes and only `sent` of them. */
function stalledUpload(s: Server, length: number, sent = 1024, method = 'POST', path = '/mutate'): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () => {
      socket.write(
        `${method} ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`,
      );
      socket.write('x'.repeat(sent));
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

/** What the server sent before it closed the connection; fails (instead of hanging) if it never does. */
function closed(socket: TLSSocket, withinMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${withinMs} ms`));
    }, withinMs);
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.on('error', () => {});
  });
}

describe('request bodies', () => {
  test("an UPDATE carrying two objects at the API server's 3 MiB limit is accepted", async () => {
    const s = await start();
    const big = pod({ annotations: { 'example.com/blob': 'x'.repeat(2.9 * 1024 * 1024) } });
    const res = await post(s, review(big, { operation: 'UPDATE', oldObject: big }));
    assert.equal(res.status, 200);
    assert.equal(res.json().response.allowed, true);
  });

  test('a body over --max-request-bytes is 413 before it is read whole', async () => {
    const s = await start({ maxRequestBytes: 1024 * 1024, maxInflightRequestBytes: 4 * 1024 * 1024 });
    const res = await post(s, review(pod({ annotations: { blob: 'x'.repeat(2 * 1024 * 1024) } })));
    assert.equal(res.status, 413);
    assert.match(await s.metrics.registry.metrics(), /wiw_requests_rejected_total\{reason="too_large"\} 1/);
  });

  test('a body sent with any method but POST is refused at once, unread, outside the review budget', async () => {
    // fastify reads and parses the body of a DELETE, PUT, PATCH or OPTIONS to answer its 404: up to
    // the body limit each, which the review budget never counted. Now the headers get the 404.
    const s = await start();
    const max = DEFAULT_LIMITS.maxRequestBytes;
    for (const method of ['DELETE', 'PUT', 'PATCH', 'OPTIONS', 'GET'])
      for (const path of ['/mutate', '/healthz', '/nowhere']) {
        const text = await closed(await stalledUpload(s, max, 1024, method, path));
        assert.match(text, /^HTTP\/1\.1 404 /, `${method} ${path}: ${text.slice(0, 200)}`);
        assert.match(text, /"code":"WIW_NOT_FOUND"/);
        assert.match(text, /connection: close/i);
      }
    // Many at once, each announcing the size limit, cost another namespace's review nothing.
    const flood = await Promise.all(
      Array.from({ length: 40 }, (_, i) => stalledUpload(s, max, 64 * 1024, i % 2 ? 'PUT' : 'DELETE')),
    );
    const other = await post(s, review(pod(), { namespace: 'team-b', uid: 'u-other' }));
    assert.equal(other.status, 200, other.body);
    assert.match(other.body, /"uid":"u-other","allowed":true/);
    for (const text of await Promise.all(flood.map((socket) => closed(socket)))) assert.match(text, /^HTTP\/1\.1 404 /);
    // Without a body the routes answer as before.
    const ready = await httpsRequest(`${s.url}/healthz`, { ca: certs.caPem });
    assert.equal(ready.status, 200);
    const del = await httpsRequest(`${s.url}/mutate`, { method: 'DELETE', ca: certs.caPem });
    assert.equal(del.status, 404);
  });

  test('a body without Content-Length is refused with 411', async () => {
    const s = await start();
    const socket = await new Promise<TLSSocket>((resolve) => {
      const c = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () =>
        resolve(c),
      );
    });
    const answer = closed(socket);
    socket.write(
      'POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"a":\r\n',
    );
    assert.match(await answer, /^HTTP\/1\.1 411 /);
  });

  test('senders that stall their bodies hold at most --max-inflight-request-bytes; the budget comes back', async () => {
    // Room for two such bodies, each with the share every review holds.
    const s = await start({
      maxRequestBytes: 1024 * 1024,
      maxInflightRequestBytes: 2 * (1024 * 1024 + REVIEW_OVERHEAD_BYTES),
    });
    const stalled = [await stalledUpload(s, 1024 * 1024), await stalledUpload(s, 1024 * 1024)];
    // Wait until both are counted (each has been routed), then the budget is spent.
    let res = await post(s, review(pod()));
    for (let i = 0; res.status === 200 && i < 50; i++) res = await post(s, review(pod()));
    assert.equal(res.status, 503);
    assert.equal(res.headers['retry-after'], '1');
    assert.equal(res.json().code, 'WIW_BUSY');
    for (const socket of stalled) socket.destroy();
    const { until } = await import('../harness/until.ts');
    await until('the budget to come back', async () => (await post(s, review(pod()))).status === 200 || undefined);
  });

  test('a body still arriving after the request timeout is cut off', async () => {
    const s = await start({ headersTimeoutMs: 200, requestTimeoutMs: 300 });
    const socket = await stalledUpload(s, 100_000);
    const answer = await closed(socket);
    assert.match(answer, /^HTTP\/1\.1 408 /);
  });
});

describe('size of a Pod and of an answer', () => {
  test('a Pod with more containers than --max-containers is denied in a small answer, naming the limit', async () => {
    const s = await start();
    const containers = Array.from({ length: 8000 }, (_, i) => ({ name: `c${i}`, image: 'i' }));
    const res = await post(s, review(pod({ spec: { containers } })));
    assert.equal(res.status, 200);
    const { response } = res.json();
    assert.equal(response.allowed, false);
    assert.match(
      response.status.message,
      /8000 containers, more than the 500 workload-identity-webhook admits \(--max-containers\)/,
    );
    assert.ok(res.body.length < 1024, `answer of ${res.body.length} bytes`);
  });

  test('a patch over --max-patch-bytes becomes a denial, never an answer of that size', async () => {
    const s = await start({ maxPatchBytes: 4096 });
    const containers = Array.from({ length: 20 }, (_, i) => ({ name: `c${i}`, image: 'i' }));
    const res = await post(s, review(pod({ spec: { containers } })));
    const { response } = res.json();
    assert.equal(response.allowed, false);
    assert.match(response.status.message, /bytes of JSON Patch to this Pod, more than the webhook's limit of 4096/);
    assert.equal(response.patch, undefined);
  });
});

describe('clients that do not read', () => {
  test('a client that never reads a large answer is cut off after the answer timeout', async () => {
    // Limits raised so that the answer is far larger than the kernel's socket buffers.
    const s = await start({ maxContainers: 20_000, maxPatchBytes: 64 * 1024 * 1024, responseTimeoutMs: 300 });
    const containers = Array.from({ length: 12_000 }, (_, i) => ({ name: `c${i}`, image: 'i' }));
    const body = JSON.stringify(
      review(pod({ labels: { 'azure.workload.identity/use': 'true' }, spec: { containers } })),
    );
    const socket = await new Promise<TLSSocket>((resolve) => {
      const c = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () =>
        resolve(c),
      );
    });
    const gone = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    socket.pause();
    socket.write(
      `POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    socket.write(body);
    // The server gives up on the unread answer and closes; the paused client then sees the end.
    const { until } = await import('../harness/until.ts');
    await until('the server to drop the connection', async () => {
      const count = await new Promise<number>((resolve) => s.app.server.getConnections((_e, n) => resolve(n)));
      return count === 0 || undefined;
    });
    socket.resume();
    await gone;
  });
});

describe('connections', () => {
  test('connections beyond --max-connections are closed at once; others are served', async () => {
    const s = await start({ maxConnections: 3 });
    const idle = await Promise.all(
      [0, 1, 2].map(
        () =>
          new Promise<TLSSocket>((resolve) => {
            const c = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () =>
              resolve(c),
            );
          }),
      ),
    );
    const fourth = await new Promise<string>((resolve) => {
      const c = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () =>
        resolve('connected'),
      );
      c.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? 'error'));
      c.on('close', () => resolve('closed'));
    });
    assert.notEqual(fourth, 'connected');
    for (const c of idle) c.destroy();
  });
});

describe('idle connections', () => {
  test('a TLS connection that never sends a request is closed after the first-request timeout', async () => {
    const s = await start({ firstRequestTimeoutMs: 300 });
    const socket = await new Promise<TLSSocket>((resolve) => {
      const c = connect({ port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost' }, () =>
        resolve(c),
      );
    });
    assert.equal(await closed(socket), '');
  });

  test('a keep-alive connection is not cut by that timeout once it has sent a request', async () => {
    const s = await start({ firstRequestTimeoutMs: 300 });
    let connections = 0;
    s.app.server.on('secureConnection', () => connections++);
    const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: certs.caPem });
    assert.equal((await httpsRequest(`${s.url}/healthz`, { ca: certs.caPem, agent })).status, 200);
    const { until } = await import('../harness/until.ts');
    const started = Date.now();
    await until('twice the first-request timeout to pass', () => Date.now() - started > 600 || undefined);
    assert.equal((await httpsRequest(`${s.url}/healthz`, { ca: certs.caPem, agent })).status, 200);
    assert.equal(connections, 1, 'the second request went over the first connection');
    agent.destroy();
  });
});

describe('metrics and logs', () => {
  test('object kinds become metric labels from a closed set only', async () => {
    const s = await start();
    for (let i = 0; i < 20; i++) {
      const r = review(pod());
      r.request.kind = { group: 'x', version: 'v1', kind: `Unique${i}` };
      assert.equal((await post(s, r)).status, 200);
    }
    const text = await s.metrics.registry.metrics();
    assert.doesNotMatch(text, /Unique/);
    assert.match(text, /wiw_admission_requests_total\{kind="other",operation="CREATE",result="\w+"\} 20/);
  });

  test('a 1 MB uid becomes a log field of at most a few hundred characters; a 1 MB name is refused unlogged', async () => {
    const s = await start();
    const uid = 'u'.repeat(1024 * 1024);
    assert.equal((await post(s, review(pod(), { uid }))).status, 200);
    const line = s.logs.find((l) => l.msg === 'admission');
    assert.ok(line);
    assert.ok(JSON.stringify(line).length < 1024, `log line of ${JSON.stringify(line).length} characters`);
    assert.match(String(line.uid), /…\(1048576 chars\)$/);
    const p = pod();
    p.metadata!.name = 'n'.repeat(1024 * 1024);
    const refused = await post(s, review(p, { name: p.metadata!.name }));
    assert.equal(refused.status, 400);
    assert.ok(refused.body.length < 400, 'the answer does not echo the name');
    assert.equal(s.logs.filter((l) => l.msg === 'admission').length, 1);
  });
});

describe('routes', () => {
  test("/mutate/ignore and /mutate/fail pass the calling entry's failure policy; /mutate the default; others are 404", async () => {
    const seen: (string | undefined)[] = [];
    const app = buildApp({
      https: { cert: certs.certPem, key: certs.keyPem },
      log: pino({ level: 'silent' }),
      metrics: createMetrics(),
      admit: async (_request, context) => {
        seen.push(context.failurePolicy);
        return { allowed: true };
      },
      isReady: () => true,
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    servers.push({ app } as Server);
    const url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const call = (path: string) =>
      httpsRequest(`${url}${path}`, {
        method: 'POST',
        ca: certs.caPem,
        body: JSON.stringify(review(pod())),
        headers: { 'content-type': 'application/json' },
      });
    for (const path of ['/mutate/ignore', '/mutate/fail', '/mutate'])
      assert.equal((await call(path)).status, 200, path);
    assert.deepEqual(seen, ['Ignore', 'Fail', undefined]);
    const res = await call('/mutate/maybe');
    assert.equal(res.status, 404);
    assert.match(res.json().message, /the webhook serves \/mutate, \/mutate\/fail and \/mutate\/ignore/);
  });
});

describe('error answers', () => {
  // Issue 33: every code the HTTP face answers with is the catalog's (none of fastify's own), with
  // the catalog's status; a defect while admitting is a 500 in the review, not a 400.
  let url: string;
  before(async () => {
    const app = buildApp({
      https: { cert: certs.certPem, key: certs.keyPem },
      log: pino({ level: 'silent' }),
      metrics: createMetrics(),
      admit: async () => {
        throw new Error('a defect');
      },
      isReady: () => true,
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    servers.push({ app } as Server);
    url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  const call = (path: string, method = 'POST') =>
    httpsRequest(`${url}${path}`, {
      method,
      ca: certs.caPem,
      body: JSON.stringify(review(pod())),
      // A refusal before the body is read may close the connection: none is reused.
      headers: { 'content-type': 'application/json', connection: 'close' },
    });

  test('an unknown route, a URL that is not valid, an overlong /mutate/ parameter: catalog codes', async () => {
    const cases: [string, string, number, string, RegExp][] = [
      ['GET', '/nope', 404, 'WIW_NOT_FOUND', /^no route GET \/nope; the webhook serves \/mutate/],
      ['POST', '/healthz', 404, 'WIW_NOT_FOUND', /^no route POST \/healthz; /],
      ['POST', '/mutate/%zz', 400, 'WIW_BAD_REQUEST', /is not a valid url component/],
      ['POST', `/mutate/${'x'.repeat(300)}`, 404, 'WIW_NOT_FOUND', /^no route POST \/mutate\/x+…\(308 chars\); /],
    ];
    for (const [method, path, status, code, message] of cases) {
      const res = await call(path, method);
      assert.equal(res.status, status, `${method} ${path}: ${res.body}`);
      assert.equal(res.json().code, code, `${method} ${path}`);
      assert.equal((ERROR_CODES as Record<string, { status?: number }>)[code].status, status, code);
      assert.match(res.json().message, message, `${method} ${path}`);
    }
  });

  test('a defect while admitting is denied with status 500 InternalError, naming it', async () => {
    const res = await call('/mutate');
    assert.equal(res.status, 200);
    const { response } = res.json();
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status, {
      code: 500,
      reason: 'InternalError',
      message: 'workload-identity-webhook failed on this object: a defect',
    });
  });
});

describe('TLS 1.2 cipher suites', () => {
  const handshake = (s: Server, ciphers: string) =>
    new Promise<string>((resolve) => {
      const c = connect(
        { port: s.port, host: '127.0.0.1', ca: certs.caPem, servername: 'localhost', maxVersion: 'TLSv1.2', ciphers },
        () => {
          resolve(c.getCipher().name);
          c.end();
        },
      );
      c.on('error', (err) => resolve(`refused: ${(err as NodeJS.ErrnoException).code}`));
    });

  test('static-RSA and CBC-SHA1 suites are refused; forward-secret AEAD suites are served', async () => {
    const s = await start();
    for (const weak of ['AES128-SHA', 'AES256-GCM-SHA384', 'ECDHE-RSA-AES128-SHA', 'AES128-SHA256']) {
      assert.match(await handshake(s, weak), /^refused/, weak);
    }
    assert.equal(await handshake(s, 'ECDHE-RSA-AES128-GCM-SHA256'), 'ECDHE-RSA-AES128-GCM-SHA256');
  });

  test('--tls-min-version 1.3 refuses TLS 1.2', async () => {
    const s = await start({}, tlsPolicy(parseTlsVersion('VersionTLS13', 'tls-min-version')));
    assert.match(await handshake(s, 'ECDHE-RSA-AES128-GCM-SHA256'), /^refused/);
  });

  test('--tls-cipher-suites takes IANA names and refuses weak or unknown ones by name', () => {
    assert.deepEqual(
      parseCipherSuites(
        'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305',
        'tls-cipher-suites',
      ),
      ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'],
    );
    assert.throws(
      () => parseCipherSuites('TLS_RSA_WITH_AES_128_CBC_SHA', 'tls-cipher-suites'),
      /TLS_RSA_WITH_AES_128_CBC_SHA is not offered \(only forward-secret AEAD suites are\)/,
    );
    assert.throws(() => parseTlsVersion('1.1', 'tls-min-version'), /--tls-min-version="1.1" must be 1.2 or 1.3/);
  });
});
