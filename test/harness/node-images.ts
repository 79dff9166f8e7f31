// The locally built images (scripts/provide-images.sh): their names and docker-archives for a
// node's containerd, and the webhook image mounted read-only-ready for inspection and runc.
import { execFile, spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CACHE =
  process.env.WIW_CACHE_DIR ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'workload-identity-webhook');
const STORAGE = join(CACHE, 'containers');

/** Runs a provide-* script of scripts/ and returns the NAME=value lines it printed. */
export async function scriptVars(
  script: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<Record<string, string>> {
  const child = spawn('bash', [script, ...args], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${script} failed (exit ${code}); see its messages above`);
  const vars: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    // printf %q output: a plain value stays as is; otherwise undo backslash escapes.
    if (m) vars[m[1]] = m[2].replace(/\\(.)/g, '$1');
  }
  return vars;
}

/** buildah on the project's storage, as scripts/image-lib.sh runs it. */
export async function buildah(args: string[]): Promise<string> {
  const { stdout } = await run(
    'buildah',
    ['--root', join(STORAGE, 'storage'), '--runroot', join(STORAGE, 'run'), '--storage-driver', 'overlay', ...args],
    { maxBuffer: 16 << 20 },
  );
  return stdout.trim();
}

export interface ImageConfig {
  User: string;
  Entrypoint: string[];
  Cmd: string[];
  Env: string[];
  WorkingDir: string;
  Labels: Record<string, string>;
}

export interface MountedImage {
  name: string;
  config: ImageConfig;
  architecture: string;
  /** The uncompressed digests of its layers, base first. */
  diffIds: string[];
  /** The image's root filesystem, mounted (a buildah working container: nothing is written to the image). */
  root: string;
  release(): Promise<void>;
}

/** Mounts a stored image's root filesystem for reading (buildah from + mount), with its configuration. */
export async function mountImage(name: string): Promise<MountedImage> {
  const { OCIv1: oci } = JSON.parse(await buildah(['inspect', '--type', 'image', name])) as {
    OCIv1: { config: ImageConfig; architecture: string; rootfs: { diff_ids: string[] } };
  };
  const container = await buildah(['from', '--pull-never', '--quiet', name]);
  try {
    return {
      name,
      config: { ...oci.config, Labels: oci.config.Labels ?? {}, Env: oci.config.Env ?? [] },
      architecture: oci.architecture,
      diffIds: oci.rootfs.diff_ids,
      root: await buildah(['mount', container]),
      release: async () => {
        await buildah(['rm', container]);
      },
    };
  } catch (err) {
    await buildah(['rm', container]).catch(() => {});
    throw err;
  }
}

export interface BuiltImage extends MountedImage {
  /** Size of the image as exported (its layers, uncompressed). */
  sizeBytes: number;
  /** The provide-images.sh variables (WEBHOOK_IMAGE_ID, BASE_IMAGE...). */
  vars: Record<string, string>;
}

export function imageTools() {
  return {
    provide: () => scriptVars('scripts/provide-images.sh'),
    async mountWebhookImage(): Promise<BuiltImage> {
      const vars = await scriptVars('scripts/provide-images.sh');
      const image = await mountImage(vars.WEBHOOK_IMAGE);
      return {
        ...image,
        sizeBytes: statSync(vars.WEBHOOK_IMAGE_ARCHIVE).size,
        vars,
      };
    },
  };
}
