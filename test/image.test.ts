// The container image, built for real from the Dockerfile with buildah (scripts/provide-images.sh:
// the base image is produced locally from Debian's packages and the npm registry, the build never
// pulls), then checked as built: its configuration, what it ships, and its entrypoint serving
// admission reviews as the image user from the read-only image, run by runc.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp as copy, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
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
} from './harness/control-plane.ts';
import { imageTools, type BuiltImage } from './harness/node-images.ts';
import { startProcess, type Managed } from './harness/processes.ts';
import { httpsRequest } from './https-client.ts';
import { LOOPBACK_SERVE_ARGS, registerWebhook, until } from './support/webhook.ts';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..');
const ROLE = 'arn:aws:iam::111122223333:role/from-image';

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  image: string;
  name: string;
  steps: Instruction[];
}

/** Parses the Dockerfile subset this project uses: ARG defaults, FROM ... AS, one instruction per line. */
function parseDockerfile(text: string): Stage[] {
  const argDefaults = new Map<string, string>();
  const stages: Stage[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [, op, args] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    assert.ok(op, `cannot read Dockerfile line: ${line}`);
    const upper = op.toUpperCase();
    if (upper === 'ARG' && stages.length === 0) {
      const [k, v = ''] = args.split('=');
      argDefaults.set(k, v);
    } else if (upper === 'FROM') {
      const [image, , name] = args.replace(/\$\{(\w+)\}/g, (_, k: string) => argDefaults.get(k) ?? '').split(/\s+/);
      stages.push({ image, name: name ?? `stage-${stages.length}`, steps: [] });
    } else {
      assert.ok(stages.length > 0, `${upper} before FROM`);
      stages.at(-1)!.steps.push({ op: upper, args });
    }
  }
  return stages;
}

const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);

describe('Dockerfile', () => {
  test('every stage is Node.js of the major package.json asks for', () => {
    const engines = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).engines.node as string;
    const major = /^>=(\d+)/.exec(engines)![1];
    assert.ok(stages.length >= 2, 'multi-stage');
    for (const s of stages) assert.match(s.image, new RegExp(`^node:${major}(-|$)`), `stage ${s.name} image`);
    assert.equal(process.versions.node.split('.')[0], major, 'the test replays it with the same major');
  });

  test('the final stage runs as a numeric non-root user and installs nothing itself', () => {
    const final = stages.at(-1)!;
    const user = final.steps.find((s) => s.op === 'USER')?.args;
    assert.match(user ?? '', /^[1-9]\d*(:\d+)?$/);
    assert.equal(final.steps.filter((s) => s.op === 'RUN').length, 0);
    const deps = stages.find((s) =>
      final.steps.some(
        (f) => f.op === 'COPY' && f.args.startsWith(`--from=${s.name} `) && f.args.includes('node_modules'),
      ),
    )!;
    assert.ok(
      deps.steps.some((s) => s.op === 'RUN' && /npm ci .*--omit=dev/.test(s.args)),
      'node_modules shipped come from npm ci --omit=dev',
    );
  });

  test('.dockerignore keeps host builds and dependencies out of the context', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['node_modules', 'dist', '.git']) assert.ok(ignored.includes(entry), entry);
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

  test('runs as the numeric non-root user, node /app/dist/cli.js serve, on the locally built base', (t) => {
    const config = image.config;
    assert.equal(config.User, '65532:65532');
    assert.deepEqual(config.Entrypoint, ['node', '/app/dist/cli.js']);
    assert.deepEqual(config.Cmd, ['serve']);
    assert.ok(config.Env.includes('NODE_ENV=production'));
    assert.equal(config.WorkingDir, '/app');
    // Inherited from the base scripts/base-image.sh made: the build used it and pulled nothing.
    assert.match(config.Labels['io.workload-identity-webhook.base'] ?? '', /^suite=bookworm node=24 /);
    // One version: package.json's, as `--version` prints it and the chart's appVersion.
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    assert.equal(config.Labels['org.opencontainers.image.version'], version);
    t.diagnostic(
      `image ${image.name}: ${(image.sizeBytes / 1e6).toFixed(1)} MB (base ${(image.baseSizeBytes / 1e6).toFixed(1)} MB)`,
    );
  });

  test('ships dist and production dependencies only', async () => {
    const app = join(image.root, 'app');
    assert.deepEqual((await readdir(app)).sort(), ['dist', 'node_modules', 'package.json']);
    const lock = JSON.parse(await readFile(join(REPO, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const dev = Object.entries(lock.packages)
      .filter(([p, v]) => p.startsWith('node_modules/') && v.dev)
      .map(([p]) => p);
    assert.ok(dev.length > 0 && dev.some((p) => p === 'node_modules/typescript'));
    for (const p of dev) assert.equal(existsSync(join(app, p)), false, `dev dependency ${p} is not shipped`);
    for (const p of ['fastify', '@kubernetes/client-node', 'pino'])
      assert.ok(existsSync(join(app, 'node_modules', p)), p);
    assert.ok(existsSync(join(app, 'dist/cli.js')));
    // No npm cache or build stage left in the final image.
    assert.equal(existsSync(join(image.root, 'src')), false);
    assert.equal(existsSync(join(image.root, 'root/.npm')), false);
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
    proc = startProcess('image-webhook', 'runc', ['run', '--bundle', bundle, containerId], logPath);
    const logs = () =>
      (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
    const listening = await until(
      'the image entrypoint to listen',
      () => {
        if (proc!.exitStatus() !== null) throw new Error(`exited: ${proc!.logTail(20)}`);
        return logs().find((l) => l.msg === 'listening');
      },
      30_000,
    );
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
    assert.ok(!logs().some((l) => l.level >= 50), 'no errors logged');
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
