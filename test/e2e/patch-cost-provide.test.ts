// bench/patch-cost/provide.sh (the patch phase of `npm run bench:apiserver`) from an empty cache
// folder, as a newcomer meets it: the real Go build (a small program, seconds), no stand-in. It
// reads the json-patch.v4 pin from k8s.io/apiserver's go.mod for the suite's newest kube-apiserver,
// builds once into its own folder, and a second run builds nothing and prints the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accessSync, constants, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { runToExit } from '../harness/processes.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const SCRIPT = join(ROOT, 'bench/patch-cost/provide.sh');

const assignments = (stdout: string) =>
  Object.fromEntries(
    stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=', 2) as [string, string]),
  );

test('bench/patch-cost/provide.sh from an empty cache builds the pinned json-patch once; a second run builds nothing', (t) => {
  const cache = mkdtempSync(join(tmpdir(), 'wiw-patch-cost-'));
  t.after(() => rmSync(cache, { recursive: true, force: true }));
  const env = { ...process.env, WIW_CACHE_DIR: cache };
  const first = runToExit('bash', [SCRIPT], { env });
  assert.equal(first.code, 0, first.stderr);
  const vars = assignments(first.stdout);
  // The newest kube-apiserver the suite builds, and the pin its k8s.io/apiserver module declares.
  const newest = /^K8S_NEWEST_VERSION=\$\{K8S_NEWEST_VERSION:-v1\.(\d+\.\d+)\}$/m.exec(
    readFileSync(join(ROOT, 'scripts/provide-binaries.sh'), 'utf8'),
  )?.[1];
  assert.equal(vars.APISERVER_MODULE_VERSION, `v0.${newest}`);
  assert.match(vars.JSON_PATCH_VERSION, /^v4\.\d+\.\d+$/);
  assert.match(first.stderr, /building patch-cost against gopkg\.in\/evanphx\/json-patch\.v4 v4\./);
  assert.ok(vars.PATCH_COST.startsWith(`${cache}/patch-cost-${vars.JSON_PATCH_VERSION}-`), vars.PATCH_COST);
  accessSync(vars.PATCH_COST, constants.X_OK);
  assert.deepEqual(readdirSync(cache).length, 1, 'one folder, no leftovers of the build');

  const second = runToExit('bash', [SCRIPT], { env });
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.stdout, first.stdout);
  assert.doesNotMatch(second.stderr, /building/);
});
