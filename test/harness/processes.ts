// Child processes that never outlive the test process. Three layers:
//  - stop(): SIGTERM, SIGKILL after a grace period, wait for the exit;
//  - a process 'exit' hook (and SIGINT/SIGTERM, which would skip 'exit') killing what is left;
//  - a detached watchdog per child that SIGKILLs it once our pid is gone, for when we are
//    SIGKILLed ourselves (e.g. a test runner timeout) and no hook runs.
import { spawn } from 'node:child_process';
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

const live = new Set<{ child: ChildProcess; watchdog: ChildProcess }>();
const liveDirs = new Set<string>();

function killAllSync(): void {
  for (const { child, watchdog } of live) {
    for (const p of [child, watchdog]) {
      try {
        if (p.pid) process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  live.clear();
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  liveDirs.clear();
}

let hooksInstalled = false;
function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllSync);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = (): void => {
      killAllSync();
      process.removeListener(signal, onSignal);
      // Re-raise so the default behaviour (exit by signal) applies, unless someone else handles it.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** Removes `dir` in the process 'exit' hook unless released with forgetDir first. */
export function removeDirOnExit(dir: string): void {
  installHooks();
  liveDirs.add(dir);
}
export function forgetDir(dir: string): void {
  liveDirs.delete(dir);
}

export function startProcess(name: string, command: string, args: string[], logPath: string): Managed {
  installHooks();
  const fd = openSync(logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd); // the child holds its own copy
  }
  child.on('error', () => {}); // a failed spawn shows as a missing pid; a later kill error is moot
  if (child.pid === undefined) {
    throw new Error(`could not start ${name} (${command}): see ${logPath}`);
  }
  const pid = child.pid;
  const watchdog = spawn(
    'sh',
    ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill -9 ${pid} 2>/dev/null`],
    { detached: true, stdio: 'ignore' },
  );
  watchdog.unref();
  const entry = { child, watchdog };
  live.add(entry);

  let status: number | string | null = null;
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      status = code ?? signal ?? 'unknown';
      live.delete(entry);
      try {
        if (watchdog.pid) process.kill(watchdog.pid, 'SIGKILL');
      } catch {
        // already gone
      }
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
