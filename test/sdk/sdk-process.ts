// Starts an official SDK in a child process with exactly a container's environment, plus only
// what redirects it to the stand-ins (name resolution and trust) and an empty HOME, and talks to
// it one JSON line at a time.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { StandInServer } from './standin-server.ts';

const HERE = import.meta.dirname;
const REQUEST_TIMEOUT_MS = 60_000;

export type Cloud = 'aws' | 'azure' | 'gcp';
export type Language = 'node' | 'python';

export interface SdkAnswer {
  ok: boolean;
  error?: { name?: string; message: string; code?: string; status?: number; body?: unknown };
  [key: string]: unknown;
}

export interface SdkProcess {
  language: Language;
  /** The environment the child was started with (the container's plus the redirection). */
  env: Record<string, string>;
  /** Credentials from the default chain; `profile` (AWS): the code names that profile of the config file. */
  credentials(profile?: string): Promise<SdkAnswer>;
  versions(): Promise<Record<string, string>>;
  /** Time passes for the child: its SDK sees cached credentials age by `seconds`. */
  advanceClock(seconds: number): Promise<void>;
  /** What the SDK wrote to stderr, for failure messages. */
  stderr(): string;
  stop(): Promise<void>;
}

const live = new Set<ChildProcessWithoutNullStreams>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** The venv's python, set by scripts/dev.sh (scripts/python-sdks.sh prints it). */
export function sdkPython(): string {
  const python = process.env.WIW_SDK_PYTHON;
  if (!python) {
    throw new Error(
      'WIW_SDK_PYTHON is not set: run the suite with scripts/dev.sh test, or export WIW_SDK_PYTHON=$(bash scripts/python-sdks.sh)',
    );
  }
  return python;
}

export function startSdk(
  language: Language,
  cloud: Cloud,
  containerEnv: Record<string, string>,
  standIn: StandInServer,
  home: string,
): SdkProcess {
  mkdirSync(home, { recursive: true });
  const redirect: Record<string, string> = {
    HOME: home,
    WIW_SDK_STANDIN_ADDRESS: standIn.address,
    WIW_SDK_STANDIN_HOSTS: standIn.hosts.join(','),
  };
  let command: string;
  let args: string[];
  if (language === 'node') {
    command = process.execPath;
    args = ['--import', join(HERE, 'node/redirect.ts'), join(HERE, 'node/sdk-child.ts'), cloud];
    redirect.NODE_EXTRA_CA_CERTS = standIn.caFile;
  } else {
    command = sdkPython();
    args = [join(HERE, 'python/sdk_child.py'), cloud];
    Object.assign(redirect, {
      // sitecustomize.py there redirects name resolution, as redirect.ts does for Node.
      PYTHONPATH: resolve(HERE, 'python'),
      PYTHONDONTWRITEBYTECODE: '1',
      // The SDKs' own trust settings: botocore's, then requests' (azure-core and google-auth).
      AWS_CA_BUNDLE: standIn.caFile,
      REQUESTS_CA_BUNDLE: standIn.caFile,
      SSL_CERT_FILE: standIn.caFile,
    });
  }
  for (const name of Object.keys(redirect)) {
    if (name in containerEnv) throw new Error(`the container already sets ${name}: the redirection would change it`);
  }
  const env = { ...containerEnv, ...redirect };
  const child = spawn(command, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  live.add(child);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-20_000)));

  const pending: ((line: string) => void)[] = [];
  const exited = new Promise<void>((resolveExit) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      for (const waiter of pending.splice(0))
        waiter(
          JSON.stringify({ ok: false, exited: true, error: { message: `SDK process exited (${code ?? signal})` } }),
        );
      resolveExit();
    });
  });
  createInterface({ input: child.stdout }).on('line', (line) => pending.shift()?.(line));

  const call = async (request: object): Promise<SdkAnswer> => {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${language} ${cloud} SDK process has exited:\n${stderr}`);
    const line = new Promise<string>((resolveLine) => pending.push(resolveLine));
    child.stdin.write(JSON.stringify(request) + '\n');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `${language} ${cloud} SDK gave no answer to ${JSON.stringify(request)} within ${REQUEST_TIMEOUT_MS} ms:\n${stderr}`,
            ),
          ),
        REQUEST_TIMEOUT_MS,
      );
    });
    try {
      const answer = JSON.parse(await Promise.race([line, timeout])) as SdkAnswer & { exited?: boolean };
      if (answer.exited) throw new Error(`${answer.error!.message}:\n${stderr}`);
      return answer;
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    language,
    env,
    credentials: (profile) => call(profile === undefined ? { op: 'credentials' } : { op: 'credentials', profile }),
    async versions() {
      const answer = await call({ op: 'versions' });
      if (!answer.ok) throw new Error(`versions: ${answer.error?.message}`);
      return answer.versions as Record<string, string>;
    },
    async advanceClock(seconds) {
      const answer = await call({ op: 'advance', seconds });
      if (!answer.ok) throw new Error(`advance: ${answer.error?.message}`);
    },
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/**
 * Asks for credentials until they differ from `previous[key]`: some SDKs (the AWS JS chain)
 * refresh in the background and hand out the cached credentials meanwhile.
 */
export async function untilRefreshed(
  sdk: SdkProcess,
  previous: SdkAnswer,
  key: string,
  timeoutMs = 20_000,
): Promise<SdkAnswer> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await sdk.credentials();
    if (!answer.ok) throw new Error(`refresh failed: ${JSON.stringify(answer.error)}\n${sdk.stderr()}`);
    if (answer[key] !== previous[key]) return answer;
    if (Date.now() > deadline) throw new Error(`the SDK still hands out the old ${key} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The rotation every SDK suite checks: credentials from the current token, the token replaced
 * (`replace` returns the new one), the SDK's clock moved 3,500 s on (inside every refresh window
 * of an hour's credentials, and past the Azure SDKs' caches of the file), then fresh credentials.
 * `afterFirst` runs before the replacement; the caller checks which token the stand-in saw.
 */
export async function refreshAcrossRotation(
  sdk: SdkProcess,
  key: string,
  original: string,
  replace: () => Promise<string>,
  afterFirst: (first: SdkAnswer) => void = () => {},
): Promise<{ first: SdkAnswer; second: SdkAnswer; rotated: string }> {
  const first = await sdk.credentials();
  if (!first.ok) throw new Error(`first credentials failed: ${JSON.stringify(first.error)}\n${sdk.stderr()}`);
  afterFirst(first);
  const rotated = await replace();
  if (rotated === original) throw new Error('the token was not replaced');
  await sdk.advanceClock(3500);
  const second = await untilRefreshed(sdk, first, key);
  return { first, second, rotated };
}
