// Runs inside a Pod on the test node (test/e2e/node-e2e.test.ts): asks the official SDK of one cloud
// for credentials once (sdk-child.ts, on exactly the Pod's environment plus the redirection to
// the stand-ins), then reports through the container's termination message: the SDK's answer,
// and what the kubelet put at the paths the environment names (mode, size, a digest of tokens,
// the content of credential configuration files). Never the tokens themselves.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const cloud = process.argv[2];
const FILE_VARIABLES = [
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AZURE_FEDERATED_TOKEN_FILE',
  'GOOGLE_APPLICATION_CREDENTIALS',
  'AWS_CONFIG_FILE',
];
// Configuration files are reported whole; token files only by digest.
const CONFIG_VARIABLES = new Set(['GOOGLE_APPLICATION_CREDENTIALS', 'AWS_CONFIG_FILE']);

const child = spawn(
  process.execPath,
  ['--import', join(import.meta.dirname, 'redirect.ts'), join(import.meta.dirname, 'sdk-child.ts'), cloud],
  {
    stdio: ['pipe', 'pipe', 'pipe'],
  },
);
let stdout = '';
let stderr = '';
child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr = (stderr + c).slice(-1000)));
child.stdin.end(`${JSON.stringify({ op: 'credentials' })}\n`);
const code = await new Promise<number | null>((resolve) => child.on('close', resolve));

const files: Record<string, unknown> = {};
for (const variable of FILE_VARIABLES) {
  const path = process.env[variable];
  if (!path) continue;
  try {
    const stat = statSync(path);
    const content = readFileSync(path, 'utf8');
    files[variable] = {
      path,
      mode: (stat.mode & 0o777).toString(8),
      size: stat.size,
      ...(CONFIG_VARIABLES.has(variable)
        ? { content }
        : { sha256: createHash('sha256').update(content).digest('hex') }),
    };
  } catch (err) {
    files[variable] = { path, error: (err as Error).message };
  }
}

let answer: unknown;
try {
  answer = JSON.parse(stdout.trim().split('\n')[0] ?? '');
} catch {
  answer = { ok: false, error: { message: `no answer (exit ${code}): ${stderr}` } };
}
// The kubelet keeps up to 4096 bytes of the termination message.
writeFileSync('/dev/termination-log', JSON.stringify({ answer, files }).slice(0, 4096));
process.exit((answer as { ok?: boolean }).ok ? 0 : 1);
