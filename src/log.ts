import pino, { type Logger } from 'pino';

/**
 * JSON lines on stdout. Admission objects are never logged whole: a Secret's data or a token
 * must not reach a log, so the redaction list is a second guard, not the first.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { name: 'workload-identity-webhook' },
    redact: { paths: ['token', 'data', 'stringData', '*.token', '*.data', '*.stringData'], censor: '[redacted]' },
  });
}
