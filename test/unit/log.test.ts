// The logger's error serializer: errors are logged as `{ err }` with type, message and stack, and
// nothing of an HTTP response a client error carries (client-node's ApiException keeps the body
// and headers as fields and writes both into its message and stack).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException } from '@kubernetes/client-node';
import { logDecision } from '../../src/admission/handler.ts';
import { WebhookError } from '../../src/errors.ts';
import { BATCH_BYTES, batchedDestination, createLogger, DECISION_MESSAGE, safeMessage } from '../../src/log.ts';
import { until } from '../harness/until.ts';
import { ROLE_ARN } from '../support/identities.ts';

const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dGVhbS1hOmFwcCJ9.c2lnbmF0dXJl';
const DATA = Buffer.from(JSON.stringify({ roleARN: ROLE_ARN })).toString('base64');
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

describe('writing stdout', () => {
  /** A logger over batchedDestination on a temporary file, and the lines the file holds. */
  function onFile(periodMs: number) {
    const dir = mkdtempSync(join(tmpdir(), 'wiw-log-'));
    const file = join(dir, 'out.log');
    const fd = openSync(file, 'w');
    const log = createLogger('info', batchedDestination(fd, periodMs));
    const read = () =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).n as number);
    return { log, read, done: () => rmSync(dir, { recursive: true, force: true }) };
  }

  test('decision lines go out BATCH_BYTES at a time; any other line at once, after them', async () => {
    const { log, read, done } = onFile(60_000); // no periodic flush within the test
    try {
      for (const n of [1, 2, 3]) log.info({ n }, DECISION_MESSAGE);
      await sleep(200);
      assert.deepEqual(read(), [], 'three short decision lines wait for more');
      log.info({ n: 4 }, 'serving the new certificate');
      await until('the other line and those before it', () => (read().length === 4 ? true : undefined), 2000);
      assert.deepEqual(read(), [1, 2, 3, 4], 'in order');
    } finally {
      done();
    }
    // On a destination of its own (after a flush, what is buffered when that write ends goes too).
    // Lines of some 130 bytes: half a batch waits, a whole one goes out.
    const batch = onFile(60_000);
    try {
      const lines = Math.ceil(BATCH_BYTES / 130);
      for (let n = 0; n < lines / 2; n++) batch.log.info({ n, padding: 'x'.repeat(60) }, DECISION_MESSAGE);
      await sleep(200);
      assert.equal(batch.read().length, 0, 'half a batch of decision lines waits');
      for (let n = lines / 2; n < 2 * lines; n++) batch.log.info({ n, padding: 'x'.repeat(60) }, DECISION_MESSAGE);
      await until('a batch of decision lines', () => (batch.read().length > lines / 2 ? true : undefined), 2000);
    } finally {
      batch.done();
    }
  });

  test('no timer runs while nothing waits: the first decision line to wait arms one, for all that wait with it, cancelled when they go', async (t) => {
    const PERIOD = 4321; // a delay no other timer of the test has
    const armed = (m: { mock: { calls: { arguments: unknown[] }[] } }) =>
      m.mock.calls.filter((c) => c.arguments[1] === PERIOD).length;
    const intervals = t.mock.method(globalThis, 'setInterval');
    const timeouts = t.mock.method(globalThis, 'setTimeout');
    const { log, read, done } = onFile(PERIOD);
    try {
      log.info({ n: 0 }, 'started');
      await until('the line at once', () => (read().length === 1 ? true : undefined), 2000);
      assert.equal(armed(intervals), 0, 'no periodic flush (sonic-boom wakes an idle process for it)');
      assert.equal(armed(timeouts), 0, 'no timer while no decision line waits');
      for (const n of [1, 2, 3]) log.info({ n }, DECISION_MESSAGE);
      assert.equal(armed(timeouts), 1, 'one timer for the lines that wait');
      const timer = timeouts.mock.calls.find((c) => c.arguments[1] === PERIOD)?.result as NodeJS.Timeout;
      assert.equal(timer.hasRef(), false, 'the timer keeps no process alive');
      // A line that goes at once takes the waiting ones with it: their timer is cancelled.
      const cleared = t.mock.method(globalThis, 'clearTimeout');
      log.info({ n: 4 }, 'serving the new certificate');
      assert.ok(
        cleared.mock.calls.some((c) => c.arguments[0] === timer),
        'the timer of the lines that went is cleared',
      );
      await until('all five lines', () => (read().length === 5 ? true : undefined), 2000);
    } finally {
      done();
    }
  });

  test('a lone decision line goes out after the period', async () => {
    const { log, read, done } = onFile(100);
    try {
      log.info({ n: 1 }, DECISION_MESSAGE);
      await until('the periodic flush', () => (read().length === 1 ? true : undefined), 2000);
    } finally {
      done();
    }
  });
});

describe('the decision line', () => {
  test('is the line the redacting logger writes for the same fields, and holds no field a redaction path names', async () => {
    // logDecision writes through a child without the redaction list (its fields are scalars chosen
    // there): the bytes must be those the root logger writes, for a decision with every field set.
    const { log, lines } = recorded();
    const request = {
      uid: 'c0ffee00-0000-4000-8000-000000000001',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      operation: 'CREATE' as const,
      namespace: 'team-a',
      object: { metadata: { generateName: 'app-', annotations: { token: TOKEN } }, data: { token: TOKEN } },
    };
    const admit = logDecision(log)(async () => ({
      allowed: false,
      injected: ['aws'],
      denial: { reason: 'InvalidRoleArn', status: 403, message: 'm' },
    }));
    await admit(request, { path: '/mutate' });
    const durationMs = Number(/"durationMs":([\d.]+)/.exec(lines[0])?.[1]);
    const fields = {
      uid: request.uid,
      kind: 'Pod',
      operation: 'CREATE',
      namespace: 'team-a',
      name: 'app-',
      allowed: false,
      providers: ['aws'],
      reason: 'InvalidRoleArn',
      durationMs,
    };
    log.info(fields, DECISION_MESSAGE);
    assert.equal(lines[1].replace(/"time":\d+/, ''), lines[0].replace(/"time":\d+/, ''));
    assertClean(lines.join('\n'));
  });
});
