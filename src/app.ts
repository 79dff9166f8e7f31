// The HTTP(S) face of admission: routes, the limits that keep a replica inside its memory
// whatever callers send, and one admission handler decorated with metrics, the patch limit and
// the decision log (admission/handler.ts). Listening and lifecycle are the caller's.
import type { TLSSocket } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { httpError, type HttpErrorCode, type WebhookError } from './errors.ts';
import {
  answerDefects,
  decorate,
  limitPatch,
  logDecision,
  measure,
  type Admit,
  type AdmitContext,
} from './admission/handler.ts';
import { parseAdmissionReview, reviewResponse } from './admission/review.ts';
import type { PodReviewObservation } from './clouds/types.ts';
import { clip, DEFAULT_LIMITS, type ServerLimits } from './limits.ts';
import { limitConnections } from './connection-limits.ts';
import type { Metrics } from './metrics.ts';
import { tlsPolicy, type TlsPolicy } from './tls/policy.ts';

export type { Admit, AdmitContext };

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
}

/** Fastify's own error codes, as the catalog's. */
const FASTIFY_CODES: Record<string, HttpErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'WIW_REQUEST_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'WIW_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'WIW_BAD_ADMISSION_REVIEW',
  FST_ERR_CTP_INVALID_JSON_BODY: 'WIW_BAD_ADMISSION_REVIEW',
};

function send(reply: FastifyReply, code: HttpErrorCode, message: string): FastifyReply {
  const { status, body } = httpError(code, message);
  return reply.code(status).send(body);
}

/** The admission HTTP(S) application: routes only; listening and lifecycle are the caller's. */
export function buildApp(options: AppOptions): FastifyInstance {
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const { metrics, log } = options;
  const app = createFastify(options, limits);
  app.addHook('onRequest', requestBudget(limits, metrics, options.isDraining ?? (() => false)));
  app.addHook('onSend', responseDeadline(limits));
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) log.error({ err }, 'request failed');
    if (status === 413) metrics.rejected.inc({ reason: 'too_large' });
    const code = FASTIFY_CODES[err.code ?? ''];
    if (code) return send(reply, code, err.message);
    return reply.code(status).send({ code: status === 500 ? 'WIW_INTERNAL' : err.code, message: err.message });
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    if (options.isReady()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });
  const handler = decorate(
    options.admit,
    logDecision(log),
    measure(metrics, options.observePod),
    limitPatch(limits.maxPatchBytes),
    answerDefects(log),
  );
  const mutate = mutateRoute(handler, metrics, options.clientCa);
  app.post('/mutate', (req, reply) => mutate(req, reply, { path: '/mutate' }));
  app.post<{ Params: { policy: string } }>('/mutate/:policy', (req, reply) => {
    const failurePolicy = FAILURE_POLICIES[req.params.policy];
    if (!failurePolicy)
      return send(
        reply,
        'WIW_NOT_FOUND',
        `no route /mutate/${clip(req.params.policy, 63)}; the webhook serves /mutate, /mutate/fail and /mutate/ignore`,
      );
    return mutate(req, reply, { failurePolicy, path: `/mutate/${req.params.policy}` });
  });
  return app;
}

/** Fastify with the server's limits and TLS, and who gets a connection (connection-limits.ts). */
function createFastify(options: AppOptions, limits: ServerLimits): FastifyInstance {
  const { https, clientCa, tls = tlsPolicy('TLSv1.2') } = options;
  const app = Fastify({
    // One line per decision is logged by the handler; fastify's own per-request lines would double it.
    logger: false,
    bodyLimit: limits.maxRequestBytes,
    https: https
      ? {
          cert: https.cert,
          key: https.key,
          minVersion: tls.minVersion,
          ciphers: tls.ciphers,
          honorCipherOrder: true,
          handshakeTimeout: limits.handshakeTimeoutMs,
          // Node checks the header and request timeouts only this often (default 30 s): a stalled
          // body would otherwise be held twice as long as --request-timeout says.
          connectionsCheckingInterval: 1000,
          // Probes from the kubelet carry no client certificate: /mutate checks it, not the handshake.
          ...(clientCa ? { ca: clientCa, requestCert: true, rejectUnauthorized: false } : {}),
        }
      : null,
    return503OnClosing: true,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;
  app.server.headersTimeout = limits.headersTimeoutMs;
  // Who gets a connection: caps overall and per source, a deadline for the first request.
  limitConnections(app.server, { ...limits, preferAuthenticated: clientCa !== undefined }, (reason) =>
    options.metrics.connectionsClosed.inc({ reason }),
  );
  // Only JSON is an AdmissionReview; fastify answers 415 for any other content type.
  app.removeContentTypeParser('text/plain');
  return app;
}

/**
 * Bodies held at once are bounded: a request that would exceed the budget is turned away before
 * its body is read, so slow or stalled senders cannot pile up memory.
 */
function requestBudget(limits: ServerLimits, metrics: Metrics, isDraining: () => boolean) {
  let inflight = 0;
  return async (req: FastifyRequest, reply: FastifyReply) => {
    if (isDraining()) void reply.header('connection', 'close');
    if (req.method !== 'POST') return;
    const length = Number(req.headers['content-length']);
    if (!Number.isFinite(length))
      return send(
        reply.header('connection', 'close'),
        'WIW_LENGTH_REQUIRED',
        'an AdmissionReview is sent with a Content-Length',
      );
    if (length > limits.maxRequestBytes) return; // fastify answers 413
    if (inflight + length > limits.maxInflightRequestBytes) {
      metrics.rejected.inc({ reason: 'busy' });
      return send(
        reply.header('retry-after', '1').header('connection', 'close'),
        'WIW_BUSY',
        'too many request bytes in flight; retry',
      );
    }
    inflight += length;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      inflight -= length;
    };
    reply.raw.once('close', release);
    reply.raw.once('finish', release);
  };
}

/** A client that does not take its answer is cut off: answers are not left in memory for it. */
function responseDeadline(limits: ServerLimits) {
  return async (_req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const res = reply.raw;
    const timer = setTimeout(() => res.socket?.destroy(), limits.responseTimeoutMs);
    timer.unref();
    res.once('close', () => clearTimeout(timer));
    res.once('finish', () => clearTimeout(timer));
    return payload;
  };
}

/** POST /mutate: the caller authenticated (with --client-ca-file), the review parsed, the handler's answer sent. */
function mutateRoute(handler: Admit, metrics: Metrics, clientCa: string | undefined) {
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
      return send(reply, 'WIW_BAD_ADMISSION_REVIEW', (err as WebhookError).message);
    }
    const decision = await handler(review.request, context);
    return reply
      .header('content-type', 'application/json; charset=utf-8')
      .send(reviewResponse(review.apiVersion, review.request.uid, decision));
  };
}
