// The command line: each command with its own flags and the settings it reads (src/config.ts is
// the one source of the settings' flags, environment twins and help), parsed by node's
// util.parseArgs; per-command help, and the nearest flag suggested for a mistyped one.
import { readFileSync } from 'node:fs';
import { type ParseArgsOptionsConfig, parseArgs as parseArgv } from 'node:util';
import { errorMessage, UsageError } from './errors.ts';
import { configHelp, identitySettings, settings } from './config.ts';
import { helpRow, type Setting } from './settings.ts';
import { requestorHelp, requestorSettings } from './token-requestor/config.ts';

/** package.json's version: one source with the chart's appVersion and the image's label. */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export const PROGRAM = 'workload-identity-webhook';

/** Exit codes of every command: `help` prints them, README and docs/trust.md repeat them. */
export const EXIT = {
  /** Done; every check passed. */
  ok: 0,
  /** A problem found (doctor, trust, check-policy), or the object denied (preview). */
  problem: 1,
  /** Bad usage: an unknown flag or command, a bad value, an input file that cannot be read. */
  usage: 2,
  /** Could not check: the cluster or an issuer could not be read, or the command failed. */
  unchecked: 3,
} as const;

/** A flag of one command only (not a setting). */
interface OwnFlag {
  name: string;
  short?: string;
  /** The value's placeholder; absent for a switch. */
  value?: string;
  /** Repeatable: every value is kept. */
  multiple?: true;
  description: string;
}

type SettingKey = keyof typeof settings;

interface Command {
  synopsis: string;
  about: string;
  flags: OwnFlag[];
  /** The settings it reads, as flags (each also from its environment twin). */
  settings: readonly SettingKey[];
  /** token-requestor's own settings too. */
  requestor?: true;
  /** -o values, the first the default. */
  outputs?: readonly string[];
}

const IDENTITY = Object.keys(identitySettings) as SettingKey[];
const FILES: OwnFlag = {
  name: 'filename',
  short: 'f',
  value: 'FILE',
  multiple: true,
  description: 'YAML or JSON documents (- for stdin); repeatable',
};
const NAMESPACE: OwnFlag = {
  name: 'namespace',
  short: 'n',
  value: 'NS',
  description: "only this namespace's ServiceAccounts and labelled Secrets",
};
const output = (values: readonly string[]): OwnFlag => ({
  name: 'output',
  short: 'o',
  value: values.join('|'),
  description: `output format (default ${values[0]})`,
});

export const COMMANDS: Record<string, Command> = {
  serve: {
    synopsis: 'serve [flags]',
    about: 'Runs the admission webhook: HTTPS /mutate, /healthz and /readyz, and /metrics on its own port.',
    flags: [],
    settings: Object.keys(settings) as SettingKey[],
  },
  preview: {
    synopsis: 'preview -f FILE [-f FILE ...] [--old FILE] [--policy FILE ...] [-o yaml|json|patch] [flags]',
    about: `Runs the same mutation core offline. Input: YAML or JSON documents (use - for stdin):
ServiceAccounts standing in for the cluster's and exactly one Pod, or exactly one Secret (a
GEP-26 labelled Secret; --old FILE holds its stored version, to preview an UPDATE). Exit 0
admitted, 1 denied (message on stderr), 2 bad usage or unreadable input. --policy FILE judges
the Pod with the tenant policies (WorkloadIdentityPolicy objects, docs/policy.md) of FILE, and
Namespaces among the documents stand in for the cluster's labels.`,
    flags: [
      FILES,
      { name: 'old', value: 'FILE', description: 'the stored version of the Secret, to preview an UPDATE' },
      {
        name: 'policy',
        value: 'FILE',
        multiple: true,
        description: 'tenant policies to judge the Pod with; repeatable',
      },
      output(['yaml', 'json', 'patch']),
    ],
    settings: [...IDENTITY, 'policyFile', 'policyFailureMode'],
    outputs: ['yaml', 'json', 'patch'],
  },
  'check-policy': {
    synopsis: 'check-policy -f FILE [-f FILE ...] [flags]',
    about: `Compiles tenant policies and runs their examples, as the webhook does before using them:
exit 0 when every policy is good, 1 otherwise (each problem on stdout).`,
    flags: [FILES],
    settings: IDENTITY,
  },
  'token-requestor': {
    synopsis: 'token-requestor [flags]',
    about: `Keeps a fresh ServiceAccount token in every Secret labelled
workload-identity-webhook.io/provider (see docs/secrets.md). Run it as its own Deployment: it
alone needs access to Secrets. One instance writes at a time (a coordination.k8s.io Lease).`,
    flags: [],
    settings: [...IDENTITY, 'kubeconfig', 'kubeContext', 'logLevel', 'logFormat', 'metricsPort', 'metricsHost'],
    requestor: true,
  },
  doctor: {
    synopsis: 'doctor [--namespace NS] [--issuer-ca FILE] [--fix [--yes]] [-o text|json|yaml] [flags]',
    about: `Checks the cluster's side of the handshake with the clouds (docs/trust.md): discovery, JWKS,
the public issuer URL, and the token of every ServiceAccount with an identity verified against the
published keys; and lists the running Pods that slipped past the webhook (their ServiceAccount
carries an identity, they have none of it), each with its owner. --fix restarts those owners
(Deployments, StatefulSets, DaemonSets, as kubectl rollout restart), asking first on a terminal;
without one it needs --yes.
Exit 0 all good, 1 a problem found (each with its fix), 2 bad usage, 3 something
could not be checked (and nothing failed). Colours the verdicts on a terminal, unless NO_COLOR is
set; FORCE_COLOR colours them anywhere.`,
    flags: [
      NAMESPACE,
      {
        name: 'fix',
        description: 'restart the owners of the Pods that slipped past (asks first on a terminal)',
      },
      { name: 'yes', short: 'y', description: 'with --fix: restart without asking' },
      { name: 'issuer-ca', value: 'FILE', description: 'a private CA (PEM) trusted for the public issuer URL' },
      output(['text', 'json', 'yaml']),
    ],
    settings: [...IDENTITY, 'kubeconfig', 'kubeContext'],
    outputs: ['text', 'json', 'yaml'],
  },
  trust: {
    synopsis: 'trust [-f FILE ... --issuer URL] [--namespace NS] [-o text|json|yaml] [flags]',
    about: `Prints, per cloud, the configuration that makes each identity's token accepted: the AWS IAM
OIDC provider and role trust policies, the Azure federated identity credentials, the Google pool
provider and service account bindings, with the aws / az / gcloud commands. Reads the cluster
(--kubeconfig, --context), or manifests offline (-f FILE, with --issuer URL). Exit 0, 1 when an
identity is left out (a value not of its form), 2 bad usage, 3 the cluster or its issuer could not
be read.`,
    flags: [
      FILES,
      { name: 'issuer', value: 'URL', description: "the cluster's --service-account-issuer (needed with -f)" },
      NAMESPACE,
      output(['text', 'json', 'yaml']),
    ],
    settings: [...IDENTITY, 'kubeconfig', 'kubeContext'],
    outputs: ['text', 'json', 'yaml'],
  },
  'issuer publish': {
    synopsis: 'issuer publish --dir DIR [--issuer URL] [--key-file FILE ...] [flags]',
    about: `Writes .well-known/openid-configuration and openid/v1/jwks into DIR for static hosting, from
the API server's keys or from --key-file FILE (the --service-account-key-file files), and prints
the kube-apiserver flags that point tokens at them.`,
    flags: [
      { name: 'dir', value: 'DIR', description: 'where to write the documents' },
      { name: 'issuer', value: 'URL', description: 'the URL DIR will be served at (default: the cluster issuer)' },
      {
        name: 'key-file',
        value: 'FILE',
        multiple: true,
        description: 'public or private keys (PEM) instead of the API server JWKS; repeatable',
      },
    ],
    settings: ['kubeconfig', 'kubeContext'],
  },
  version: { synopsis: 'version', about: 'Prints the version.', flags: [], settings: [] },
};

export interface ParsedArgs {
  command: string;
  /** Settings by flag name, as loadConfig and loadRequestorConfig take them. */
  flags: Map<string, string>;
  /** The command's own flags by name: each value given, in order. */
  own: Map<string, string[]>;
  /** -o (the command's default when not given). */
  output?: string;
  /** --help was asked for. */
  help: boolean;
}

function settingOf(command: Command, name: string): Setting<unknown> | undefined {
  const s = command.settings.map((k) => settings[k] as Setting<unknown>).find((x) => x.flag === name);
  if (s || !command.requestor) return s;
  return (Object.values(requestorSettings) as Setting<unknown>[]).find((x) => x.flag === name);
}

/** Every long flag the command takes. */
export function flagsOf(name: string): string[] {
  const c = COMMANDS[name];
  return [
    'help',
    ...c.flags.map((f) => f.name),
    ...c.settings.map((k) => settings[k].flag),
    ...(c.requestor ? Object.values(requestorSettings).map((s) => s.flag) : []),
  ];
}

export function parseArgs(argv: string[]): ParsedArgs {
  const [first, ...rest] = argv;
  if (first === undefined || first === 'help' || first === '--help' || first === '-h') {
    const about = rest[0] === 'issuer' ? 'issuer publish' : rest[0];
    if (about !== undefined && !COMMANDS[about]) throw unknownCommand(about);
    return { command: about ?? 'help', flags: new Map(), own: new Map(), help: true };
  }
  if (first === '--version') return { command: 'version', flags: new Map(), own: new Map(), help: false };
  let name = first;
  let args = rest;
  if (first === 'issuer') {
    if (rest[0] === '--help' || rest[0] === '-h')
      return { command: 'issuer publish', flags: new Map(), own: new Map(), help: true };
    if (rest[0] !== 'publish') throw new UsageError(`issuer ${rest[0] ?? ''}: expected "issuer publish"`);
    name = 'issuer publish';
    args = rest.slice(1);
  }
  const command = COMMANDS[name];
  if (!command) throw unknownCommand(first);
  return parseFlags(name, command, args);
}

/** A command's flags: settings by flag name, its own flags with every value, and -o. */
function parseFlags(name: string, command: Command, given: string[]): ParsedArgs {
  // A switch setting also takes --flag=true|false, which util.parseArgs refuses for a boolean.
  const flags = new Map<string, string>();
  const args = given.filter((arg) => {
    const m = /^--([\w-]+)=(.*)$/s.exec(arg);
    if (!m || settingOf(command, m[1])?.boolean !== true) return true;
    flags.set(m[1], m[2]);
    return false;
  });
  const options = optionsOf(name, command);
  let values: ReturnType<typeof parseArgv>['values'];
  try {
    ({ values } = parseArgv({ args, options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw usageOf(err, args, options, name);
  }
  const own = new Map<string, string[]>();
  for (const [key, value] of Object.entries(values)) {
    if (key === 'help' || value === undefined) continue;
    const mine = command.flags.find((f) => f.name === key);
    if (!mine) flags.set(key, String(value));
    else if (Array.isArray(value) && value.length > 1 && !mine.multiple)
      throw new UsageError(`--${key} given ${value.length} times`, name);
    else own.set(key, (Array.isArray(value) ? value : [value]).map(String));
  }
  return { command: name, flags, own, output: outputOf(name, command, own), help: values.help === true };
}

/** util.parseArgs' options for a command: --help, its own flags, its settings. */
function optionsOf(name: string, command: Command): ParseArgsOptionsConfig {
  const options: ParseArgsOptionsConfig = { help: { type: 'boolean', short: 'h' } };
  // Every value of an own flag is collected: a single-valued one given twice is a mistake, said by parseFlags.
  for (const f of command.flags)
    options[f.name] = { type: f.value ? 'string' : 'boolean', ...(f.short && { short: f.short }), multiple: true };
  for (const flag of flagsOf(name)) {
    const s = settingOf(command, flag);
    if (s) options[flag] = { type: s.boolean ? 'boolean' : 'string' };
  }
  return options;
}

/** -o: the command's default when not given; undefined for a command without one. */
function outputOf(name: string, command: Command, own: Map<string, string[]>): string | undefined {
  if (!command.outputs) return undefined;
  const out = own.get('output')?.at(-1) ?? command.outputs[0];
  if (!command.outputs.includes(out))
    throw new UsageError(
      `-o ${out}: expected ${command.outputs.slice(0, -1).join(', ')} or ${command.outputs.at(-1)}`,
      name,
    );
  return out;
}

/**
 * util.parseArgs' errors, told in this command's terms, with the nearest flag for a mistyped one.
 * Matched by their code; the argument at fault is read from util.parseArgs' own tokens (the first
 * of the kind the code names, as it checks them in order), never from the message's wording.
 */
function usageOf(err: unknown, args: string[], options: ParseArgsOptionsConfig, command: string): UsageError {
  const { tokens } = parseArgv({ args, options, strict: false, allowPositionals: true, tokens: true });
  const flagsGiven = tokens.filter((t) => t.kind === 'option');
  switch (typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const token = flagsGiven.find((t) => !Object.hasOwn(options, t.name));
      if (!token) break;
      if ((token.name === 'o' || token.name === 'output') && !COMMANDS[command].outputs)
        return new UsageError(`${command} has no -o`, command);
      return new UsageError(`unknown flag ${token.rawName} for ${command}${hint(command, token.name)}`, command);
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      for (const token of flagsGiven) {
        const problem = valueProblem(token, options[token.name]?.type);
        if (problem) return new UsageError(problem, command);
      }
      break;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const token = tokens.find((t) => t.kind === 'positional');
      if (token) return new UsageError(`unexpected argument "${token.value}"`, command);
    }
  }
  return new UsageError(errorMessage(err), command);
}

type OptionToken = Extract<NonNullable<ReturnType<typeof parseArgv>['tokens']>[number], { kind: 'option' }>;

/** What util.parseArgs' strict mode refuses in a known flag's value, in the order it checks. */
function valueProblem(token: OptionToken, type: 'string' | 'boolean' | undefined): string | undefined {
  if (type === 'string' && token.value === undefined) return `--${token.name} needs a value`;
  if (type === 'boolean' && token.value !== undefined) return `--${token.name} takes no value`;
  // A value that looks like a flag, not glued on with "=": util.parseArgs calls it ambiguous.
  if (type === 'string' && !token.inlineValue && token.value && token.value.length > 1 && token.value.startsWith('-'))
    return `${token.rawName} needs a value (one that starts with "-" is written ${token.rawName}=VALUE)`;
  return undefined;
}

/** "; did you mean --x?" for the nearest flag of the command, or the commands the flag belongs to. */
function hint(command: string, name: string): string {
  const nearest = closest(name, flagsOf(command));
  if (nearest) return `; did you mean --${nearest}?`;
  const owners = Object.keys(COMMANDS).filter((c) => c !== command && flagsOf(c).includes(name));
  return owners.length > 0 ? ` (a flag of ${owners.join(', ')})` : '';
}

function unknownCommand(name: string): UsageError {
  const nearest = closest(name, Object.keys(COMMANDS));
  return new UsageError(`unknown command "${name}"${nearest ? `; did you mean "${nearest}"?` : ''}`);
}

/** The candidate nearest to `word` by edit distance, when near enough to be a typo. */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row at a time. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = row;
  }
  return previous[b.length];
}

/** `help`: the commands, each with its synopsis. */
export function usage(): string {
  return `Usage:
${Object.values(COMMANDS)
  .map((c) => `  ${PROGRAM} ${c.synopsis}`)
  .join('\n')}
  ${PROGRAM} --version
  ${PROGRAM} help [COMMAND]

Run "${PROGRAM} COMMAND --help" for what a command does and the flags it takes.

Exit codes: ${EXIT.ok} done (all good), ${EXIT.problem} a problem found or the object denied, ${EXIT.usage} bad usage (a flag,
value or input file), ${EXIT.unchecked} could not check (the cluster or an issuer could not be read).
`;
}

/** `COMMAND --help`: what it does, its own flags, and the settings it reads. */
export function commandHelp(name: string): string {
  const c = COMMANDS[name];
  const lines = [`Usage: ${PROGRAM} ${c.synopsis}`, '', c.about];
  if (c.flags.length > 0) {
    lines.push('', 'Flags:');
    for (const f of c.flags) {
      const names = `${f.short ? `-${f.short}, ` : ''}--${f.name}${f.value ? ` ${f.value}` : ''}`;
      lines.push(helpRow(`  ${names}`, f.description));
    }
  }
  if (c.settings.length > 0) {
    lines.push('', 'Settings (each also read from the environment variable shown):', configHelp(c.settings));
  }
  if (c.requestor) lines.push(requestorHelp());
  lines.push(helpRow('  -h, --help', 'this help'));
  return lines.join('\n') + '\n';
}
