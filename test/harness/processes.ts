// Child processes and work folders that never outlive the test process. Three layers:
//  - Managed.stop(): SIGTERM, SIGKILL after a grace period, wait for the exit;
//  - a process 'exit' hook (and SIGINT/SIGTERM, which would skip 'exit') that SIGKILLs what
//    is left and removes the guarded folders;
//  - detached watchdogs for when we are SIGKILLed ourselves (e.g. by a test runner timeout)
//    and no hook runs: one per child SIGKILLs it once our pid is gone, one per guarded folder
//    removes it.
import { execFile, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';

export interface Managed {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Null while running. */
  exitStatus(): number | string | null;
  /** The last `lines` lines of the process's combined stdout/stderr. */
  logTail(lines?: number): string;
  stop(graceMs?: number): Promise<void>;
}

const liveChildren = new Map<ChildProcess, ChildProcess>(); // child -> its watchdog
const guardedDirs = new Map<string, ChildProcess>(); // dir -> its watchdog

function killSync(p: ChildProcess): void {
  try {
    if (p.pid !== undefined && p.exitCode === null && p.signalCode === null) process.kill(p.pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function cleanUpSync(): void {
  for (const [child, watchdog] of liveChildren) {
    killSync(child);
    killSync(watchdog);
  }
  liveChildren.clear();
  for (const [dir, watchdog] of guardedDirs) {
    killSync(watchdog);
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  }
  guardedDirs.clear();
}

let hooksInstalled = false;
function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', cleanUpSync);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = (): void => {
      process.removeListener(signal, onSignal);
      // A program that handles the signal itself (the demo) stops things in order, which needs
      // them running; the 'exit' hook still removes what it leaves.
      if (process.listenerCount(signal) > 0) return;
      cleanUpSync();
      // Re-raise so the default action (exit by signal) applies.
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** Runs `script` (sh, with $1 = our pid, $2 = `arg`) in a detached process that outlives us. */
function watchdog(script: string, arg: string): ChildProcess {
  const proc = spawn('sh', ['-c', script, 'wiw-watchdog', String(process.pid), arg], {
    detached: true,
    stdio: 'ignore',
  });
  proc.on('error', () => {}); // without sh the other two layers still apply
  proc.unref();
  return proc;
}

/** Makes sure `dir` goes away with this process; call releaseDir once it was removed normally. */
export function guardDir(dir: string): void {
  installHooks();
  // The 2 s head start lets the children's watchdogs (1 s polls) kill what still writes there.
  const script =
    'while kill -0 "$1" 2>/dev/null && [ -d "$2" ]; do sleep 1; done; ' +
    '[ -d "$2" ] && { sleep 2; rm -rf "$2" || rm -rf "$2"; }';
  guardedDirs.set(dir, watchdog(script, dir));
}

/** For a guarded folder that was cleaned up normally: stops its watchdog. */
export function releaseDir(dir: string): void {
  const watchdog = guardedDirs.get(dir);
  if (watchdog) killSync(watchdog);
  guardedDirs.delete(dir);
}

/** Starts `command` with its stdout and stderr appended to `logPath`. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  logPath: string,
  /** On top of ours; a variable set to undefined is left out. */
  env?: NodeJS.ProcessEnv,
): Managed {
  installHooks();
  const fd = openSync(logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { stdio: ['ignore', fd, fd], ...(env ? { env: { ...process.env, ...env } } : {}) });
  } finally {
    closeSync(fd); // the child holds its own copy
  }
  child.on('error', () => {}); // a failed spawn shows as a missing pid below
  if (child.pid === undefined) throw new Error(`could not start ${name}: ${command}`);
  const pid = child.pid;
  const guard = watchdog('while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null', String(pid));
  liveChildren.set(child, guard);

  let status: number | string | null = null;
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      status = code ?? signal ?? 'unknown';
      liveChildren.delete(child);
      killSync(guard);
      resolve(status);
    });
  });

  return {
    name,
    pid,
    logPath,
    exited,
    exitStatus: () => status,
    logTail(lines = 40) {
      try {
        return readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
      } catch {
        return '';
      }
    },
    async stop(graceMs = 5000) {
      if (status !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A short command's exit code (null if a signal ended it) and output. */
export interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  env?: NodeJS.ProcessEnv;
}

/** More output than any command the tests run prints (trust over thousands of ServiceAccounts is a few MB). */
const MAX_OUTPUT = 64 << 20;

/**
 * Runs `command args` to its exit and returns its output, blocking this process meanwhile (so the
 * command ends before anything of ours could: no clean-up needed). A spawn failure throws.
 */
export function runToExit(command: string, args: string[], options: RunOptions = {}): Outcome {
  const r = spawnSync(command, args, {
    input: options.input,
    encoding: 'utf8',
    env: options.env,
    maxBuffer: MAX_OUTPUT,
  });
  if (r.error) throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** runToExit with this process's event loop left running meanwhile, for a command that talks to a server of ours. */
export function runToExitAsync(command: string, args: string[], options: RunOptions = {}): Promise<Outcome> {
  return new Promise((done, fail) => {
    const child = execFile(
      command,
      args,
      { encoding: 'utf8', env: options.env, maxBuffer: MAX_OUTPUT },
      (err, stdout, stderr) => {
        const code = err ? (err as { code?: unknown }).code : 0;
        // A string code is a spawn failure (ENOENT, ERR_CHILD_PROCESS_STDIO_MAXBUFFER), not an exit.
        if (typeof code === 'string') fail(err);
        else done({ code: typeof code === 'number' ? code : null, stdout, stderr });
      },
    );
    child.stdin?.end(options.input);
  });
}
