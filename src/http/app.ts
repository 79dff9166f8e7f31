// The HTTP(S) face of admission: routes, the limits that keep a replica inside its memory
// whatever callers send, and one admission handler decorated with metrics, the patch limit and
// the decision log (admission/handler.ts). Listening and lifecycle are the caller's.
import type { Http2SecureServer, Http2ServerRequest, Http2ServerResponse, ServerHttp2Stream } from 'node:http2';
import type { BlockList } from 'node:net';
import type { TLSSocket } from 'node:tls';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { Logger } from 'pino';
import { errorMessage, httpError, type HttpErrorCode } from '../errors.ts';
import {
  answerDefects,
  decorate,
  limitPatch,
  logDecision,
  measure,
  type Admit,
  type AdmitContext,
} from '../admission/handler.ts';
import { parseAdmissionReview, reviewResponse } from '../admission/review.ts';
import type { PodReviewObservation } from '../clouds/types.ts';
import { DEFAULT_LIMITS, type ServerLimits } from '../limits.ts';
import { clip } from '../text.ts';
import { limitConnectionAge } from './connection-age.ts';
import { limitConnections } from './connection-limits.ts';
import { parseJsonBodies } from './json-body.ts';
import type { Metrics } from '../metrics.ts';
import { REVIEW_OVERHEAD_BYTES, ReviewBudget, type ReviewHold } from './review-budget.ts';
import { limitStreams, type StreamLimiter } from './stream-limits.ts';
import { tlsPolicy, type TlsPolicy } from '../tls/policy.ts';

const FAILURE_POLICIES: Record<string, AdmitContext['failurePolicy']> = { fail: 'Fail', ignore: 'Ignore' };

export interface AppOptions {
  https: { cert: string; key: string } | null;
  log: Logger;
  metrics: Metrics;
  admit: Admit;
  /** /readyz: TLS loaded, caches synced, not draining. */
  isReady: () => boolean;
  /** Draining: every answer tells the client to close the connection and go elsewhere. */
  isDraining?: () => boolean;
  limits?: Partial<ServerLimits>;
  tls?: TlsPolicy;
  /** PEM of the CA that signs the API server's client certificate: /mutate then requires one. */
  clientCa?: string;
  /** Each Pod CREATE answered, for the peers' metrics (the namespace is the request's, unbounded). */
  observePod?: (review: PodReviewObservation) => void;
  /** Offer HTTP/2 (ALPN h2) beside HTTP/1.1; true unless false (only with `https`). */
  http2?: boolean;
  /** Source addresses not held to the per-source connection cap (a proxy in front of the webhook). */
  proxySources?: BlockList;
}

/** Fastify's own error codes, as the catalog's: the body names a catalog code, never fastify's. */
const FASTIFY_CODES: Record<string, HttpErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'WIW_REQUEST_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'WIW_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'WIW_BAD_ADMISSION_REVIEW',
  FST_ERR_CTP_INVALID_JSON_BODY: 'WIW_BAD_ADMISSION_REVIEW',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'WIW_BAD_REQUEST',
  FST_ERR_BAD_URL: 'WIW_BAD_REQUEST',
};

/** The catalog code of an error fastify raised for a request: a 4xx it names, else a defect (500). */
function answeredCode(err: { statusCode?: number; code?: string }): HttpErrorCode {
  const known = FASTIFY_CODES[err.code ?? ''];
  if (known) return known;
  // A 4xx of another cause (the request's body cut off mid-read): the request, not the webhook.
  return err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? 'WIW_BAD_REQUEST' : 'WIW_INTERNAL';
}

const ROUTES = 'the webhook serves /mutate, /mutate/fail and /mutate/ignore';

function send(reply: FastifyReply, code: HttpErrorCode, message: string): FastifyReply {
  const { status, body } = httpError(code, message);
  return reply.code(status).send(body);
}

/**
 * An answer is held twice over until written: its buffer, and its TLS records waiting for the
 * socket (measured: 300 answers of 943 KB at once peaked the cgroup at 160-221 MiB counted once).
 */
const ANSWER_COPIES = 2;

/** The raw request and response of either protocol. */
type RawRequest = FastifyRequest['raw'] | Http2ServerRequest;
type RawResponse = FastifyReply['raw'] | Http2ServerResponse;

/** What the hooks and the route share about the server: the review budget and HTTP/2's stream limits. */
interface Face {
  limits: ServerLimits;
  budget: ReviewBudget;
  streams?: StreamLimiter;
  holds: WeakMap<RawRequest, ReviewHold>;
}

/** The admission HTTP(S) application: routes only; listening and lifecycle are the caller's. */
export function buildApp(options: AppOptions): FastifyInstance {
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const { metrics, log } = options;
  const app = createFastify(options, limits);
  const budget = new ReviewBudget(limits.maxInflightRequestBytes, (held) => metrics.inflightBytes.set(held));
  const face: Face = { limits, budget, holds: new WeakMap() };
  if (isHttp2(options))
    // The instance is typed as HTTP/1.1's (createFastify); with http2 its server is an Http2SecureServer.
    face.streams = limitStreams(app.server as unknown as Http2SecureServer, limits.maxConcurrentStreams, (reason) =>
      metrics.connectionsClosed.inc({ reason }),
    );
  // Closing: close() was called (after the drain, at shutdown); set before the server stops listening.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Both hooks run for every request: callbacks, not async functions (a promise and a turn each).
  const admitRequest = requestBudget(face, metrics, options.isDraining ?? (() => false), () => closing);
  app.addHook('onRequest', (req, reply, done) => {
    if (!admitRequest(req, reply)) done(); // else answered already
  });
  app.addHook('onSend', (req, reply, payload, done) => {
    const stream = streamOf(req);
    // HTTP/2 has no Connection header (fastify sets one on a body it cannot read; Node would drop it with a warning).
    if (stream) reply.removeHeader('connection');
    responseDeadline(face, reply.raw as RawResponse, stream);
    done(null, payload);
  });
  answerErrors(app, log, metrics);
  addRoutes(app, options, face);
  return app;
}

/** Every error answer's body names a catalog code (errors.ts): fastify's own errors and its 404 too. */
function answerErrors(app: FastifyInstance, log: Logger, metrics: Metrics): void {
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    const code = answeredCode(err);
    if (code === 'WIW_INTERNAL') log.error({ err }, 'request failed');
    if (code === 'WIW_REQUEST_TOO_LARGE') metrics.rejected.inc({ reason: 'too_large' });
    return send(reply, code, err.message);
  });
  app.setNotFoundHandler(notFound);
}

/** /healthz, /readyz, and /mutate with its failure-policy twins. */
function addRoutes(app: FastifyInstance, options: AppOptions, face: Face): void {
  const { log, metrics } = options;
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    if (options.isReady()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });
  const handler = decorate(
    options.admit,
    logDecision(log),
    measure(metrics, options.observePod),
    limitPatch(face.limits.maxPatchBytes),
    answerDefects(log),
  );
  const mutate = mutateRoute(handler, face, metrics, options.clientCa);
  app.post('/mutate', (req, reply) => mutate(req, reply, { path: '/mutate' }));
  app.post<{ Params: { policy: string } }>('/mutate/:policy', (req, reply) => {
    const failurePolicy = FAILURE_POLICIES[req.params.policy];
    if (!failurePolicy)
      return send(reply, 'WIW_NOT_FOUND', `no route /mutate/${clip(req.params.policy, 63)}; ${ROUTES}`);
    return mutate(req, reply, { failurePolicy, path: `/mutate/${req.params.policy}` });
  });
}

const isHttp2 = (options: AppOptions) => options.https !== null && options.http2 !== false;

/** Fastify with the server's limits and TLS, and who gets a connection (connection-limits.ts). */
function createFastify(options: AppOptions, limits: ServerLimits): FastifyInstance {
  // fastify types an instance by its server (HTTP/1.1 or HTTP/2), chosen here at run time from
  // the options; the routes and hooks use only what both have, so the instance is typed as HTTP/1.1's.
  const app: FastifyInstance = Fastify(fastifyOptions(options, limits) as FastifyServerOptions);
  app.server.headersTimeout = limits.headersTimeoutMs;
  // Who gets a connection: caps overall and per source, a deadline for the first request.
  limitConnections(
    app.server,
    { ...limits, preferAuthenticated: options.clientCa !== undefined, exemptSources: options.proxySources },
    (reason) => options.metrics.connectionsClosed.inc({ reason }),
  );
  limitConnectionAge(app.server, limits.maxConnectionAgeMs, () =>
    options.metrics.connectionsClosed.inc({ reason: 'max_age' }),
  );
  app.server.on('secureConnection', (socket: TLSSocket) =>
    options.metrics.connections.inc({ protocol: socket.alpnProtocol === 'h2' ? 'h2' : 'http/1.1' }),
  );
  // Only JSON is an AdmissionReview; fastify answers 415 for any other content type.
  app.removeContentTypeParser('text/plain');
  parseJsonBodies(app);
  return app;
}

/** fastify's options: the limits, TLS, and the catalog's answer to a URL it cannot route. */
function fastifyOptions(options: AppOptions, limits: ServerLimits) {
  return {
    // One line per decision is logged by the handler; fastify's own per-request lines would double it.
    logger: false,
    bodyLimit: limits.maxRequestBytes,
    http2: isHttp2(options),
    // An HTTP/2 connection without streams is closed after this long, as an idle HTTP/1.1 one.
    http2SessionTimeout: limits.keepAliveTimeoutMs,
    https: options.https ? httpsOptions(options, options.https, limits) : null,
    // The onRequest hook answers while closing, with the Retry-After kube-apiserver retries on.
    return503OnClosing: false,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // A URL that is not valid, or a /mutate/ parameter longer than any route's: answered from the catalog.
    frameworkErrors: (err: FastifyError, req: FastifyRequest, reply: FastifyReply) =>
      err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? notFound(req, reply) : send(reply, answeredCode(err), err.message),
  };
}

/** The TLS server's options: the policy's versions and suites, HTTP/2 beside HTTP/1.1, the client CA. */
function httpsOptions(options: AppOptions, https: { cert: string; key: string }, limits: ServerLimits) {
  const { clientCa, tls = tlsPolicy('TLSv1.2') } = options;
  return {
    cert: https.cert,
    key: https.key,
    minVersion: tls.minVersion,
    ciphers: tls.ciphers,
    honorCipherOrder: true,
    handshakeTimeout: limits.handshakeTimeoutMs,
    // HTTP/2 (ALPN h2) for clients that offer it: kube-apiserver does only to a localhost URL
    // webhook; behind a Service it speaks HTTP/1.1 (kubernetes/kubernetes#75791), as most
    // clients do. The HTTP/1.1 timeouts are given here: the HTTP/2 server reads them so.
    ...(isHttp2(options)
      ? {
          allowHTTP1: true,
          settings: { maxConcurrentStreams: limits.maxConcurrentStreams },
          // nghttp2's own bound on a session (MB, 10 by default) counts the answers it queues:
          // beyond it, new streams get ENHANCE_YOUR_CALM, which kube-apiserver does not retry.
          // The review budget bounds those bytes instead (a 503 with Retry-After, retried),
          // held until each stream closes; nghttp2's bound stays above it with room for its
          // own per-stream state, so it is never the one that refuses.
          maxSessionMemory: 2 * Math.ceil(limits.maxInflightRequestBytes / 2 ** 20) + 16,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
        }
      : {}),
    // Node checks the header and request timeouts only this often (default 30 s): a stalled
    // body would otherwise be held twice as long as --request-timeout says.
    connectionsCheckingInterval: 1000,
    // Probes from the kubelet carry no client certificate: /mutate checks it, not the handshake.
    ...(clientCa ? { ca: clientCa, requestCert: true, rejectUnauthorized: false } : {}),
  };
}

/** No such route: the catalog's 404, naming the routes there are. */
function notFound(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return send(reply, 'WIW_NOT_FOUND', `no route ${req.method} ${clip(req.url, 63)}; ${ROUTES}`);
}

/** HTTP/1.1 only: tells the client to close this connection after the answer (HTTP/2 has no such header). */
function closeAfter(reply: FastifyReply): FastifyReply {
  return reply.raw.req.httpVersionMajor === 1 ? reply.header('connection', 'close') : reply;
}

/** The HTTP/2 stream of a request, if it came over HTTP/2. */
function streamOf(req: FastifyRequest): ServerHttp2Stream | undefined {
  return isHttp2Request(req.raw) ? req.raw.stream : undefined;
}

/** The request announces a body: over HTTP/2 its headers did not end the stream. */
function hasBody(req: FastifyRequest, stream: ServerHttp2Stream | undefined): boolean {
  if (stream) return !stream.endAfterHeaders;
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** An HTTP/1.1 request (IncomingMessage) has no stream; one over HTTP/2 (Http2ServerRequest) has. */
const isHttp2Request = (raw: RawRequest): raw is Http2ServerRequest => 'stream' in raw;

/**
 * Bytes of reviews in progress are bounded (review-budget.ts): a request that would exceed the
 * budget is turned away before its body is read, so slow or stalled senders cannot pile up
 * memory, and its answer is counted too (mutateRoute). Over HTTP/2, a session's reviews in
 * progress are also bounded, reset streams included (stream-limits.ts).
 */
function requestBudget(face: Face, metrics: Metrics, isDraining: () => boolean, isClosing: () => boolean) {
  const { limits, budget, streams, holds } = face;
  const busy = (reply: FastifyReply, what: string) => {
    metrics.rejected.inc({ reason: 'busy' });
    return send(closeAfter(reply.header('retry-after', '1')), 'WIW_BUSY', `${what}; retry`);
  };
  /** The reply when it was answered here, else undefined: the request goes on. */
  return (req: FastifyRequest, reply: FastifyReply): FastifyReply | undefined => {
    const stream = streamOf(req);
    if (isDraining()) {
      // HTTP/2: GOAWAY, streams in progress finish; the client opens its next one elsewhere.
      if (stream) stream.session?.close();
      else void reply.header('connection', 'close');
    }
    // A request on a connection still open as the server closes (kube-apiserver pools them per
    // Service): fastify's own 503 has no Retry-After, and kube-apiserver retries only with one.
    if (isClosing())
      return send(closeAfter(reply.header('retry-after', '1')), 'WIW_CLOSING', 'this replica is shutting down; retry');
    // Only POST takes a body. fastify still reads and parses the body of a DELETE, PUT, PATCH or
    // OPTIONS (to answer its 404), and it would do so outside the budget: refused here, unread.
    if (req.method !== 'POST') return hasBody(req, stream) ? notFound(req, closeAfter(reply)) : undefined;
    const length = Number(req.headers['content-length']);
    if (!Number.isFinite(length))
      return send(closeAfter(reply), 'WIW_LENGTH_REQUIRED', 'an AdmissionReview is sent with a Content-Length');
    if (length > limits.maxRequestBytes) return undefined; // fastify answers 413
    const release = stream && streams ? streams.start(stream) : () => {};
    if (!release) return busy(reply, 'too many reviews in progress on this connection');
    const hold = budget.open(length + REVIEW_OVERHEAD_BYTES, release);
    if (!hold) {
      release();
      return busy(reply, 'too many bytes of reviews in progress');
    }
    holds.set(req.raw, hold);
    const ended = () => hold.ended();
    // HTTP/2: 'finish' only hands the answer to nghttp2, which queues it for a slow reader; the
    // stream closes once its last frame is sent, so the answer is held until then.
    if (stream) stream.once('close', ended);
    else {
      reply.raw.once('close', ended);
      reply.raw.once('finish', ended);
    }
    if (stream && streams) bodyDeadline(req, stream, limits.requestTimeoutMs, streams);
    return undefined;
  };
}

/** HTTP/2 has no request timeout of Node's: a body still arriving after `ms` is cut off, as over HTTP/1.1. */
function bodyDeadline(req: FastifyRequest, stream: ServerHttp2Stream, ms: number, streams: StreamLimiter) {
  const timer = setTimeout(() => streams.cancel(stream), ms);
  timer.unref();
  const clear = () => clearTimeout(timer);
  req.raw.once('end', clear);
  stream.once('close', clear);
}

/** A client that does not take its answer is cut off: answers are not left in memory for it. */
function responseDeadline(face: Face, res: RawResponse, stream: ServerHttp2Stream | undefined) {
  // Over HTTP/2 only the stream goes: the connection carries other clients' reviews.
  const cut = () => (stream && face.streams ? face.streams.cancel(stream) : res.socket?.destroy());
  const timer = setTimeout(cut, face.limits.responseTimeoutMs);
  timer.unref();
  const clear = () => clearTimeout(timer);
  res.once('close', clear);
  res.once('finish', clear);
}

/** POST /mutate: the caller authenticated (with --client-ca-file), the review parsed, the handler's answer sent. */
function mutateRoute(handler: Admit, face: Face, metrics: Metrics, clientCa: string | undefined) {
  return async (req: FastifyRequest, reply: FastifyReply, context: AdmitContext) => {
    if (clientCa && !(req.raw.socket as TLSSocket).authorized) {
      metrics.rejected.inc({ reason: 'unauthenticated' });
      return send(
        reply,
        'WIW_CLIENT_CERTIFICATE_REQUIRED',
        'a client certificate signed by --client-ca-file is required',
      );
    }
    let review;
    try {
      review = parseAdmissionReview(req.body);
    } catch (err) {
      metrics.requests.inc({ kind: 'unknown', operation: 'unknown', result: 'error' });
      return send(reply, 'WIW_BAD_ADMISSION_REVIEW', errorMessage(err));
    }
    const hold = face.holds.get(req.raw);
    // The review's bytes stay held while it runs, even if its client resets the stream meanwhile;
    // a review whose stream is gone already is not worked out at all.
    const done = hold?.working();
    if (hold && !done) return reply.hijack();
    try {
      const decision = await handler(review.request, context);
      // As a buffer (fastify sends it as it is): its size is known, and held until written.
      const answer = Buffer.from(reviewResponse(review.apiVersion, review.request.uid, decision));
      if (hold && !hold.grow(ANSWER_COPIES * answer.length)) {
        metrics.rejected.inc({ reason: 'busy' });
        return send(
          closeAfter(reply.header('retry-after', '1')),
          'WIW_BUSY',
          'too many bytes of reviews in progress to hold this answer; retry',
        );
      }
      return reply.header('content-type', 'application/json; charset=utf-8').send(answer);
    } finally {
      done?.();
    }
  };
}
