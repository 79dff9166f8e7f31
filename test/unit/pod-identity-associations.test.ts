// The EKS Pod Identity association file is reloaded when it changes, as the AWS peer watches it.
import { test } from 'node:test';
import { ConfigError } from '../../src/errors.ts';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { parseAssociations, PodIdentityAssociations } from '../../src/clouds/aws/pod-identity-associations.ts';
import { roleArn } from '../support/identities.ts';

/** A logger whose messages resolve waiters: the test waits for the reload, never for time. */
function recordingLogger() {
  const waiters: { msg: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      const line = JSON.parse(String(chunk));
      for (const w of waiters.splice(0)) {
        if (line.msg === w.msg) w.resolve(line);
        else waiters.push(w);
      }
      done();
    },
  });
  return {
    log: pino({ level: 'info' }, stream),
    next: (msg: string) => new Promise<Record<string, unknown>>((resolve) => waiters.push({ msg, resolve })),
  };
}

const doc = (...pairs: [string, string][]) =>
  JSON.stringify({ identities: pairs.map(([namespace, serviceAccount]) => ({ namespace, serviceAccount })) });

test('a changed association file takes effect; a broken one keeps the associations in force', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-associations-'));
  const file = join(dir, 'associations.json');
  writeFileSync(file, doc(['a', 'one']));
  const associations = PodIdentityAssociations.read(file);
  const { log, next } = recordingLogger();
  const stop = associations.watch(log);
  try {
    assert.equal(associations.has('a', 'one'), true);

    // Replaced whole, as a ConfigMap update swaps the file.
    let reloaded = next('pod identity associations reloaded');
    writeFileSync(join(dir, 'tmp'), doc(['a', 'two'], ['b', 'three']));
    renameSync(join(dir, 'tmp'), file);
    assert.equal((await reloaded).associations, 2);
    assert.equal(associations.has('a', 'one'), false);
    assert.equal(associations.has('b', 'three'), true);

    const kept = next('pod identity associations not reloaded; keeping the ones in force');
    writeFileSync(file, '{"identities": [');
    assert.match(String((await kept).err), /not JSON/);
    assert.equal(associations.has('b', 'three'), true);

    reloaded = next('pod identity associations reloaded');
    writeFileSync(file, '');
    assert.equal((await reloaded).associations, 0);
    assert.equal(associations.has('b', 'three'), false);
  } finally {
    stop();
  }
});

test('members the peer ignores are reported, not silently dropped', () => {
  const parsed = parseAssociations('{"identities":[{"namespace":"a","serviceAccount":"b","tags":"x"}],"v":1}');
  assert.deepEqual([...parsed.keys.keys()], ['a/b']);
  assert.deepEqual(parsed.ignored, ['v', 'identities[0].tags']);
  assert.throws(
    () => parseAssociations('[]'),
    (err: Error) => {
      assert.ok(err instanceof ConfigError, 'a configuration error, as every start-up problem');
      return /not an object; expected \{"identities"/.test(err.message);
    },
  );
  assert.throws(() => parseAssociations('{"identities":["a/b"]}'), /identities\[0\] is not an object/);
});

test("an entry's roleArn (ours; the peer ignores it) is read, and refused unless it is an IAM role ARN", () => {
  const role = roleArn('reader');
  const parsed = parseAssociations(
    JSON.stringify({
      identities: [
        { namespace: 'a', serviceAccount: 'b', roleArn: role },
        { namespace: 'a', serviceAccount: 'c' },
      ],
    }),
  );
  assert.deepEqual(new PodIdentityAssociations('f', parsed).entries(), [
    { namespace: 'a', serviceAccount: 'b', roleArn: role },
    { namespace: 'a', serviceAccount: 'c' },
  ]);
  assert.deepEqual(parsed.ignored, []);
  for (const bad of ['x', `${role}'; touch pwned; '`, 42, `${role}\n`])
    assert.throws(
      () => parseAssociations(JSON.stringify({ identities: [{ namespace: 'a', serviceAccount: 'b', roleArn: bad }] })),
      (err: Error) =>
        err instanceof ConfigError && /identities\[0\]\.roleArn .* is not an IAM role ARN/.test(err.message),
      JSON.stringify(bad),
    );
});
