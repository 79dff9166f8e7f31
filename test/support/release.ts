// The release command as a user runs it (`npm run release -- --registry HOST/PATH`), against a
// test registry over plain HTTP; returns what it printed with --json. With `sign`, the release
// signs with that cosign key pair and attests the SBOM (scripts/release-sign.ts); verifyRelease
// checks both as a user would, with cosign and the public key. The image is built on the local
// stand-in for the node image the Dockerfile pins (NODE_IMAGE), as provide-images.sh builds it.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Release } from '../../scripts/release.ts';
import { resolveBinaries } from '../harness/binaries.ts';
import { scriptVars } from '../harness/node-images.ts';

const REPO = resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

/** A cosign key pair in a fresh folder; the private key is encrypted with `password`. */
export interface KeyPair {
  key: string;
  pub: string;
  password: string;
}

export async function cosign(): Promise<string> {
  return (await scriptVars('scripts/provide-cosign.sh')).COSIGN;
}

export async function cosignKeyPair(): Promise<KeyPair> {
  const dir = await mkdtemp(join(tmpdir(), 'wiw-cosign-'));
  const password = 'release-test';
  await run(await cosign(), ['generate-key-pair'], { cwd: dir, env: { ...process.env, COSIGN_PASSWORD: password } });
  return { key: join(dir, 'cosign.key'), pub: join(dir, 'cosign.pub'), password };
}

export async function runRelease(
  registry: string,
  options: { repo?: string; sign?: KeyPair; sbom?: string } = {},
): Promise<Release> {
  const { helm } = await resolveBinaries();
  // No Docker Hub here: the build stages run on the local stand-in for the Dockerfile's pinned node image.
  const nodeImage = (await run('bash', ['scripts/base-image.sh'], { cwd: REPO })).stdout.trim();
  const sign = options.sign ? ['--sign', options.sign.key, ...(options.sbom ? ['--sbom', options.sbom] : [])] : [];
  const child = spawn(
    process.execPath,
    ['scripts/release.ts', '--registry', registry, '--plain-http', '--json', ...sign],
    {
      cwd: options.repo ?? REPO,
      // helm keeps its registry configuration and caches here, out of the user's home.
      env: {
        ...process.env,
        HELM: helm,
        NODE_IMAGE: nodeImage,
        HELM_CACHE_HOME: join(tmpdir(), 'wiw-helm-cache'),
        HELM_CONFIG_HOME: join(tmpdir(), 'wiw-helm-config'),
        HELM_DATA_HOME: join(tmpdir(), 'wiw-helm-data'),
        ...(options.sign ? { COSIGN: await cosign(), COSIGN_PASSWORD: options.sign.password } : {}),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  const code = await new Promise<number | null>((ok, fail) => {
    child.on('error', fail);
    child.on('close', ok);
  });
  if (code !== 0) throw new Error(`the release failed (exit ${code}); see its messages above`);
  return JSON.parse(stdout) as Release;
}

/** What `cosign verify` and `cosign verify-attestation --type cyclonedx` accepted for one reference. */
export interface Verified {
  /** The simple-signing payloads cosign verified (the digest each one signs). */
  signatures: { critical: { image: { 'docker-manifest-digest': string }; type: string } }[];
  /** The in-toto statements of the SBOM attestations, decoded. */
  sboms: { predicateType: string; subject: { digest: { sha256: string } }[]; predicate: any }[]; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Verifies `ref` (HOST/PATH@DIGEST) against the public key, as the README tells a user to; throws when cosign refuses. */
export async function verifyWithKey(ref: string, pub: string, options: { sbom: boolean }): Promise<Verified> {
  const bin = await cosign();
  // A key and no transparency log: the local registry's release was signed without one.
  const common = ['--key', pub, '--insecure-ignore-tlog', '--allow-http-registry', '--allow-insecure-registry'];
  const verified = await run(bin, ['verify', ...common, ref], { maxBuffer: 16 << 20 });
  const signatures = JSON.parse(verified.stdout) as Verified['signatures'];
  if (!options.sbom) return { signatures, sboms: [] };
  const attested = await run(bin, ['verify-attestation', ...common, '--type', 'cyclonedx', ref], {
    maxBuffer: 64 << 20,
  });
  const sboms = attested.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(Buffer.from((JSON.parse(line) as { payload: string }).payload, 'base64').toString()));
  return { signatures, sboms };
}
