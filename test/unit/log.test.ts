// The logger's error serializer: errors are logged as `{ err }` with type, message and stack, and
// nothing of an HTTP response a client error carries (client-node's ApiException keeps the body
// and headers as fields and writes both into its message and stack).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiException } from '@kubernetes/client-node';
import { WebhookError } from '../../src/errors.ts';
import { createLogger, safeMessage } from '../../src/log.ts';

const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dGVhbS1hOmFwcCJ9.c2lnbmF0dXJl';
const DATA = Buffer.from('{"roleARN":"arn:aws:iam::111122223333:role/s3-reader"}').toString('base64');
/** A response body that holds a Secret, as a proxy or an unexpected status could send back. */
const SECRET_BODY = {
  kind: 'Secret',
  metadata: { name: 'aws-credentials', namespace: 'team-a' },
  data: { token: Buffer.from(TOKEN).toString('base64'), config: DATA },
  stringData: { token: TOKEN },
};
const STATUS_BODY = {
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  reason: 'Conflict',
  code: 409,
  message: 'Operation cannot be fulfilled on secrets "aws-credentials": the object has been modified',
};
const HEADERS = { 'audit-id': 'a1b2', 'set-cookie': `session=${TOKEN}` };

function recorded() {
  const lines: string[] = [];
  const log = createLogger('debug', { write: (line: string) => void lines.push(line) });
  return { log, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** Fails when any trace of the token, the Secret's data or the headers is in the text. */
function assertClean(text: string) {
  for (const needle of [TOKEN, Buffer.from(TOKEN).toString('base64'), DATA, 'set-cookie', 'audit-id', 'Body:']) {
    assert.equal(text.includes(needle), false, `the log line contains ${needle.slice(0, 20)}…:\n${text}`);
  }
}

describe('logging errors', () => {
  test('a message shown to a user (a denial) of an ApiException holds the Status message, not the body or headers', () => {
    const err = new ApiException(500, 'Unknown API Status Code!', JSON.stringify(SECRET_BODY), HEADERS);
    const shown = safeMessage(err);
    assertClean(shown);
    assert.equal(shown, 'HTTP 500: the response body is not logged');
    assert.equal(safeMessage(new Error('connect ECONNREFUSED')), 'connect ECONNREFUSED');
  });

  test('an ApiException is logged as its status and the API server message, without body or headers', () => {
    const { log, lines, parsed } = recorded();
    const err = new ApiException(409, 'Unknown API Status Code!', JSON.stringify(STATUS_BODY), HEADERS);
    // The library's own message and stack hold the body and the headers: what the serializer removes.
    assert.ok(err.message.includes('Body:') && err.stack?.includes('set-cookie'));
    log.warn({ secret: 'team-a/aws-credentials', err }, 'writing the token failed');
    assertClean(lines[0]);
    const { err: logged } = parsed()[0] as { err: Record<string, unknown> };
    assert.equal(logged.type, 'ApiException');
    assert.equal(logged.code, 409);
    assert.equal(
      logged.message,
      'HTTP 409 Conflict: Operation cannot be fulfilled on secrets "aws-credentials": the object has been modified',
    );
    assert.match(String(logged.stack), /^Error: HTTP 409 Conflict: Operation cannot be fulfilled[^\n]*\n\s+at /);
    assert.equal('body' in logged || 'headers' in logged, false);
  });

  test('a body that is not a Status (here a Secret) is not logged at all', () => {
    const { log, lines, parsed } = recorded();
    log.error({ err: new ApiException(200, 'Unknown API Status Code!', SECRET_BODY, HEADERS) }, 'unexpected answer');
    assertClean(lines[0]);
    const { err: logged } = parsed()[0] as { err: Record<string, unknown> };
    assert.equal(logged.message, 'HTTP 200: the response body is not logged');
  });

  test('the same holds for an ApiException that is the cause of another error, or one of an AggregateError', () => {
    const { log, lines, parsed } = recorded();
    const api = new ApiException(403, 'Unknown API Status Code!', SECRET_BODY, HEADERS);
    log.warn({ err: new WebhookError('WIW_BAD_INPUT', 'reading failed', { cause: api }) }, 'caused');
    log.warn({ err: new AggregateError([api], 'all failed') }, 'aggregate');
    log.warn(new WebhookError('WIW_BAD_INPUT', 'as the first argument', { cause: api }), 'first argument');
    assert.equal(lines.length, 3);
    for (const line of lines) assertClean(line);
    const [caused, aggregate, first] = parsed().map((l) => l.err as Record<string, unknown>);
    assert.equal(caused.message, 'reading failed: HTTP 403: the response body is not logged');
    assert.equal(caused.code, 'WIW_BAD_INPUT');
    assert.match(String(caused.stack), /caused by: Error: HTTP 403: the response body is not logged\n\s+at /);
    assert.equal(
      (aggregate.aggregateErrors as { message: string }[])[0].message,
      'HTTP 403: the response body is not logged',
    );
    assert.equal(first.message, 'as the first argument: HTTP 403: the response body is not logged');
  });

  test('other errors are logged whole: type, message, stack and their own fields', () => {
    const { log, parsed } = recorded();
    const err = new WebhookError('WIW_SERVICEACCOUNT_UNAVAILABLE', 'ServiceAccount team-b/shared cannot be read');
    log.warn({ err }, 'cannot read');
    const logged = parsed()[0].err as Record<string, unknown>;
    assert.equal(logged.type, 'WebhookError');
    assert.equal(logged.code, 'WIW_SERVICEACCOUNT_UNAVAILABLE');
    assert.equal(logged.message, 'ServiceAccount team-b/shared cannot be read');
    assert.equal(logged.stack, err.stack);
  });
});

describe('--log-format', () => {
  const line = (format?: 'numeric' | 'named', level = 'warn') => {
    const lines: string[] = [];
    const log = createLogger('debug', { write: (l: string) => void lines.push(l) }, format);
    (log as unknown as Record<string, (o: object, m: string) => void>)[level]({ token: TOKEN }, 'hello');
    return JSON.parse(lines[0]) as Record<string, unknown>;
  };

  test("numeric (the default): pino's level numbers and epoch-millisecond time", () => {
    for (const entry of [line(), line('numeric')]) {
      assert.equal(entry.level, 40);
      assert.equal(typeof entry.time, 'number');
      assert.ok(Math.abs((entry.time as number) - Date.now()) < 60_000);
    }
  });

  test('named: "level":"info" and an ISO 8601 UTC time; redaction as before', () => {
    for (const [level, name] of [
      ['debug', 'debug'],
      ['info', 'info'],
      ['warn', 'warn'],
      ['error', 'error'],
    ]) {
      const entry = line('named', level);
      assert.equal(entry.level, name);
      assert.match(String(entry.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(Math.abs(Date.parse(String(entry.time)) - Date.now()) < 60_000);
      assert.equal(entry.token, '[redacted]');
      assert.equal(entry.name, 'workload-identity-webhook');
    }
  });
});
