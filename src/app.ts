import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { WebhookError } from './errors.ts';
import { parseAdmissionReview, reviewResponse, type AdmissionRequest, type Decision } from './admission/review.ts';
import type { Metrics } from './metrics.ts';

export type Admit = (request: AdmissionRequest) => Decision | Promise<Decision>;

export interface AppOptions {
  https: { cert: string; key: string } | null;
  log: Logger;
  metrics: Metrics;
  admit: Admit;
  /** /readyz: TLS loaded, caches synced, not draining. */
  isReady: () => boolean;
}

/** kube-apiserver caps bodies at 3 MiB and an UPDATE carries two objects. */
export const BODY_LIMIT = 16 * 1024 * 1024;

/** The admission HTTP(S) application: routes only; listening and lifecycle are the caller's. */
export function buildApp({ https, log, metrics, admit, isReady }: AppOptions): FastifyInstance {
  const app = Fastify({
    // One line per decision is logged below; fastify's own per-request lines would double it.
    logger: false,
    bodyLimit: BODY_LIMIT,
    https: https ? { cert: https.cert, key: https.key, minVersion: 'TLSv1.2' } : null,
    return503OnClosing: true,
    keepAliveTimeout: 75_000,
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;

  // Only JSON is an AdmissionReview; fastify answers 415 for any other content type.
  app.removeContentTypeParser('text/plain');

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) log.error({ err: err.message, code: err.code }, 'request failed');
    void reply.code(status).send({ code: err.code ?? 'WIW_INTERNAL', message: err.message });
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    if (isReady()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });

  app.post('/mutate', async (req, reply) => {
    const started = process.hrtime.bigint();
    let review;
    try {
      review = parseAdmissionReview(req.body);
    } catch (err) {
      metrics.requests.inc({ kind: 'unknown', operation: 'unknown', result: 'error' });
      const e = err as WebhookError;
      return reply.code(400).send({ code: e.code, message: e.message });
    }
    const { request } = review;
    const kind = request.kind.kind;
    let decision: Decision;
    try {
      decision = await admit(request);
    } catch (err) {
      // A defect must not take Pod creation down with an opaque 500: answer the review.
      log.error({ uid: request.uid, err: (err as Error).stack }, 'admission failed');
      decision = {
        allowed: false,
        denial: { reason: 'InternalError', status: 400, message: `workload-identity-webhook failed on this object: ${(err as Error).message}` },
      };
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const result = !decision.allowed ? 'denied' : decision.patch && decision.patch.length > 0 ? 'mutated' : 'allowed';
    metrics.requests.inc({ kind, operation: request.operation, result });
    metrics.latency.observe({ kind }, seconds);
    if (decision.injected) for (const provider of decision.injected) metrics.injections.inc({ provider });
    if (decision.denial) metrics.denials.inc({ reason: decision.denial.reason });
    const obj = request.object as { metadata?: { name?: string; generateName?: string } } | undefined;
    log.info(
      {
        uid: request.uid,
        kind,
        operation: request.operation,
        namespace: request.namespace,
        name: request.name || obj?.metadata?.name || obj?.metadata?.generateName,
        allowed: decision.allowed,
        providers: decision.injected,
        reason: decision.denial?.reason,
        durationMs: Math.round(seconds * 1e6) / 1000,
      },
      'admission',
    );
    return reply.send(reviewResponse(review.apiVersion, request.uid, decision));
  });

  return app;
}
