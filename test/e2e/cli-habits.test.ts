// The command line's habits, as scripts and terminals meet them: distinct exit codes for bad usage
// (2) and for "could not check" (3), documented in help; -o yaml wherever -o json is; colours only
// on a terminal without NO_COLOR (or with FORCE_COLOR), painted by util.styleText; --context on
// every command that reads a kubeconfig. No cluster is needed: the kubeconfig's API servers are
// closed ports, which doctor reports by address. Runs the built CLI (test/harness/cli-process.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { COMMANDS, commandHelp, EXIT, usage } from '../../src/cli-args.ts';
import { shellQuote } from '../../src/shell.ts';
import { cliCommand, cliEnv, runCli } from '../harness/cli-process.ts';
import { freePorts } from '../harness/control-plane.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = resolve(ROOT, 'examples/aws.yaml');
const ISSUER = 'https://oidc.example.com/cluster-a';

let dir: string;
let kubeconfig: string;
let ports: number[];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wiw-cli-habits-'));
  ports = await freePorts(2);
  kubeconfig = join(dir, 'kubeconfig');
  const cluster = (name: string, port: number) => ({ name, cluster: { server: `https://127.0.0.1:${port}` } });
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [cluster('one', ports[0]), cluster('two', ports[1])],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [
        { name: 'one', context: { cluster: 'one', user: 'u' } },
        { name: 'two', context: { cluster: 'two', user: 'u' } },
      ],
      'current-context': 'one',
    }),
  );
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Env = Record<string, string | undefined>;

/** The environment without the colour switches a test run may carry. */
function plainEnv(extra: Env = {}): Env {
  return { NO_COLOR: undefined, FORCE_COLOR: undefined, NODE_DISABLE_COLORS: undefined, ...extra };
}

/**
 * A person's terminal: TERM names one, and no CI variable is set (Node's colour depth is 2 colours,
 * i.e. none, under CI=true or without TERM; CI runs the suite with CI=true and may have no TERM).
 */
function terminalEnv(extra: Env = {}): Env {
  return { ...plainEnv({ TERM: 'xterm-256color', ...extra }), CI: undefined };
}

/** The CLI with its output piped, as a script runs it. */
const cli = (args: string[], env: Env = plainEnv()) => runCli(args, { env });

/** The CLI on a terminal: util-linux's script(1) gives it a pseudo-terminal; its exit code is the CLI's. */
function onTerminal(args: string[], env: Env) {
  const [node, argv] = cliCommand(args);
  const command = [node, ...argv].map(shellQuote).join(' ');
  const r = spawnSync('script', ['-q', '-e', '-c', command, '/dev/null'], {
    encoding: 'utf8',
    env: cliEnv({ ...env, TERM: 'xterm-256color' }),
  });
  return { code: r.status, output: r.stdout };
}

/** An SGR colour sequence (not the progress line's cursor control). */
const ESC = '\u001b';
const COLOUR = new RegExp(`${ESC}\\[3\\d(;\\d+)*m`);

describe('exit codes', () => {
  test('help and doctor --help say them; the codes are distinct', () => {
    assert.equal(new Set(Object.values(EXIT)).size, 4);
    assert.match(
      usage(),
      /Exit codes: 0 done \(all good\), 1 a problem found or the object denied, 2 bad usage \(a flag,\nvalue or input file\), 3 could not check/,
    );
    assert.match(commandHelp('doctor'), /2 bad usage, 3 something\ncould not be checked/);
    assert.match(commandHelp('trust'), /2 bad usage, 3 the cluster or its issuer could not\nbe read/);
  });

  test('bad usage is 2: an unknown flag, a bad -o, an unreadable file, a bad value, an unknown context', () => {
    for (const [args, message] of [
      [['doctor', '--namespce', 'apps'], /did you mean --namespace/],
      [['doctor', '-o', 'xml'], /-o xml: expected text, json or yaml/],
      [['trust', '-f', join(dir, 'missing.yaml'), '--issuer', ISSUER], /ENOENT/],
      [['doctor', '--aws-token-expiration', 'soon'], /--aws-token-expiration="soon" is not a whole number/],
      [['doctor', '--kubeconfig', kubeconfig, '--context', 'three'], /--context "three": .*no such context/],
    ] as const) {
      const r = cli([...args]);
      assert.equal(r.code, EXIT.usage, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
  });

  test('could not check is 3: doctor, trust and issuer publish when the API server cannot be reached', () => {
    const doctor = cli(['doctor', '--kubeconfig', kubeconfig, '-o', 'json']);
    assert.equal(doctor.code, EXIT.unchecked, doctor.stderr);
    const report = JSON.parse(doctor.stdout) as { result: string; exitCode: number };
    assert.deepEqual([report.result, report.exitCode], ['incomplete', EXIT.unchecked]);
    for (const args of [
      ['trust', '--kubeconfig', kubeconfig],
      ['trust', '--kubeconfig', kubeconfig, '--issuer', ISSUER],
      ['issuer', 'publish', '--kubeconfig', kubeconfig, '--dir', join(dir, 'site')],
    ]) {
      const r = cli(args);
      assert.equal(r.code, EXIT.unchecked, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^error/);
    }
  });
});

describe('-o yaml wherever -o json is', () => {
  test('every command with -o json takes -o yaml', () => {
    const withJson = Object.entries(COMMANDS).filter(([, c]) => c.outputs?.includes('json'));
    assert.ok(withJson.length >= 3, withJson.map(([n]) => n).join(' '));
    for (const [name, c] of withJson) {
      assert.ok(c.outputs!.includes('yaml'), `${name} -o yaml`);
      assert.match(commandHelp(name), /-o, --output [a-z|]*yaml/, `${name} --help`);
    }
  });

  test('doctor and trust: the same data as YAML as as JSON', () => {
    for (const args of [
      ['doctor', '--kubeconfig', kubeconfig],
      ['trust', '-f', EXAMPLE, '--issuer', ISSUER],
    ]) {
      const json = cli([...args, '-o', 'json']);
      const yaml = cli([...args, '-o', 'yaml']);
      assert.equal(yaml.code, json.code, yaml.stderr);
      assert.ok(!yaml.stdout.trimStart().startsWith('{'), 'YAML, not JSON');
      const strip = (o: { checks?: { ms?: number }[] }) => ({ ...o, checks: o.checks?.map((c) => ({ ...c, ms: 0 })) });
      assert.deepEqual(strip(parse(yaml.stdout)), strip(JSON.parse(json.stdout)), args[0]);
    }
  });
});

describe('colours', () => {
  // A function: the kubeconfig is written in before().
  const doctor = () => ['doctor', '--kubeconfig', kubeconfig];

  test('on a terminal the verdicts are coloured; with NO_COLOR they are not', () => {
    const coloured = onTerminal(doctor(), terminalEnv());
    assert.equal(coloured.code, EXIT.unchecked, coloured.output);
    assert.ok(coloured.output.includes(`${ESC}[35m??  ${ESC}[39m api-server`), coloured.output);
    const plain = onTerminal(doctor(), terminalEnv({ NO_COLOR: '1' }));
    assert.equal(plain.code, EXIT.unchecked);
    assert.match(plain.output, /^\?\? {3}api-server/m);
    assert.doesNotMatch(plain.output, COLOUR);
  });

  test('into a pipe there are none, unless FORCE_COLOR asks', () => {
    const piped = cli(doctor());
    assert.match(piped.stdout, /^\?\? {3}api-server/m);
    assert.ok(!(piped.stdout + piped.stderr).includes(ESC), 'no colour and no progress line');
    assert.match(cli(doctor(), plainEnv({ FORCE_COLOR: '1' })).stdout, COLOUR);
  });
});

describe('--context', () => {
  const readsKubeconfig = Object.entries(COMMANDS).filter(([, c]) => c.settings.includes('kubeconfig'));

  test('every command that reads a kubeconfig takes --context, and its help says so', () => {
    assert.deepEqual(readsKubeconfig.map(([n]) => n).sort(), [
      'doctor',
      'issuer publish',
      'serve',
      'token-requestor',
      'trust',
    ]);
    for (const [name, c] of readsKubeconfig) {
      assert.ok(c.settings.includes('kubeContext'), name);
      assert.match(commandHelp(name), /--context VALUE +The kubeconfig's context to use/, name);
    }
  });

  test('each of them reads it: a context the kubeconfig lacks is named, exit 2', () => {
    const base = ['--kubeconfig', kubeconfig, '--context', 'three'];
    for (const args of [
      ['serve', '--self-signed', '--port', '0', '--metrics-port', '0', ...base],
      ['token-requestor', '--lease-namespace', 'wiw', '--identity', 'me', '--namespaces', 'apps', ...base],
      ['doctor', ...base],
      ['trust', ...base],
      ['issuer', 'publish', '--dir', join(dir, 'site'), ...base],
    ]) {
      const r = cli(args);
      assert.equal(r.code, EXIT.usage, `${args.join(' ')}: ${r.stderr}`);
      assert.match(
        r.stdout + r.stderr,
        /--context \\?"three\\?": the kubeconfig has no such context \(it has \\?"one\\?", \\?"two\\?"\)/,
        args[0],
      );
    }
  });

  test("doctor talks to the context's API server, not the current one's", () => {
    const current = cli(['doctor', '--kubeconfig', kubeconfig, '-o', 'json']);
    const two = cli(['doctor', '--kubeconfig', kubeconfig, '--context', 'two', '-o', 'json']);
    const message = (r: { stdout: string }) =>
      (JSON.parse(r.stdout) as { checks: { message: string }[] }).checks[0].message;
    assert.match(message(current), new RegExp(`https://127\\.0\\.0\\.1:${ports[0]}`));
    assert.match(message(two), new RegExp(`https://127\\.0\\.0\\.1:${ports[1]}`));
  });
});
