// One admission handler, and the cross-cutting concerns as its decorators (after undici's
// interceptors and the AWS peer's middleware.go): each takes the next handler and returns one
// that does its part around it. The HTTP face (app.ts) parses, calls the decorated handler and
// sends what it answers.
import type { Logger } from 'pino';
import type { PodReviewObservation } from '../clouds/types.ts';
import { denial, errorMessage } from '../errors.ts';
import { clip } from '../text.ts';
import { DECISION_MESSAGE } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { denied, encodePatch, type AdmissionRequest, type Decision } from './review.ts';

/**
 * The webhook entry that called: `/mutate/fail` and `/mutate/ignore` name its failure policy (the
 * chart gives system namespaces their own entry); plain `/mutate` leaves the default.
 */
export interface AdmitContext {
  failurePolicy?: 'Fail' | 'Ignore';
  /** The route, for the peers' metrics. */
  path: string;
}

export type Admit = (request: AdmissionRequest, context: AdmitContext) => Promise<Decision>;
type Decorator = (next: Admit) => Admit;

/** The handler wrapped by the decorators, the first outermost. */
export function decorate(admit: Admit, ...decorators: Decorator[]): Admit {
  return decorators.reduceRight((next, decorator) => decorator(next), admit);
}

/** A defect answers the review with a denial naming it, never an opaque HTTP 500. */
export function answerDefects(log: Logger): Decorator {
  return (next) => async (request, context) => {
    try {
      return await next(request, context);
    } catch (err) {
      log.error({ uid: clip(request.uid), err }, 'admission failed');
      return denied(denial('InternalError', `workload-identity-webhook failed on this object: ${errorMessage(err)}`));
    }
  };
}

/** The patch is serialised here, once; one larger than the limit denies the object instead. */
export function limitPatch(maxPatchBytes: number): Decorator {
  return (next) => async (request, context) => {
    const decision = await next(request, context);
    if (!decision.patch?.length) return decision;
    const encoded = encodePatch(decision.patch);
    if (encoded.bytes <= maxPatchBytes) return { ...decision, encodedPatch: encoded };
    return denied(
      denial(
        'TooLarge',
        `the identity would add ${encoded.bytes} bytes of JSON Patch to this ${request.kind.kind}, more than the webhook's limit of ${maxPatchBytes}; split the workload into smaller Pods`,
      ),
    );
  };
}

/** Object kinds as a metric label: a closed set, whatever a caller puts in request.kind. */
const KIND_LABELS = new Set(['Pod', 'Secret']);

/** Our metrics, and each Pod CREATE for the peers' metrics. */
export function measure(metrics: Metrics, observePod?: (review: PodReviewObservation) => void): Decorator {
  return (next) => async (request, context) => {
    const started = process.hrtime.bigint();
    const decision = await next(request, context);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const kind = KIND_LABELS.has(request.kind.kind) ? request.kind.kind : 'other';
    const result = !decision.allowed ? 'denied' : decision.patch?.length ? 'mutated' : 'allowed';
    metrics.requests.inc({ kind, operation: request.operation, result });
    metrics.latency.observe({ kind }, seconds);
    for (const provider of decision.injected ?? []) metrics.injections.inc({ provider });
    for (const labels of decision.shadowed ?? []) metrics.shadowed.inc(labels);
    if (decision.denial) metrics.denials.inc({ reason: decision.denial.reason });
    if (kind === 'Pod' && request.operation === 'CREATE')
      observePod?.({
        path: context.path,
        code: 200,
        seconds,
        namespace: request.namespace ?? '',
        labels: (request.object as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels,
        injections: decision.injections ?? [],
      });
    return decision;
  };
}

/**
 * One log line per decision: who, what, the verdict; never the object or a token. Its fields are
 * the scalars named here, never an object of the review, so the redaction list (log.ts: a second
 * guard for lines that carry objects) cannot match them: the line is written without it, the same
 * bytes for a quarter of the cost (the redaction took three quarters of a decision line's time).
 */
export function logDecision(log: Logger): Decorator {
  const lines = log.child({}, { redact: [] });
  return (next) => async (request, context) => {
    const started = process.hrtime.bigint();
    const decision = await next(request, context);
    const obj = request.object as { metadata?: { name?: string; generateName?: string } } | undefined;
    lines.info(
      {
        uid: clip(request.uid),
        kind: clip(request.kind.kind, 63),
        operation: request.operation,
        namespace: clip(request.namespace),
        name: clip(request.name || obj?.metadata?.name || obj?.metadata?.generateName),
        allowed: decision.allowed,
        providers: decision.injected,
        reason: decision.denial?.reason,
        durationMs: Math.round(Number(process.hrtime.bigint() - started) / 1e3) / 1e3,
      },
      DECISION_MESSAGE,
    );
    return decision;
  };
}
