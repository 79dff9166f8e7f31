#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { commandHelp, EXIT, PROGRAM, type ParsedArgs, parseArgs, usage, VERSION } from './cli-args.ts';
import { completeConfig, loadConfig } from './config.ts';
import { ioProblem, UsageError, WebhookError } from './errors.ts';
import { createLogger } from './log.ts';
import { printable } from './shell.ts';
import type { DataOutput } from './commands/cluster.ts';
import type { OutputFormat } from './commands/preview.ts';
import type { Owner } from './doctor/owners.ts';
import type { Progress } from './doctor/progress.ts';
// Each command loads what it needs when it runs: `serve` does not carry preview, tenant policy
// (CEL), the token requestor or doctor in its memory.

function readInput(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new WebhookError('WIW_BAD_INPUT', `cannot read ${file}: ${ioProblem(err)}`);
  }
}

/** A long-running command (serve, token-requestor): it runs until SIGTERM or SIGINT stops it. */
interface Running {
  shutdown(): Promise<void>;
}

/** How a command ends: its exit code, or running on until a signal. */
type Outcome = number | Running;

async function main(argv: string[]): Promise<Outcome> {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) return usageError(err);
    throw err;
  }
  if (args.help) {
    process.stdout.write(args.command === 'help' ? usage() : commandHelp(args.command));
    return 0;
  }
  try {
    return await run(args);
  } catch (err) {
    if (err instanceof UsageError) return usageError(err, args.command);
    if (err instanceof WebhookError) {
      process.stderr.write(`error [${err.code}]: ${printable(err.message)}\n`);
      return USAGE_CODES.has(err.code) ? EXIT.usage : EXIT.unchecked;
    }
    process.stderr.write(`error: ${(err as Error).stack ?? String(err)}\n`);
    return EXIT.unchecked;
  }
}

/**
 * Errors that are the caller's to fix in its input or settings; any other: could not check. (A
 * UsageError, WIW_BAD_USAGE, is answered before, with where to read more.)
 */
const USAGE_CODES: ReadonlySet<string> = new Set(['WIW_INVALID_CONFIG', 'WIW_BAD_INPUT', 'WIW_BAD_POLICY_FILE']);

/** Exit 2 with the reason and where to read more: the command's help, or the list of commands. */
function usageError(err: UsageError, command = err.command): number {
  const more = command ? `"${PROGRAM} ${command} --help"` : `"${PROGRAM} help"`;
  process.stderr.write(`error: ${printable(err.message)}\nRun ${more} for usage.\n`);
  return EXIT.usage;
}

function values(args: ParsedArgs, name: string): string[] {
  return args.own.get(name) ?? [];
}

async function run(args: ParsedArgs): Promise<Outcome> {
  switch (args.command) {
    case 'version':
      process.stdout.write(`${PROGRAM} ${VERSION}\n`);
      return 0;
    case 'serve': {
      const config = await completeConfig(loadConfig(args.flags));
      const log = createLogger(config.logLevel, undefined, config.logFormat);
      log.info({ version: VERSION, node: process.version }, `${PROGRAM} ${VERSION} starting`);
      // Loaded here so preview does not pay for the server and the Kubernetes client.
      const { serve } = await import('./http/server.ts');
      return serve(config, log);
    }
    case 'preview':
      return preview(args);
    case 'check-policy': {
      const files = values(args, 'filename');
      if (files.length === 0) throw new UsageError('check-policy needs at least one -f FILE', args.command);
      const config = loadConfig(args.flags);
      const { loadPreviewPolicy, policyReport } = await import('./policy/preview.ts');
      const report = policyReport(loadPreviewPolicy(files, config).results);
      process.stdout.write(report.lines.join('\n') + '\n');
      return report.ok ? 0 : 1;
    }
    case 'token-requestor': {
      const config = loadConfig(args.flags);
      const { loadRequestorConfig } = await import('./token-requestor/config.ts');
      const requestorConfig = loadRequestorConfig(args.flags);
      const log = createLogger(config.logLevel, undefined, config.logFormat);
      log.info({ version: VERSION, node: process.version }, `${PROGRAM} ${VERSION} token-requestor starting`);
      const { runTokenRequestor } = await import('./token-requestor/run.ts');
      return runTokenRequestor(config, requestorConfig, log);
    }
    default:
      return issuerCommand(args);
  }
}

async function preview(args: ParsedArgs): Promise<number> {
  const files = values(args, 'filename');
  if (files.length === 0) throw new UsageError('preview needs at least one -f FILE', args.command);
  const config = await completeConfig(loadConfig(args.flags));
  const [{ previewPod }, { isSecretPreview, previewSecret }, { loadPreviewPolicy }, clouds] = await Promise.all([
    import('./commands/preview.ts'),
    import('./commands/preview-secret.ts'),
    import('./policy/preview.ts'),
    import('./clouds/index.ts'),
  ]);
  const documents = files.map((source) => ({ source, text: readInput(source) }));
  const oldFile = values(args, 'old').at(-1);
  const old = oldFile === undefined ? undefined : { documents: [{ source: oldFile, text: readInput(oldFile) }] };
  const policyFiles = [...values(args, 'policy'), ...(config.policyFile ? [config.policyFile] : [])];
  const policy = policyFiles.length > 0 ? loadPreviewPolicy(policyFiles, config) : undefined;
  for (const w of policy?.warnings ?? []) process.stderr.write(`warning: ${printable(w)}\n`);
  const secret = old || isSecretPreview({ documents });
  if (secret && policy)
    process.stderr.write('warning: tenant policy is previewed for Pods only; the Secret is previewed without it\n');
  const output = args.output as OutputFormat;
  const result = secret
    ? previewSecret(
        { providers: clouds.createSecretProviders(config), defaultTokenPath: config.secretTokenPath },
        { documents },
        old,
        output,
      )
    : previewPod(clouds.createProviders(config), { documents }, output, policy);
  for (const w of result.warnings) process.stderr.write(`warning: ${printable(w)}\n`);
  if (!result.allowed) {
    process.stderr.write(`denied (${result.denial.reason}): ${printable(result.denial.message)}\n`);
    return 1;
  }
  process.stdout.write(result.output);
  return 0;
}

/** doctor, trust, issuer publish. */
async function issuerCommand(args: ParsedArgs): Promise<number> {
  const [{ runIssuerCommand }, { progressLine }] = await Promise.all([
    import('./commands/cluster.ts'),
    import('./doctor/progress.ts'),
  ]);
  // The progress line stops before a question is asked on the same terminal.
  const fix = await fixOf(args, () => progress?.done());
  const config = await completeConfig(loadConfig(args.flags));
  const one = (name: string): string | undefined => values(args, name).at(-1);
  // On a terminal: a progress line on stderr while doctor waits, and colours (util.styleText
  // decides for stdout: not with NO_COLOR, nor when it is no terminal, unless FORCE_COLOR).
  const progress: Progress | undefined = args.command === 'doctor' ? progressLine(process.stderr) : undefined;
  const result = await runIssuerCommand(args.command, {
    config,
    files: values(args, 'filename').map((source) => ({ source, text: readInput(source) })),
    output: (args.output ?? 'text') as DataOutput,
    issuer: one('issuer'),
    issuerCa: one('issuer-ca'),
    namespace: one('namespace'),
    dir: one('dir'),
    keyFiles: values(args, 'key-file'),
    progress: progress?.update,
    colourStream: process.stdout,
    fix,
  }).finally(() => progress?.done());
  for (const w of result.warnings) process.stderr.write(`warning: ${printable(w)}\n`);
  process.stdout.write(result.output);
  return result.code;
}

/**
 * doctor --fix restarts workloads: a person confirms on a terminal, a script says --yes. Refused
 * before anything is read when neither can be (no terminal to ask on, no --yes).
 */
async function fixOf(
  args: ParsedArgs,
  beforeAsking: () => void,
): Promise<{ confirm?: (owners: readonly Owner[]) => Promise<boolean> } | undefined> {
  const fix = values(args, 'fix').length > 0;
  const yes = values(args, 'yes').length > 0;
  if (!fix) {
    if (yes) throw new UsageError('--yes confirms --fix; without --fix doctor restarts nothing', args.command);
    return undefined;
  }
  if (yes) return {};
  if (!process.stdin.isTTY || !process.stderr.isTTY)
    throw new UsageError(
      'doctor --fix restarts workloads and asks first on a terminal; there is none here: pass --yes to restart without asking',
      args.command,
    );
  const { confirmRestart } = await import('./doctor/confirm.ts');
  return {
    confirm: (owners) => {
      beforeAsking();
      return confirmRestart(owners, process.stdin, process.stderr);
    },
  };
}

/** A running command shuts down on SIGTERM or SIGINT, then the process exits 0. */
function stopOnSignal(running: Running): void {
  const stop = () => void running.shutdown().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main(process.argv.slice(2)).then((outcome) => {
  if (typeof outcome === 'number') process.exitCode = outcome;
  else stopOnSignal(outcome);
});
