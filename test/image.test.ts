// The container image without a Docker engine: the Dockerfile is read and its stages replayed
// in temporary folders (same COPY and RUN commands, each stage its own root), then the final
// stage, made read-only, starts the server against a real API server.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, cp as copy, mkdir, mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { createNamespace, createServiceAccount, startControlPlane, type ControlPlane } from './harness/control-plane.ts';
import { startProcess, type Managed } from './harness/processes.ts';
import { httpsRequest } from './https-client.ts';
import { registerWebhook, until } from './support/webhook.ts';

const REPO = resolve(import.meta.dirname, '..');
// The replay's own npm cache (kept between runs), so no RUN line can touch the user's.
const NPM_CACHE = join(process.env.WIW_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook'), 'image-test-npm-cache');
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

interface Built {
  root: string;
  workdir: string;
  env: Record<string, string>;
  user?: string;
  entrypoint: string[];
  cmd: string[];
  ran: string[];
}

/** Replays the stages: each gets `<base>/<name>` as its root; COPY from the context or a stage. */
async function build(stages: Stage[], base: string): Promise<Map<string, Built>> {
  const built = new Map<string, Built>();
  for (const stage of stages) {
    const root = join(base, stage.name);
    const b: Built = { root, workdir: root, env: {}, entrypoint: [], cmd: [], ran: [] };
    await mkdir(root, { recursive: true });
    const inRoot = (p: string, from = b.workdir, r = root) => (p.startsWith('/') ? join(r, p) : join(from, p));
    for (const { op, args } of stage.steps) {
      switch (op) {
        case 'WORKDIR':
          b.workdir = inRoot(args);
          await mkdir(b.workdir, { recursive: true });
          break;
        case 'ENV': {
          const [k, v] = args.split('=');
          b.env[k] = v;
          break;
        }
        case 'COPY': {
          const parts = args.split(/\s+/);
          const from = parts[0].startsWith('--from=') ? built.get(parts.shift()!.slice(7)) : undefined;
          const rawDest = parts.pop()!;
          const dest = inRoot(rawDest);
          // Docker's rule: a destination ending in / (or several sources) is a folder to copy into.
          const intoFolder = rawDest.endsWith('/') || parts.length > 1;
          for (const src of parts) {
            const source = from ? inRoot(src, from.workdir, from.root) : join(REPO, src);
            const isDir = (await stat(source)).isDirectory();
            const target = intoFolder && !isDir ? join(dest, src.split('/').pop()!) : dest;
            await mkdir(isDir ? target : dirname(target), { recursive: true });
            await copy(source, target, { recursive: true });
          }
          break;
        }
        case 'RUN':
          b.ran.push(args);
          await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', args], {
            cwd: b.workdir,
            env: { ...process.env, ...b.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, npm_config_cache: NPM_CACHE },
            maxBuffer: 64 << 20,
          }).catch((err: { stderr?: string; message: string }) => {
            throw new Error(`RUN ${args} (stage ${stage.name}) failed:\n${err.stderr ?? err.message}`);
          });
          break;
        case 'USER':
          b.user = args;
          break;
        case 'ENTRYPOINT':
          b.entrypoint = JSON.parse(args);
          break;
        case 'CMD':
          b.cmd = JSON.parse(args);
          break;
        case 'EXPOSE':
          break;
        default:
          throw new Error(`Dockerfile instruction ${op} is not replayed by this test; extend it`);
      }
    }
    built.set(stage.name, b);
  }
  return built;
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
    const deps = stages.find((s) => final.steps.some((f) => f.op === 'COPY' && f.args.startsWith(`--from=${s.name} `) && f.args.includes('node_modules')))!;
    assert.ok(deps.steps.some((s) => s.op === 'RUN' && /npm ci .*--omit=dev/.test(s.args)), 'node_modules shipped come from npm ci --omit=dev');
  });

  test('.dockerignore keeps host builds and dependencies out of the context', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());
    for (const entry of ['node_modules', 'dist', '.git']) assert.ok(ignored.includes(entry), entry);
  });
});

describe('the image, replayed', () => {
  let cp: ControlPlane;
  let base: string;
  let final: Built;
  let proc: Managed | undefined;

  before(async () => {
    base = await mkdtemp(join(tmpdir(), 'wiw-image-'));
    const [built, plane] = await Promise.all([build(stages, base), startControlPlane({ name: 'image' })]);
    cp = plane;
    final = built.get(stages.at(-1)!.name)!;
    // readOnlyRootFilesystem: nothing in the image may be written at run time.
    await promisify(execFile)('chmod', ['-R', 'a-w', final.root]);
    await chmod(base, 0o755); // mkdtemp's 0700 would keep the image user out
    await createNamespace(cp, 'apps');
  });

  after(async () => {
    await proc?.stop();
    await cp?.stop();
    if (base) {
      await promisify(execFile)('chmod', ['-R', 'u+w', base]).catch(() => {});
      await rm(base, { recursive: true, force: true });
    }
  });

  test('ships dist and production dependencies only', async () => {
    const app = final.workdir;
    assert.deepEqual((await readdir(app)).sort(), ['dist', 'node_modules', 'package.json']);
    const lock = JSON.parse(await readFile(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const dev = Object.entries(lock.packages).filter(([p, v]) => p.startsWith('node_modules/') && v.dev).map(([p]) => p);
    assert.ok(dev.length > 0 && dev.some((p) => p === 'node_modules/typescript'));
    for (const p of dev) assert.equal(existsSync(join(app, p)), false, `dev dependency ${p} is not shipped`);
    for (const p of ['fastify', '@kubernetes/client-node', 'pino']) assert.ok(existsSync(join(app, 'node_modules', p)), p);
    assert.ok(existsSync(join(app, 'dist/cli.js')));
  });

  test('the entrypoint serves admission reviews as the image user, from the read-only image', async () => {
    // The image user, as the kubelet would run it; its only writable place is a scratch folder
    // (the chart's /tmp emptyDir). Root here, so drop to that user; otherwise we already are one.
    const [uid, gid] = final.user!.split(':').map(Number);
    const scratch = await mkdtemp(join(tmpdir(), 'wiw-image-run-'));
    const kubeconfig = join(scratch, 'kubeconfig');
    await copy(cp.kubeconfigPath, kubeconfig);
    const asImageUser = process.getuid?.() === 0;
    if (asImageUser) await promisify(execFile)('chown', ['-R', `${uid}:${gid ?? uid}`, scratch]);
    const caFile = join(scratch, 'ca.pem');
    const logPath = join(cp.dir, 'image-webhook.log');
    const [exe, ...entry] = final.entrypoint;
    assert.equal(exe, 'node');
    const script = entry.map((a) => (a.startsWith('/') ? join(final.root, a) : a));
    const [command, ...prefix] = asImageUser
      ? ['setpriv', `--reuid=${uid}`, `--regid=${gid ?? uid}`, '--clear-groups', process.execPath]
      : [process.execPath];
    proc = startProcess('image-webhook', command, [
      ...prefix, ...script, ...final.cmd,
      '--kubeconfig', kubeconfig,
      '--self-signed', '--self-signed-hosts', '127.0.0.1', '--ca-bundle-out', caFile,
      '--host', '127.0.0.1', '--port', '0', '--metrics-host', '127.0.0.1', '--metrics-port', '0', '--drain-seconds', '0',
    ], logPath);
    const logs = () => (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    const listening = await until('the image entrypoint to listen', () => {
      if (proc!.exitStatus() !== null) throw new Error(`exited: ${proc!.logTail(20)}`);
      return logs().find((l) => l.msg === 'listening');
    });
    const url = `https://127.0.0.1:${listening.port}`;
    const caPem = readFileSync(caFile, 'utf8');
    await until('ready', async () => (await httpsRequest(`${url}/readyz`, { ca: caPem })).status === 200 || undefined);

    await createServiceAccount(cp, 'apps', 'worker', { 'eks.amazonaws.com/role-arn': ROLE });
    await registerWebhook(cp, { url, caPem, logs }, 'image', [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'apps' } } }], 'apps');
    const pod = await cp.kubeConfig().makeApiClient(CoreV1Api).createNamespacedPod({
      namespace: 'apps',
      body: { metadata: { name: 'from-image' }, spec: { serviceAccountName: 'worker', containers: [{ name: 'app', image: 'busybox' }] } },
    });
    const env = Object.fromEntries((pod.spec!.containers[0].env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env.AWS_ROLE_ARN, ROLE);
    assert.ok(!logs().some((l) => l.level >= 50), 'no errors logged');
    if (asImageUser) {
      const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
      assert.match(status, new RegExp(`^Uid:\\s+${uid}\\s`, 'm'), 'the server ran as the image user');
    }
    await proc.stop();
    await rm(scratch, { recursive: true, force: true });
  });
});
