// scripts/provide-peers.sh from an empty cache. A stand-in `go` replaces only the slow build (it
// checks what it is asked to build and writes a small executable); the script's own control flow
// (cache, lock, temporary folder, move into place, messages) runs as it is.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until } from '../harness/until.ts';

const SCRIPT = join(import.meta.dirname, '../../scripts/provide-peers.sh');
const MODULE = 'github.com/aws/amazon-eks-pod-identity-webhook';

/** A stand-in for `go build` of the AWS peer: logs each call, and can fail or wait on a FIFO. */
const STANDIN_GO = `#!/bin/bash
set -eu
echo "$PWD $*" >>"$STANDIN_LOG"
[ "$1" = build ] || { echo "stand-in go: unexpected $*" >&2; exit 2; }
grep -q "^require ${MODULE} v0.6.17$" go.mod || { echo "stand-in go: go.mod does not pin the peer" >&2; exit 3; }
[ -z "\${STANDIN_WAIT:-}" ] || read -r _ <"$STANDIN_WAIT"
[ -z "\${STANDIN_FAIL:-}" ] || { echo "stand-in go: build failed" >&2; exit 1; }
mkdir -p bin
printf '#!/bin/sh\\necho peer\\n' >bin/amazon-eks-pod-identity-webhook
chmod +x bin/amazon-eks-pod-identity-webhook
`;

function sandbox(withGo = true) {
  const dir = mkdtempSync(join(tmpdir(), 'wiw-provide-peers-'));
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  if (withGo) {
    writeFileSync(join(bin, 'go'), STANDIN_GO);
    chmodSync(join(bin, 'go'), 0o755);
  }
  const tmp = join(dir, 'tmp');
  mkdirSync(tmp);
  const env = {
    PATH: `${bin}:/usr/bin:/bin`,
    HOME: dir,
    WIW_CACHE_DIR: join(dir, 'cache'),
    TMPDIR: tmp,
    STANDIN_LOG: join(dir, 'go.log'),
  };
  const calls = () => (existsSync(env.STANDIN_LOG) ? readFileSync(env.STANDIN_LOG, 'utf8').trim().split('\n') : []);
  const run = (args: string[], extra: Record<string, string> = {}) =>
    spawnSync('bash', [SCRIPT, ...args], { env: { ...env, ...extra }, encoding: 'utf8', timeout: 30_000 });
  return { dir, env, tmp, calls, run };
}

const vars = (stdout: string) =>
  Object.fromEntries([...stdout.matchAll(/^([A-Z_]+)=(.*)$/gm)].map((m) => [m[1], m[2]]));

describe('scripts/provide-peers.sh', () => {
  test('empty cache: builds the AWS peer once, at the pinned version, moves it into place and prints it', () => {
    const s = sandbox();
    const first = s.run(['aws']);
    assert.equal(first.status, 0, first.stderr);
    const out = vars(first.stdout);
    assert.equal(out.AWS_PEER, join(s.env.WIW_CACHE_DIR, 'peer-aws-v0.6.17', 'amazon-eks-pod-identity-webhook'));
    assert.equal(out.AWS_PEER_VERSION, 'v0.6.17');
    assert.equal(spawnSync(out.AWS_PEER, { encoding: 'utf8' }).stdout, 'peer\n');
    assert.equal(s.calls().length, 1);
    assert.match(s.calls()[0], new RegExp(` build -trimpath -ldflags -s -w -o bin/ ${MODULE}$`));
    assert.deepEqual(readdirSync(s.tmp), [], 'the temporary build folder is gone');
    const again = s.run(['aws']);
    assert.equal(again.status, 0);
    assert.equal(vars(again.stdout).AWS_PEER, out.AWS_PEER);
    assert.equal(s.calls().length, 1, 'the cached binary is not built again');
  });

  test('a failed build stops the script, leaves no binary and no temporary folder', () => {
    const s = sandbox();
    const r = s.run(['aws'], { STANDIN_FAIL: '1' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /stand-in go: build failed/);
    assert.equal(r.stdout, '', 'no assignment printed');
    assert.equal(existsSync(join(s.env.WIW_CACHE_DIR, 'peer-aws-v0.6.17', 'amazon-eks-pod-identity-webhook')), false);
    assert.deepEqual(readdirSync(s.tmp), []);
  });

  test('two runs at once on an empty cache: one builds, the other waits on the lock and finds the binary', async () => {
    const s = sandbox();
    const fifo = join(s.dir, 'release');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const start = () => {
      // Killed after 20 s: without the lock the second build would wait on the FIFO forever.
      const p = spawn('bash', [SCRIPT, 'aws'], { env: { ...s.env, STANDIN_WAIT: fifo }, timeout: 20_000 });
      let stdout = '';
      p.stdout.on('data', (c) => (stdout += c));
      return new Promise<{ code: number | null; stdout: string }>((resolve) =>
        p.on('close', (code) => resolve({ code, stdout })),
      );
    };
    const a = start();
    await until('the first build to start', () => s.calls().length === 1 || undefined);
    const b = start();
    writeFileSync(fifo, 'go\n'); // lets the one build finish
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(ra.code, 0);
    assert.equal(rb.code, 0);
    assert.equal(vars(ra.stdout).AWS_PEER, vars(rb.stdout).AWS_PEER);
    assert.equal(s.calls().length, 1, 'built once');
  });

  test('a build killed half way leaves nothing a later run trusts: the next run builds afresh', async () => {
    const s = sandbox();
    const fifo = join(s.dir, 'never');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    // Its own process group, so the kill reaches the script and its stand-in build alike.
    const p = spawn('bash', [SCRIPT, 'aws'], { env: { ...s.env, STANDIN_WAIT: fifo }, detached: true });
    const closed = new Promise((resolve) => p.on('close', resolve));
    await until('the build to start', () => s.calls().length === 1 || undefined);
    process.kill(-p.pid!, 'SIGTERM');
    await closed;
    assert.equal(existsSync(join(s.env.WIW_CACHE_DIR, 'peer-aws-v0.6.17', 'amazon-eks-pod-identity-webhook')), false);
    const next = s.run(['aws']);
    assert.equal(next.status, 0, next.stderr);
    assert.equal(s.calls().length, 2, 'built again');
    assert.equal(spawnSync(vars(next.stdout).AWS_PEER, { encoding: 'utf8' }).stdout, 'peer\n');
  });

  test('without Go and without a cached binary: a clear error naming Go and AWS_PEER', () => {
    const s = sandbox(false);
    const r = s.run(['aws']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /Go is not installed/);
    assert.match(r.stderr, /AWS_PEER/);
    const given = join(s.dir, 'aws-peer');
    writeFileSync(given, '#!/bin/sh\n');
    chmodSync(given, 0o755);
    const withPeer = s.run(['aws'], { AWS_PEER: given });
    assert.equal(withPeer.status, 0, withPeer.stderr);
    assert.equal(vars(withPeer.stdout).AWS_PEER, given);
  });

  for (const [peer, variable, repo, version] of [
    ['azure', 'AZURE_PEER', 'Azure/azure-workload-identity', 'v1.6.0'],
    ['pfnet', 'PFNET_PEER', 'pfnet-research/gcp-workload-identity-federation-webhook', 'v0.7.0'],
  ] as const) {
    test(`${peer}: not buildable here; without its binary a clear error at once, with it the path`, () => {
      const s = sandbox();
      const missing = s.run([peer]);
      assert.equal(missing.status, 1);
      assert.match(missing.stderr, new RegExp(`${repo} ${version} is missing: no ${variable} and no `));
      assert.match(missing.stderr, new RegExp(`peer-${peer}-${version}/webhook`));
      assert.deepEqual(s.calls(), [], 'nothing is built');
      const notExecutable = join(s.dir, 'not-executable');
      writeFileSync(notExecutable, '');
      const bad = s.run([peer], { [variable]: notExecutable });
      assert.equal(bad.status, 1);
      assert.match(bad.stderr, new RegExp(`${variable}=${notExecutable} is not an executable file`));
      const cached = join(s.env.WIW_CACHE_DIR, `peer-${peer}-${version}`);
      mkdirSync(cached, { recursive: true });
      writeFileSync(join(cached, 'webhook'), '#!/bin/sh\n');
      chmodSync(join(cached, 'webhook'), 0o755);
      const found = s.run([peer]);
      assert.equal(found.status, 0, found.stderr);
      assert.equal(vars(found.stdout)[variable], join(cached, 'webhook'));
    });
  }

  test('--versions prints the pins and builds nothing; an unknown peer is refused', () => {
    const s = sandbox();
    const r = s.run(['--versions']);
    assert.equal(r.status, 0);
    assert.deepEqual(vars(r.stdout), {
      AWS_PEER_VERSION: 'v0.6.17',
      AZURE_PEER_VERSION: 'v1.6.0',
      PFNET_PEER_VERSION: 'v0.7.0',
    });
    assert.deepEqual(s.calls(), []);
    const bad = s.run(['gke']);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /unknown peer "gke"; expected aws, azure or pfnet/);
  });
});
