// The release command as a user runs it (`npm run release -- --registry HOST/PATH`), against a
// test registry over plain HTTP; returns what it printed with --json.
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Release } from '../../scripts/release.ts';
import { resolveBinaries } from '../harness/binaries.ts';

const REPO = resolve(import.meta.dirname, '../..');

export async function runRelease(registry: string): Promise<Release> {
  const { helm } = await resolveBinaries();
  const child = spawn(process.execPath, ['scripts/release.ts', '--registry', registry, '--plain-http', '--json'], {
    cwd: REPO,
    // helm keeps its registry configuration and caches here, out of the user's home.
    env: {
      ...process.env,
      HELM: helm,
      HELM_CACHE_HOME: join(tmpdir(), 'wiw-helm-cache'),
      HELM_CONFIG_HOME: join(tmpdir(), 'wiw-helm-config'),
      HELM_DATA_HOME: join(tmpdir(), 'wiw-helm-data'),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  const code = await new Promise<number | null>((ok, fail) => {
    child.on('error', fail);
    child.on('close', ok);
  });
  if (code !== 0) throw new Error(`the release failed (exit ${code}); see its messages above`);
  return JSON.parse(stdout) as Release;
}
