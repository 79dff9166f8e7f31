// The CLI as the tests start it, in one place. `runCli` runs one command to its exit and returns
// its exit code and output; `startCli` starts a long-running one (`serve`, `token-requestor`, also
// the image's entrypoint under runc through `startLogging`) whose output goes to a log file, whose
// complete JSON lines are parsed as they arrive; a wait for a log line gives up at once, with the
// log's tail, if the process exits first. Every one runs in the runner's environment without any
// WIW_* setting, plus `env`, so a setting in the developer's shell never changes what a test starts.
// They run the build, `dist/cli.js`, what the image ships (WIW_CLI names another build), never
// src/cli.ts: what an e2e file proves holds for what users run.
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Managed, type Outcome, runToExit, runToExitAsync, startProcess } from './processes.ts';
import { GiveUp, until } from './until.ts';

/** The built CLI (`npm run build`); WIW_CLI names another build (the benchmark compares releases). */
export const CLI = process.env.WIW_CLI ?? resolve(import.meta.dirname, '../../dist/cli.js');

export interface RunCliOptions {
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  /** Environment on top of the runner's (whose WIW_* settings are left out); undefined removes a variable. */
  env?: Record<string, string | undefined>;
}

/** The command line that runs `workload-identity-webhook <args>`: node, the built CLI, the args. */
export function cliCommand(args: string[]): [string, string[]] {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" first (scripts/dev.sh test does)`);
  return [process.execPath, [CLI, ...args]];
}

/** The environment a CLI started by a test sees: the runner's without WIW_* settings, plus `env`. */
export function cliEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('WIW_')));
  const merged: NodeJS.ProcessEnv = { ...base, ...env };
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k];
  return merged;
}

/**
 * Runs `workload-identity-webhook <args>` to its exit, synchronously: for the commands that talk
 * to no server of this test process (offline, or to a kube-apiserver it started). One that does
 * (an issuer or a stand-in served here) takes runCliAsync, or it would wait on a server that
 * cannot answer while this process is blocked.
 */
export function runCli(args: string[], options: RunCliOptions = {}): Outcome {
  const [command, argv] = cliCommand(args);
  return runToExit(command, argv, { input: options.input, env: cliEnv(options.env) });
}

/** runCli with this process's event loop left running while the command runs. */
export function runCliAsync(args: string[], options: RunCliOptions = {}): Promise<Outcome> {
  const [command, argv] = cliCommand(args);
  return runToExitAsync(command, argv, { input: options.input, env: cliEnv(options.env) });
}

export type LogLine = Record<string, unknown>;

export interface LoggingProcess {
  process: Managed;
  /** The JSON log lines so far (a copy), in order. */
  logs(): LogLine[];
  /** The first log line whose `msg` is `msg`; throws with the log's tail if the process exits first. */
  waitForLog(msg: string, what: string, timeoutMs?: number): Promise<LogLine>;
  stop(): Promise<void>;
}

export interface LoggingOptions {
  /** Environment on top of the runner's (whose WIW_* settings are left out). */
  env?: Record<string, string>;
  /** Starts the command through a wrapper (the benchmark puts it in a memory cgroup). */
  wrap?: (command: string, args: string[]) => [string, string[]];
}

/** Starts `workload-identity-webhook <args>` from the built CLI, its output appended to `logPath`. */
export function startCli(name: string, args: string[], logPath: string, options: LoggingOptions = {}): LoggingProcess {
  const [command, argv] = cliCommand(args);
  return startLogging(name, command, argv, logPath, options);
}

/** Starts `command args`, its output appended to `logPath`, and reads its JSON log lines. */
export function startLogging(
  name: string,
  command: string,
  args: string[],
  logPath: string,
  options: LoggingOptions = {},
): LoggingProcess {
  const withoutSettings = Object.fromEntries(
    Object.keys(process.env)
      .filter((k) => k.startsWith('WIW_'))
      .map((k) => [k, undefined]),
  );
  const [cmd, cmdArgs] = (options.wrap ?? ((c, a) => [c, a]))(command, args);
  const proc = startProcess(name, cmd, cmdArgs, logPath, { ...withoutSettings, ...options.env });
  const logs = jsonLogReader(logPath);
  return {
    process: proc,
    logs,
    waitForLog: (msg, what, timeoutMs = 20_000) =>
      until(
        what,
        () => {
          // The exit is read before the log, so a line written just before the exit still counts.
          const exited = proc.exitStatus() !== null;
          const line = logs().find((l) => l.msg === msg);
          if (line) return line;
          if (exited)
            throw new GiveUp(`${name} exited (${proc.exitStatus()}) before logging "${msg}":\n${proc.logTail(20)}`);
          return undefined;
        },
        timeoutMs,
      ),
    stop: () => proc.stop(),
  };
}

/**
 * Reads a growing log file from where it left off: only complete lines (pino ends each with a
 * newline, which never occurs inside a UTF-8 sequence), the JSON ones parsed.
 */
function jsonLogReader(logPath: string): () => LogLine[] {
  const lines: LogLine[] = [];
  let offset = 0;
  return () => {
    if (!existsSync(logPath)) return [];
    const fd = openSync(logPath, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size <= offset) return lines.slice();
      const chunk = Buffer.alloc(size - offset);
      const read = readSync(fd, chunk, 0, chunk.length, offset);
      const end = chunk.subarray(0, read).lastIndexOf(0x0a);
      if (end < 0) return lines.slice();
      const parsed = chunk
        .subarray(0, end)
        .toString('utf8')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as LogLine);
      // Committed only once every line parsed, so a line that is not JSON throws on each call.
      lines.push(...parsed);
      offset += end + 1;
      return lines.slice();
    } finally {
      closeSync(fd);
    }
  };
}
