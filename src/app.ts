import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { denial, type WebhookError } from './errors.ts';
import { parseAdmissionReview, reviewResponse, type AdmissionRequest, type Decision } from './admission/review.ts';
import { clip, DEFAULT_LIMITS, type ServerLimits } from './limits.ts';
import type { Metrics } from './metrics.ts';
import type { PodReviewObservation } from './clouds/types.ts';
import { tlsPolicy, type TlsPolicy } from './tls/policy.ts';

/**
 * The failure policy of the webhook entry that called: `/mutate/fail` and `/mutate/ignore` name
 * it (the chart gives system namespaces their own entry); plain `/mutate` leaves the default.
 */
export interface AdmitContext {
  failurePolicy?: 'Fail' | 'Ignore';
}

export type Admit = (request: AdmissionRequest, context: AdmitContext) => Promise<Decision>;

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

const FIRST_REQUEST_SEEN = Symbol('first request seen');

declare module 'node:net' {
  interface Socket {
    [FIRST_REQUEST_SEEN]?: boolean;
  }
}

/** Object kinds as a metric label: a closed set, whatever a caller puts in request.kind. */
const KIND_LABELS = new Set(['Pod', 'Secret']);

/** The admission HTTP(S) application: routes only; listening and lifecycle are the caller's. */
export function buildApp({
  https,
  log,
  metrics,
  admit,
  isReady,
  isDraining = () => false,
  limits: given,
  tls = tlsPolicy('TLSv1.2'),
  clientCa,
  observePod,
}: AppOptions): FastifyInstance {
  const limits: ServerLimits = { ...DEFAULT_LIMITS, ...given };
  const app = Fastify({
    // One line per decision is logged below; fastify's own per-request lines would double it.
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
  app.server.maxConnections = limits.maxConnections;
  app.server.headersTimeout = limits.headersTimeoutMs;
  // Node's header and request timeouts start with a request: a connection that never sends one
  // would stay open for good. It gets the header timeout to send its first request.
  app.server.on(https ? 'secureConnection' : 'connection', (socket: Socket) => {
    socket.setTimeout(limits.headersTimeoutMs, () => socket.destroy());
  });

  // Only JSON is an AdmissionReview; fastify answers 415 for any other content type.
  app.removeContentTypeParser('text/plain');

  // Bodies held at once are bounded: a request that would exceed the budget is turned away
  // before its body is read, so slow or stalled senders cannot pile up memory.
  let inflight = 0;
  app.addHook('onRequest', async (req, reply) => {
    // From the first request on, Node's own timeouts govern the connection (keep-alive included).
    const socket = req.raw.socket;
    // (fastify's inject() hands a socket stand-in without timers)
    if (!socket[FIRST_REQUEST_SEEN] && typeof socket.setTimeout === 'function') {
      socket[FIRST_REQUEST_SEEN] = true;
      socket.setTimeout(0);
    }
    if (isDraining()) void reply.header('connection', 'close');
    if (req.method !== 'POST') return;
    const length = Number(req.headers['content-length']);
    if (!Number.isFinite(length)) {
      return reply
        .code(411)
        .header('connection', 'close')
        .send({ code: 'WIW_LENGTH_REQUIRED', message: 'an AdmissionReview is sent with a Content-Length' });
    }
    if (length > limits.maxRequestBytes) return; // fastify answers 413
    if (inflight + length > limits.maxInflightRequestBytes) {
      metrics.rejected.inc({ reason: 'busy' });
      return reply
        .code(503)
        .header('retry-after', '1')
        .header('connection', 'close')
        .send({ code: 'WIW_BUSY', message: 'too many request bytes in flight; retry' });
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
  });

  // A client that does not take its answer is cut off: answers are not left in memory for it.
  app.addHook('onSend', async (_req, reply, payload) => {
    const res = reply.raw;
    const timer = setTimeout(() => res.socket?.destroy(), limits.responseTimeoutMs);
    timer.unref();
    res.once('close', () => clearTimeout(timer));
    res.once('finish', () => clearTimeout(timer));
    return payload;
  });

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) log.error({ err }, 'request failed');
    if (status === 413) metrics.rejected.inc({ reason: 'too_large' });
    void reply.code(status).send({ code: err.code ?? 'WIW_INTERNAL', message: err.message });
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    if (isReady()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });

  const mutate = async (req: FastifyRequest, reply: FastifyReply, context: AdmitContext) => {
    const started = process.hrtime.bigint();
    if (clientCa && !(req.raw.socket as TLSSocket).authorized) {
      metrics.rejected.inc({ reason: 'unauthenticated' });
      return reply.code(401).send({
        code: 'WIW_CLIENT_CERTIFICATE_REQUIRED',
        message: 'a client certificate signed by --client-ca-file is required',
      });
    }
    let review;
    try {
      review = parseAdmissionReview(req.body);
    } catch (err) {
      metrics.requests.inc({ kind: 'unknown', operation: 'unknown', result: 'error' });
      const e = err as WebhookError;
      return reply.code(400).send({ code: e.code, message: e.message });
    }
    const { request } = review;
    const kind = KIND_LABELS.has(request.kind.kind) ? request.kind.kind : 'other';
    let decision: Decision;
    try {
      decision = await admit(request, context);
    } catch (err) {
      // A defect must not take Pod creation down with an opaque 500: answer the review.
      log.error({ uid: clip(request.uid), err }, 'admission failed');
      decision = {
        allowed: false,
        denial: denial('InternalError', `workload-identity-webhook failed on this object: ${(err as Error).message}`),
      };
    }
    let body = reviewResponse(review.apiVersion, request.uid, decision);
    if (body.patchBytes > limits.maxPatchBytes) {
      decision = {
        allowed: false,
        denial: denial(
          'TooLarge',
          `the identity would add ${body.patchBytes} bytes of JSON Patch to this ${request.kind.kind}, more than the webhook's limit of ${limits.maxPatchBytes}; split the workload into smaller Pods`,
        ),
      };
      body = reviewResponse(review.apiVersion, request.uid, decision);
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const result = !decision.allowed ? 'denied' : decision.patch && decision.patch.length > 0 ? 'mutated' : 'allowed';
    metrics.requests.inc({ kind, operation: request.operation, result });
    metrics.latency.observe({ kind }, seconds);
    if (decision.injected) for (const provider of decision.injected) metrics.injections.inc({ provider });
    if (request.kind.kind === 'Pod' && request.operation === 'CREATE') {
      observePod?.({
        path: req.url.split('?')[0],
        code: 200,
        seconds,
        namespace: request.namespace ?? '',
        labels: (request.object as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels,
        injections: decision.injections ?? [],
      });
    }
    if (decision.denial) metrics.denials.inc({ reason: decision.denial.reason });
    const obj = request.object as { metadata?: { name?: string; generateName?: string } } | undefined;
    log.info(
      {
        uid: clip(request.uid),
        kind: clip(request.kind.kind, 63),
        operation: request.operation,
        namespace: clip(request.namespace),
        name: clip(request.name || obj?.metadata?.name || obj?.metadata?.generateName),
        allowed: decision.allowed,
        providers: decision.injected,
        reason: decision.denial?.reason,
        durationMs: Math.round(seconds * 1e6) / 1000,
      },
      'admission',
    );
    return reply.header('content-type', 'application/json; charset=utf-8').send(body.json);
  };
  app.post('/mutate', (req, reply) => mutate(req, reply, {}));
  app.post<{ Params: { policy: string } }>('/mutate/:policy', (req, reply) => {
    const failurePolicy = FAILURE_POLICIES[req.params.policy];
    if (!failurePolicy)
      return reply.code(404).send({
        code: 'WIW_NOT_FOUND',
        message: `no route /mutate/${clip(req.params.policy, 63)}; the webhook serves /mutate, /mutate/fail and /mutate/ignore`,
      });
    return mutate(req, reply, { failurePolicy });
  });

  return app;
}
