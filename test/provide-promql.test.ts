// scripts/provide-promql.sh from an empty cache, with a stand-in `go` (the real build takes
// minutes; the script's own control flow is what is tested): it builds once into a folder keyed by
// the Prometheus version and the source's digest, moves the binary into place last, reuses it,
// waits for a build in progress under the lock, and leaves nothing behind when the build fails.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO } from './support/chart.ts';
import { until } from './support/webhook.ts';

const SCRIPT = join(REPO, 'scripts/provide-promql.sh');
const DIGEST = createHash('sha256')
  .update(readFileSync(join(REPO, 'scripts/promql/main.go')))
  .digest('hex')
  .slice(0, 12);
const VERSION = /PROMETHEUS_VERSION:-(v[\d.]+)/.exec(readFileSync(SCRIPT, 'utf8'))![1];

// Records each call; `mod tidy` checks the module it was given; `build` writes a binary that
// names itself, unless STANDIN_GO_FAIL is set.
const STANDIN_GO = `#!/bin/bash
echo "$*" >>"$STANDIN_GO_LOG"
case "$1" in
  mod) grep -q "^require github.com/prometheus/prometheus ${VERSION}$" go.mod && test -s main.go ;;
  build)
    [ -n "\${STANDIN_GO_FAIL:-}" ] && { echo "stand-in go: build failed" >&2; exit 1; }
    printf '#!/bin/sh\\necho stand-in wiw-promql\\n' >wiw-promql && chmod +x wiw-promql ;;
  *) exit 2 ;;
esac
`;

let dir: string;
let bin: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'wiw-provide-promql-'));
  bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'go'), STANDIN_GO);
  chmodSync(join(bin, 'go'), 0o755);
});

after(() => rm(dir, { recursive: true, force: true }));

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

function start(cache: string, env: Record<string, string> = {}): Run {
  const tmp = join(dir, 'tmp');
  mkdirSync(tmp, { recursive: true });
  const child = spawn('bash', [SCRIPT], {
    env: {
      // No real Go on this PATH: only the stand-in.
      PATH: `${bin}:/usr/bin:/bin`,
      HOME: dir,
      TMPDIR: tmp,
      WIW_CACHE_DIR: cache,
      STANDIN_GO_LOG: join(cache, '..', `${cache.split('/').at(-1)}.go.log`),
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

const goCalls = (cache: string): string[] => {
  const log = join(cache, '..', `${cache.split('/').at(-1)}.go.log`);
  return existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
};

describe('scripts/provide-promql.sh', () => {
  test('from an empty cache: one build, keyed by version and source digest; the next run reuses it', async () => {
    const cache = join(dir, 'cache-a');
    const first = await start(cache).done;
    assert.equal(first.code, 0, first.stderr);
    const out = join(cache, `promql-${VERSION}-${DIGEST}`, 'wiw-promql');
    assert.equal(first.stdout, `PROMQL=${out}\n`);
    assert.equal(readFileSync(out, 'utf8'), '#!/bin/sh\necho stand-in wiw-promql\n');
    assert.deepEqual(
      goCalls(cache).map((c) => c.split(' ').slice(0, 2).join(' ')),
      ['mod tidy', 'build -trimpath'],
    );
    assert.deepEqual(await readdir(join(dir, 'tmp')), [], 'its temporary module is removed');

    const second = await start(cache).done;
    assert.equal(second.stdout, first.stdout);
    assert.equal(goCalls(cache).length, 2, 'no second build');
  });

  test('a run that finds a build in progress waits for its lock and builds nothing', async () => {
    const cache = join(dir, 'cache-b');
    const folder = join(cache, `promql-${VERSION}-${DIGEST}`);
    mkdirSync(folder, { recursive: true });
    // The test holds the build lock, as a concurrent build would.
    const holder = spawn('flock', [join(folder, '.lock'), 'cat'], { stdio: ['pipe', 'ignore', 'inherit'] });
    await until('the lock to be held', () => readFileSync('/proc/locks', 'utf8').includes(` ${holder.pid} `));
    const waiting = start(cache);
    // The script is blocked in flock, its child, until the lock is released.
    await until('the script to wait for the lock', () =>
      readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .some((p) => {
          try {
            return (
              readFileSync(`/proc/${p}/cmdline`, 'utf8') === 'flock\x009\x00' &&
              readFileSync(`/proc/${p}/environ`, 'utf8').includes(`WIW_CACHE_DIR=${cache}\x00`)
            );
          } catch {
            return false;
          }
        }),
    );
    // What the concurrent build leaves: its binary, then the lock released.
    writeFileSync(join(folder, 'wiw-promql'), '#!/bin/sh\necho built by the other\n', { mode: 0o755 });
    holder.stdin!.end();
    const { code, stdout, stderr } = await waiting.done;
    assert.equal(code, 0, stderr);
    assert.equal(stdout, `PROMQL=${join(folder, 'wiw-promql')}\n`);
    assert.deepEqual(goCalls(cache), [], 'go never ran');
  });

  test('a failed build exits non-zero and leaves no binary and no temporary folder', async () => {
    const cache = join(dir, 'cache-c');
    const { code, stdout, stderr } = await start(cache, { STANDIN_GO_FAIL: '1' }).done;
    assert.notEqual(code, 0);
    assert.equal(stdout, '');
    assert.match(stderr, /stand-in go: build failed/);
    assert.deepEqual(await readdir(join(cache, `promql-${VERSION}-${DIGEST}`)), ['.lock']);
    assert.deepEqual(await readdir(join(dir, 'tmp')), []);
    // The next run builds: a failure is not cached.
    const retry = await start(cache).done;
    assert.equal(retry.code, 0, retry.stderr);
  });

  test('without Go and with an empty cache: a clear error; TEST_ASSET_PROMQL is honoured and checked', async () => {
    const cache = join(dir, 'cache-d');
    const noGo = await start(cache, { PATH: '/usr/bin:/bin' }).done;
    assert.equal(noGo.code, 1);
    assert.match(noGo.stderr, /Go is not installed[\s\S]*TEST_ASSET_PROMQL/);
    const given = join(dir, 'given-promql');
    writeFileSync(given, '#!/bin/sh\n', { mode: 0o755 });
    const asset = await start(cache, { TEST_ASSET_PROMQL: given }).done;
    assert.equal(asset.stdout, `PROMQL=${given}\n`);
    const notExecutable = join(dir, 'not-executable');
    writeFileSync(notExecutable, '', { mode: 0o644 });
    const bad = await start(cache, { TEST_ASSET_PROMQL: notExecutable }).done;
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /TEST_ASSET_PROMQL=.* is not an executable file/);
    assert.equal(existsSync(join(cache, `promql-${VERSION}-${DIGEST}`, 'wiw-promql')), false);
  });
});
