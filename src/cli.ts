#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { completeConfig, configHelp, isBooleanFlag, isConfigFlag, loadConfig } from './config.ts';
import { ConfigError, WebhookError } from './errors.ts';
import { createLogger } from './log.ts';
import { printable } from './shell.ts';
import { previewPod, type OutputFormat } from './preview.ts';
import { createProviders, createSecretProviders } from './clouds/index.ts';
import { isSecretPreview, previewSecret } from './preview-secret.ts';
import { loadPreviewPolicy, policyReport } from './policy/preview.ts';
import { isRequestorFlag, loadRequestorConfig, requestorHelp } from './token-requestor/config.ts';

const USAGE = `Usage:
  workload-identity-webhook serve [flags]
  workload-identity-webhook preview -f FILE [-f FILE ...] [--old FILE] [--policy FILE ...] [-o yaml|json|patch] [flags]
  workload-identity-webhook check-policy -f FILE [-f FILE ...]
  workload-identity-webhook token-requestor [flags]
  workload-identity-webhook doctor [--namespace NS] [--issuer-ca FILE] [-o text|json] [flags]
  workload-identity-webhook trust [-f FILE ... --issuer URL] [--namespace NS] [-o text|json] [flags]
  workload-identity-webhook issuer publish --dir DIR [--issuer URL] [--key-file FILE ...] [flags]
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

doctor checks the cluster's side of the handshake with the clouds (docs/trust.md): discovery, JWKS,
the public issuer URL, and the token of every ServiceAccount with an identity verified against the
published keys. Exit 0 all good, 1 a problem found (each with its fix), 2 something could not be
checked. --issuer-ca FILE trusts a private CA for the public issuer URL.

trust prints, per cloud, the configuration that makes each identity's token accepted: the AWS IAM
OIDC provider and role trust policies, the Azure federated identity credentials, the Google pool
provider and service account bindings, with the aws / az / gcloud commands. Reads the cluster
(--kubeconfig), or manifests offline (-f FILE, with --issuer URL).

issuer publish writes .well-known/openid-configuration and openid/v1/jwks into DIR for static
hosting, from the API server's keys or from --key-file FILE (the --service-account-key-file
files), and prints the kube-apiserver flags that point tokens at them.

Flags (each also read from the environment variable shown):
${configHelp()}

token-requestor flags (besides --kubeconfig, --log-level, --metrics-port, --metrics-host and the
provider and Secret flags above):
${requestorHelp()}`;

class UsageError extends Error {}

/** Flags of one subcommand, besides the configuration flags; repeatable ones collect every value. */
const COMMAND_FLAGS: Record<string, readonly string[]> = {
  doctor: ['issuer-ca', 'namespace'],
  trust: ['issuer', 'namespace'],
  'issuer publish': ['issuer', 'dir', 'key-file'],
};
const OUTPUTS: Record<string, readonly string[]> = {
  preview: ['yaml', 'json', 'patch'],
  doctor: ['text', 'json'],
  trust: ['text', 'json'],
};

interface ParsedArgs {
  command: string;
  flags: Map<string, string>;
  files: string[];
  output: OutputFormat;
  /** -o of doctor and trust: text (default) or json. */
  reportOutput: 'text' | 'json';
  /** COMMAND_FLAGS values. */
  commandFlags: Map<string, string[]>;
  /** preview: the stored version of the Secret, for an UPDATE. */
  old?: string;
  /** preview: tenant policy files. */
  policies: string[];
}

export function parseArgs(argv: string[]): ParsedArgs {
  let [command = 'help', ...rest] = argv;
  if (command === 'issuer') {
    if (rest[0] !== 'publish') throw new UsageError(`issuer ${rest[0] ?? ''}: expected "issuer publish"`);
    command = 'issuer publish';
    rest = rest.slice(1);
  }
  const commandFlags = new Map<string, string[]>();
  let reportOutput: 'text' | 'json' = 'text';
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
      const allowed = OUTPUTS[command];
      if (!allowed) throw new UsageError(`${command} has no -o`);
      if (!allowed.includes(v))
        throw new UsageError(`-o ${v}: expected ${allowed.slice(0, -1).join(', ')} or ${allowed.at(-1)}`);
      if (command === 'doctor' || command === 'trust') reportOutput = v as 'text' | 'json';
      else output = v as OutputFormat;
    } else if (
      (arg === '-n' || arg.startsWith('--')) &&
      COMMAND_FLAGS[command]?.includes(arg === '-n' ? 'namespace' : arg.slice(2).split('=')[0])
    ) {
      const name = arg === '-n' ? 'namespace' : arg.slice(2).split('=')[0];
      const eq = arg.indexOf('=');
      const value = takeValue(`--${name}`, eq === -1 ? undefined : arg.slice(eq + 1));
      commandFlags.set(name, [...(commandFlags.get(name) ?? []), value]);
    } else if (arg === '--policy' || arg.startsWith('--policy=')) {
      policies.push(takeValue('--policy', arg.startsWith('--policy=') ? arg.slice(9) : undefined));
    } else if (arg === '--old' || arg.startsWith('--old=')) {
      old = takeValue('--old', arg.startsWith('--old=') ? arg.slice(6) : undefined);
    } else if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = arg.slice(2, eq === -1 ? undefined : eq);
      if (!isConfigFlag(name) && !(command === 'token-requestor' && isRequestorFlag(name)))
        throw new UsageError(`unknown flag --${name}`);
      const inline = eq === -1 ? undefined : arg.slice(eq + 1);
      flags.set(name, isBooleanFlag(name) && inline === undefined ? 'true' : takeValue(`--${name}`, inline));
    } else {
      throw new UsageError(`unexpected argument "${arg}"`);
    }
  }
  return { command, flags, files, output, reportOutput, commandFlags, old, policies };
}

function readInput(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new WebhookError(
      'WIW_BAD_INPUT',
      `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
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
        const config = await completeConfig(loadConfig(args.flags));
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
        const config = await completeConfig(loadConfig(args.flags));
        const documents = args.files.map((source) => ({ source, text: readInput(source) }));
        const old =
          args.old === undefined ? undefined : { documents: [{ source: args.old, text: readInput(args.old) }] };
        const policyFiles = [...args.policies, ...(config.policyFile ? [config.policyFile] : [])];
        const policy = policyFiles.length > 0 ? loadPreviewPolicy(policyFiles, config) : undefined;
        for (const w of policy?.warnings ?? []) process.stderr.write(`warning: ${printable(w)}\n`);
        const secret = old || isSecretPreview({ documents });
        if (secret && policy)
          process.stderr.write(
            'warning: tenant policy is previewed for Pods only; the Secret is previewed without it\n',
          );
        const result = secret
          ? previewSecret(
              { providers: createSecretProviders(config), defaultTokenPath: config.secretTokenPath },
              { documents },
              old,
              args.output,
            )
          : previewPod(createProviders(config), { documents }, args.output, policy);
        for (const w of result.warnings) process.stderr.write(`warning: ${printable(w)}\n`);
        if (!result.allowed) {
          process.stderr.write(`denied (${result.denial.reason}): ${printable(result.denial.message)}\n`);
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
      case 'doctor':
      case 'trust':
      case 'issuer publish': {
        const { runIssuerCommand } = await import('./commands.ts');
        const config = await completeConfig(loadConfig(args.flags));
        const one = (name: string): string | undefined => {
          const values = args.commandFlags.get(name);
          if (values && values.length > 1) throw new UsageError(`--${name} given ${values.length} times`);
          return values?.[0];
        };
        const result = await runIssuerCommand(args.command, {
          config,
          files: args.files.map((source) => ({ source, text: readInput(source) })),
          output: args.reportOutput,
          issuer: one('issuer'),
          issuerCa: one('issuer-ca'),
          namespace: one('namespace'),
          dir: one('dir'),
          keyFiles: args.commandFlags.get('key-file') ?? [],
        });
        for (const w of result.warnings) process.stderr.write(`warning: ${printable(w)}\n`);
        process.stdout.write(result.output);
        return result.code;
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
      process.stderr.write(`error [${err.code}]: ${printable(err.message)}\n`);
      return 2;
    }
    process.stderr.write(`error: ${(err as Error).stack ?? String(err)}\n`);
    return 2;
  }
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
});
