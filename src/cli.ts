#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { configHelp, isBooleanFlag, isConfigFlag, loadConfig } from './config.ts';
import { ConfigError, WebhookError } from './errors.ts';
import { createLogger } from './log.ts';
import { previewPod, type OutputFormat } from './preview.ts';
import { createProviders } from './providers/index.ts';
import { createSecretProviders } from './providers/secret-index.ts';
import { isSecretPreview, previewSecret } from './preview-secret.ts';
import { loadPreviewPolicy, policyReport } from './policy/preview.ts';
import { isRequestorFlag, loadRequestorConfig, requestorHelp } from './token-requestor/config.ts';

const USAGE = `Usage:
  workload-identity-webhook serve [flags]
  workload-identity-webhook preview -f FILE [-f FILE ...] [--old FILE] [--policy FILE ...] [-o yaml|json|patch] [flags]
  workload-identity-webhook check-policy -f FILE [-f FILE ...]
  workload-identity-webhook token-requestor [flags]
  workload-identity-webhook help

preview runs the same mutation core offline. Input: YAML or JSON documents (use - for stdin):
ServiceAccounts standing in for the cluster's and exactly one Pod, or exactly one Secret (a
GEP-26 labelled Secret; --old FILE holds its stored version, to preview an UPDATE). Exit 0
admitted, 1 denied (message on stderr), 2 bad usage or unreadable input. --policy FILE judges
the Pod with the tenant policies (WorkloadIdentityPolicy objects, docs/policy.md) of FILE, and
Namespaces among the documents stand in for the cluster's labels.

check-policy compiles tenant policies and runs their examples, as the webhook does before using
them: exit 0 when every policy is good, 1 otherwise (each problem on stdout).

token-requestor keeps a fresh ServiceAccount token in every Secret labelled
workload-identity-webhook.io/provider (see docs/secrets.md). Run it as its own Deployment: it
alone needs access to Secrets. One instance writes at a time (a coordination.k8s.io Lease).

Flags (each also read from the environment variable shown):
${configHelp()}

token-requestor flags (besides --kubeconfig, --log-level, --metrics-port, --metrics-host and the
provider and Secret flags above):
${requestorHelp()}`;

class UsageError extends Error {}

interface ParsedArgs {
  command: string;
  flags: Map<string, string>;
  files: string[];
  output: OutputFormat;
  /** preview: the stored version of the Secret, for an UPDATE. */
  old?: string;
  /** preview: tenant policy files. */
  policies: string[];
}

export function parseArgs(argv: string[]): ParsedArgs {
  const [command = 'help', ...rest] = argv;
  const flags = new Map<string, string>();
  const files: string[] = [];
  let output: OutputFormat = 'yaml';
  let old: string | undefined;
  const policies: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const takeValue = (name: string, inline: string | undefined): string => {
      if (inline !== undefined) return inline;
      const next = rest[i + 1];
      if (next === undefined) throw new UsageError(`${name} needs a value`);
      i++;
      return next;
    };
    if (arg === '-f' || arg === '--filename' || arg.startsWith('--filename=')) {
      files.push(takeValue('-f', arg.startsWith('--filename=') ? arg.slice(11) : undefined));
    } else if (arg === '-o' || arg === '--output' || arg.startsWith('--output=')) {
      const v = takeValue('-o', arg.startsWith('--output=') ? arg.slice(9) : undefined);
      if (v !== 'yaml' && v !== 'json' && v !== 'patch') throw new UsageError(`-o ${v}: expected yaml, json or patch`);
      output = v;
    } else if (arg === '--policy' || arg.startsWith('--policy=')) {
      policies.push(takeValue('--policy', arg.startsWith('--policy=') ? arg.slice(9) : undefined));
    } else if (arg === '--old' || arg.startsWith('--old=')) {
      old = takeValue('--old', arg.startsWith('--old=') ? arg.slice(6) : undefined);
    } else if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = arg.slice(2, eq === -1 ? undefined : eq);
      if (!isConfigFlag(name) && !(command === 'token-requestor' && isRequestorFlag(name))) throw new UsageError(`unknown flag --${name}`);
      const inline = eq === -1 ? undefined : arg.slice(eq + 1);
      flags.set(name, isBooleanFlag(name) && inline === undefined ? 'true' : takeValue(`--${name}`, inline));
    } else {
      throw new UsageError(`unexpected argument "${arg}"`);
    }
  }
  return { command, flags, files, output, old, policies };
}

function readInput(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new WebhookError('WIW_BAD_INPUT', `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

async function main(argv: string[]): Promise<number> {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    switch (args.command) {
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(USAGE + '\n');
        return 0;
      case 'serve': {
        const config = loadConfig(args.flags);
        const log = createLogger(config.logLevel);
        // Loaded here so preview does not pay for the server and the Kubernetes client.
        const { serve } = await import('./server.ts');
        const server = await serve(config, log);
        const stop = () => void server.shutdown().then(() => process.exit(0));
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        return -1;
      }
      case 'preview': {
        if (args.files.length === 0) throw new UsageError('preview needs at least one -f FILE');
        const config = loadConfig(args.flags);
        const documents = args.files.map((source) => ({ source, text: readInput(source) }));
        const old = args.old === undefined ? undefined : { documents: [{ source: args.old, text: readInput(args.old) }] };
        const policyFiles = [...args.policies, ...(config.policyFile ? [config.policyFile] : [])];
        const policy = policyFiles.length > 0 ? loadPreviewPolicy(policyFiles, config) : undefined;
        for (const w of policy?.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
        const secret = old || isSecretPreview({ documents });
        if (secret && policy) process.stderr.write('warning: tenant policy is previewed for Pods only; the Secret is previewed without it\n');
        const result = secret
          ? previewSecret({ providers: createSecretProviders(config), defaultTokenPath: config.secretTokenPath }, { documents }, old, args.output)
          : previewPod(createProviders(config), { documents }, args.output, policy);
        for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
        if (!result.allowed) {
          process.stderr.write(`denied (${result.denial.reason}): ${result.denial.message}\n`);
          return 1;
        }
        process.stdout.write(result.output);
        return 0;
      }
      case 'check-policy': {
        if (args.files.length === 0) throw new UsageError('check-policy needs at least one -f FILE');
        const config = loadConfig(args.flags);
        const report = policyReport(loadPreviewPolicy(args.files, config).results);
        process.stdout.write(report.lines.join('\n') + '\n');
        return report.ok ? 0 : 1;
      }
      case 'token-requestor': {
        const config = loadConfig(args.flags);
        const requestorConfig = loadRequestorConfig(args.flags);
        const log = createLogger(config.logLevel);
        const { runTokenRequestor } = await import('./token-requestor/run.ts');
        const running = await runTokenRequestor(config, requestorConfig, log);
        const stop = () => void running.shutdown().then(() => process.exit(0));
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        return -1;
      }
      default:
        throw new UsageError(`unknown command "${args.command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    if (err instanceof ConfigError || err instanceof WebhookError) {
      process.stderr.write(`error [${err.code}]: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`error: ${(err as Error).stack ?? String(err)}\n`);
    return 2;
  }
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
});
