// The two wings of the suite, held to their definition (test/README.md): a file in test/unit runs
// in-process, a file in test/e2e starts processes. "Starts processes" is read off the import graph
// of the repository's own code: whether a test file reaches node:child_process through its value
// imports (type imports run nothing). A file that moves wing without moving folder fails here.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';

const REPO = resolve(import.meta.dirname, '../..');
const WINGS = ['test/unit/', 'test/e2e/'];

function files(dir: string, suffix: string): string[] {
  return readdirSync(join(REPO, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name), suffix) : e.name.endsWith(suffix) ? [join(dir, e.name)] : [],
  );
}

/** A file's value imports (static, re-exports, dynamic): repository paths, or module names as written. */
function valueImports(file: string): string[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\s+(?!type\s)[^;]*?\bfrom\s+'([^']+)'/gms),
    ...text.matchAll(/^\s*import\s+'([^']+)'/gm),
    ...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
  ].map((m) => m[1]);
  return specifiers.map((s) => (s.startsWith('.') ? relative(REPO, resolve(dirname(join(REPO, file)), s)) : s));
}

/** The chain of value imports from `file` to node:child_process, or undefined if there is none. */
function pathToChildProcess(file: string): string[] | undefined {
  const seen = new Set([file]);
  const queue: string[][] = [[file]];
  while (queue.length) {
    const chain = queue.shift()!;
    for (const next of valueImports(chain.at(-1)!)) {
      if (next === 'node:child_process' || next === 'child_process') return [...chain, next];
      if (next.endsWith('.ts') && !seen.has(next)) {
        seen.add(next);
        queue.push([...chain, next]);
      }
    }
  }
  return undefined;
}

describe('the two wings of test/', () => {
  const tests = files('test', '.test.ts');

  test('every test file sits in test/unit or test/e2e (the wings scripts/dev.sh runs)', () => {
    assert.deepEqual(
      tests.filter((f) => !WINGS.some((w) => f.startsWith(w))),
      [],
    );
    const devSh = readFileSync(join(REPO, 'scripts/dev.sh'), 'utf8');
    for (const wing of WINGS) assert.ok(devSh.includes(`'${wing}**/*.test.ts'`), `scripts/dev.sh runs ${wing}`);
  });

  test('a unit file never reaches node:child_process', () => {
    const offenders = tests
      .filter((f) => f.startsWith('test/unit/'))
      .map((f) => pathToChildProcess(f)?.join(' -> '))
      .filter(Boolean);
    assert.deepEqual(offenders, [], 'these start processes: move them to test/e2e, or the import out of their path');
  });

  test('an e2e file starts processes (else it belongs in test/unit)', () => {
    const inProcess = tests.filter((f) => f.startsWith('test/e2e/') && !pathToChildProcess(f));
    assert.deepEqual(inProcess, []);
  });

  test('the import reader sees what it must: value imports, re-exports and dynamic imports, not type imports', () => {
    // The harness is the one place that spawns; these chains are how the wings reach it or not.
    assert.deepEqual(pathToChildProcess('test/support/webhook.ts')?.slice(-2), [
      'test/harness/processes.ts',
      'node:child_process',
    ]);
    assert.equal(pathToChildProcess('test/harness/until.ts'), undefined);
    assert.ok(valueImports('test/support/webhook.ts').includes('test/harness/until.ts'), 'a re-export');
    assert.ok(!valueImports('test/support/webhook.ts').includes('test/harness/processes.ts'), 'a type import');
    assert.ok(valueImports('test/unit/server-limits.test.ts').includes('test/harness/until.ts'), 'a dynamic import');
  });
});
