// doctor as a person sees it: a progress line on a terminal while a check waits (rewritten in
// place, cleared at the end, absent when not a terminal), each check's time, colours only when
// asked for (a terminal). The checks themselves are in test/e2e/doctor.test.ts.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { progressLine } from '../../src/doctor/progress.ts';
import { duration, exitCode, reportData, reportText, type DoctorReport } from '../../src/doctor/verdicts.ts';

const REPORT: DoctorReport = {
  issuer: 'https://oidc.example.com/cluster-a',
  checks: [
    { id: 'discovery', verdict: 'pass', message: 'served', ms: 12 },
    { id: 'public-discovery', verdict: 'unknown', message: 'timed out', fix: 'check it from outside', ms: 10_004 },
    { id: 'public-jwks', verdict: 'fail', message: 'lacks kid a', fix: 'republish', ms: 3 },
    { id: 'jwks-uri', verdict: 'warn', message: 'elsewhere', ms: 0 },
  ],
};

describe('the text report', () => {
  test('each check ends with its time; no escape codes unless colour is asked for', () => {
    const text = reportText(REPORT);
    assert.match(text, /^ok {3}discovery: served \(12 ms\)$/m);
    assert.match(text, /^\?\? {3}public-discovery: timed out \(10\.0 s\)$/m);
    assert.equal(text.includes('\u001b'), false);
  });

  /** An output stream as util.styleText judges it: a terminal of 256 colours, or a pipe. */
  function output(isTTY: boolean): NodeJS.WritableStream {
    const stream = new Writable({ write: (_chunk, _encoding, done) => done() });
    return Object.assign(stream, { isTTY, getColorDepth: () => 8, hasColors: () => true });
  }
  /** Runs fn with FORCE_COLOR as given (undefined: unset), as a user's shell would have it. */
  function withForceColor<T>(value: string | undefined, fn: () => T): T {
    const saved = process.env.FORCE_COLOR;
    if (value === undefined) delete process.env.FORCE_COLOR;
    else process.env.FORCE_COLOR = value;
    try {
      return fn();
    } finally {
      if (saved === undefined) delete process.env.FORCE_COLOR;
      else process.env.FORCE_COLOR = saved;
    }
  }

  test('colour on a terminal, by util.styleText: each verdict painted, the rest of the line as it was', () => {
    const text = withForceColor(undefined, () => reportText(REPORT, { stream: output(true) }));
    const lines = text.split('\n');
    const ESC = '\u001b';
    assert.equal(lines[1], `${ESC}[32mok  ${ESC}[39m discovery: served (12 ms)`);
    assert.ok(lines[2].startsWith(`${ESC}[35m??  ${ESC}[39m public-discovery`));
    assert.ok(lines.some((l) => l.startsWith(`${ESC}[31mFAIL${ESC}[39m public-jwks`)));
    assert.ok(lines.some((l) => l.startsWith(`${ESC}[33mWARN${ESC}[39m jwks-uri`)));
    assert.equal(text.replaceAll(new RegExp(`${ESC}\\[\\d+m`, 'g'), ''), reportText(REPORT));
  });

  test('no colour into a pipe, unless FORCE_COLOR asks; none with FORCE_COLOR=0', () => {
    assert.equal(
      withForceColor(undefined, () => reportText(REPORT, { stream: output(false) })),
      reportText(REPORT),
    );
    assert.match(
      withForceColor('1', () => reportText(REPORT, { stream: output(false) })),
      new RegExp(`${'\u001b'}\\[35m\\?\\?`),
    );
    assert.equal(
      withForceColor('0', () => reportText(REPORT, { stream: output(true) })),
      reportText(REPORT),
    );
  });

  test('data for -o json and -o yaml: each time in ms; incomplete is exit 3, problems 1, ok 0', () => {
    const data = reportData(REPORT);
    assert.deepEqual(
      data.checks.map((c) => c.ms),
      [12, 10_004, 3, 0],
    );
    assert.equal(data.result, 'problems');
    assert.equal(data.exitCode, 1);
    const incomplete = { ...REPORT, checks: REPORT.checks.filter((c) => c.verdict !== 'fail') };
    assert.deepEqual([reportData(incomplete).result, exitCode(incomplete)], ['incomplete', 3]);
    const ok = { ...REPORT, checks: REPORT.checks.filter((c) => c.verdict === 'pass') };
    assert.deepEqual([reportData(ok).result, exitCode(ok)], ['ok', 0]);
  });

  test('duration: ms below a second, tenths of seconds above', () => {
    assert.equal(duration(999), '999 ms');
    assert.equal(duration(1049), '1.0 s');
    assert.equal(duration(12_345), '12.3 s');
  });
});

describe('the progress line', () => {
  function terminal(isTTY: boolean, columns = 60) {
    const writes: string[] = [];
    return { writes, stream: { isTTY, columns, write: (s: string) => void writes.push(s) } };
  }

  test('on a terminal: what doctor waits for and for how long, rewritten in place, cleared when done', () => {
    const { writes, stream } = terminal(true);
    let now = 1000;
    const p = progressLine(stream, 60_000, () => now);
    p.update('the public JWKS (https://oidc.example.com/cluster-a/openid/v1/jwks)');
    now += 2500;
    p.update('a token for apps/reader');
    p.done();
    assert.equal(writes.length, 3);
    assert.ok(writes.every((w) => w.startsWith('\r\x1b[2K')));
    assert.ok(writes[0].startsWith('\r\x1b[2Kdoctor: waiting for the public JWKS (https://'));
    assert.ok(writes[0].endsWith('… (0.0 s)'), 'what is cut to the terminal, visibly; the time stays');
    assert.equal(writes[0].length - '\r\x1b[2K'.length, 59, 'fits the terminal');
    assert.equal(writes[1], '\r\x1b[2Kdoctor: waiting for a token for apps/reader (0.0 s)');
    assert.equal(writes[2], '\r\x1b[2K');
  });

  test('the time so far is redrawn while a read waits', async () => {
    const { writes, stream } = terminal(true, 200);
    let now = 0;
    const p = progressLine(stream, 5, () => now);
    p.update('anonymous discovery at the API server');
    now = 3200;
    await new Promise<void>((done) => {
      const poll = setInterval(() => {
        if (writes.some((w) => w.includes('(3.2 s)'))) {
          clearInterval(poll);
          done();
        }
      }, 1);
    });
    p.done();
    assert.ok(writes.some((w) => w.endsWith('anonymous discovery at the API server (3.2 s)')));
  });

  test('not a terminal: nothing is written', () => {
    const { writes, stream } = terminal(false);
    const p = progressLine(stream);
    p.update('anything');
    p.done();
    assert.deepEqual(writes, []);
  });
});
