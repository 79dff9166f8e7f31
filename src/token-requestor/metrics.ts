import { Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics } from '../process-metrics.ts';

export function createRequestorMetrics() {
  const registry = new Registry();
  // Standard process_* and nodejs_* names, as the webhook's; its own metrics keep the
  // wiw_token_requestor_ prefix, which tells them from the webhook's wiw_* in one query.
  collectProcessMetrics(registry);
  return {
    registry,
    leader: new Gauge({
      name: 'wiw_token_requestor_leader',
      help: '1 while this instance holds the Lease and writes tokens',
      registers: [registry],
    }),
    secrets: new Gauge({
      name: 'wiw_token_requestor_secrets',
      help: 'Labelled Secrets tracked',
      registers: [registry],
    }),
    issued: new Counter({
      name: 'wiw_token_requestor_tokens_issued_total',
      help: 'Tokens requested and written, by provider and reason (missing, due, forced, subject, audience, lifetime, unreadable)',
      labelNames: ['provider', 'reason'] as const,
      registers: [registry],
    }),
    refused: new Counter({
      name: 'wiw_token_requestor_refusals_total',
      help: 'Secrets given no token because the webhook would refuse them, by denial reason',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    failures: new Counter({
      name: 'wiw_token_requestor_failures_total',
      help: 'Failed steps, by stage (serviceaccount, tokenrequest, write)',
      labelNames: ['stage'] as const,
      registers: [registry],
    }),
  };
}

export type RequestorMetrics = ReturnType<typeof createRequestorMetrics>;
