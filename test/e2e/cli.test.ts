// The command line as users meet it: --version and version, per-command --help that lists exactly
// the flags the command takes, the nearest flag suggested for a mistyped one, util.parseArgs'
// forms (--flag=value, --flag value, switches, repeatable -f), and serve logging its version.
// Runs the built CLI (test/harness/cli-process.ts): the command line users get.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import { COMMANDS, closest, editDistance, flagsOf, parseArgs, VERSION } from '../../src/cli-args.ts';
import { settings } from '../../src/config.ts';
import { cliCommand, cliEnv, runCli } from '../harness/cli-process.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = resolve(ROOT, 'examples/aws.yaml');

const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { version: string };
const chart = readFileSync(resolve(ROOT, 'charts/workload-identity-webhook/Chart.yaml'), 'utf8');

describe('version', () => {
  test('--version and version print package.json version, which is the chart appVersion', () => {
    assert.equal(VERSION, pkg.version);
    assert.match(chart, new RegExp(`^appVersion: "${pkg.version.replaceAll('.', '\\.')}"$`, 'm'));
    for (const args of [['--version'], ['version']]) {
      const r = runCli(args);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `workload-identity-webhook ${pkg.version}\n`);
    }
  });

  test('serve logs the version first thing at start-up', async () => {
    // A kubeconfig that cannot be read stops serve after its first line, without a cluster.
    const [command, args] = cliCommand([
      'serve',
      '--self-signed',
      '--kubeconfig',
      '/nonexistent',
      '--port',
      '0',
      '--metrics-port',
      '0',
    ]);
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv() });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    const code = await new Promise((done) => child.on('close', done));
    assert.equal(code, 2);
    const first = JSON.parse(stdout.split('\n')[0]) as Record<string, unknown>;
    assert.equal(first.version, pkg.version);
    assert.equal(first.msg, `workload-identity-webhook ${pkg.version} starting`);
  });
});

describe('help', () => {
  test('help lists every command; exit 0', () => {
    const r = runCli(['help']);
    assert.equal(r.code, 0);
    for (const c of Object.values(COMMANDS)) assert.ok(r.stdout.includes(`workload-identity-webhook ${c.synopsis}\n`));
    assert.deepEqual(runCli([]).stdout, r.stdout);
    assert.deepEqual(runCli(['--help']).stdout, r.stdout);
  });

  for (const command of Object.keys(COMMANDS)) {
    test(`${command} --help lists exactly the flags ${command} takes, each accepted; exit 0`, () => {
      const r = runCli([...command.split(' '), '--help']);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stdout.startsWith(`Usage: workload-identity-webhook ${COMMANDS[command].synopsis}\n`));
      const listed = [...r.stdout.matchAll(/^ {2}(?:-\w, )?--([a-z0-9-]+)/gm)].map((m) => m[1]);
      assert.deepEqual(listed.toSorted(), flagsOf(command).toSorted());
      assert.equal(new Set(listed).size, listed.length, 'each flag once');
      for (const flag of flagsOf(command)) {
        if (flag === 'help') continue;
        const line = r.stdout.split('\n').find((l) => new RegExp(`^ {2}(?:-\\w, )?--${flag}(?: |$)`).test(l))!;
        const args = new RegExp(`--${flag} \\S`).test(line)
          ? [`--${flag}`, flag === 'output' ? COMMANDS[command].outputs![0] : 'x']
          : [`--${flag}`];
        assert.doesNotThrow(() => parseArgs([...command.split(' '), ...args]), `${command} takes --${flag}`);
      }
      assert.deepEqual(runCli(['help', ...command.split(' ')]).stdout, r.stdout, `help ${command}`);
    });
  }

  test("serve's help lists every setting of src/config.ts with its environment twin", () => {
    const r = runCli(['serve', '--help']);
    for (const s of Object.values(settings)) {
      assert.ok(r.stdout.includes(`--${s.flag}`), s.flag);
      assert.ok(r.stdout.includes(`[$WIW_${s.flag.toUpperCase().replaceAll('-', '_')}]`), s.flag);
    }
  });

  test('defaults are shown as the flag is written (an octal file mode stays octal)', () => {
    assert.match(runCli(['serve', '--help']).stdout, /--gcp-file-mode VALUE.*\(default 0440\)/);
  });
});

describe('mistakes: exit 2, the reason, the nearest flag, where to read more', () => {
  test('every flag of every command, mistyped by one letter, gets a flag of that command suggested', () => {
    for (const command of Object.keys(COMMANDS)) {
      for (const flag of flagsOf(command).filter((f) => f.length > 4)) {
        const typo = flag.slice(0, 2) + flag.slice(3); // one letter dropped
        if (flagsOf(command).includes(typo)) continue;
        assert.throws(
          () => parseArgs([...command.split(' '), `--${typo}`]),
          (err: Error) => {
            const m = new RegExp(`^unknown flag --${typo} for ${command}; did you mean --([a-z0-9-]+)\\?$`).exec(
              err.message,
            );
            assert.ok(m, `${command} --${typo}: ${err.message}`);
            assert.ok(flagsOf(command).includes(m[1]));
            assert.ok(editDistance(typo, m[1]) <= 1, `${m[1]} is as near as --${flag}`);
            return true;
          },
        );
      }
    }
  });

  test('doctor --help no longer fails; doctor --namespce suggests --namespace', () => {
    const r = runCli(['doctor', '--namespce', 'apps']);
    assert.equal(r.code, 2);
    assert.equal(
      r.stderr,
      'error: unknown flag --namespce for doctor; did you mean --namespace?\n' +
        'Run "workload-identity-webhook doctor --help" for usage.\n',
    );
  });

  test("a command's own usage mistake is told as a flag's is: the reason, then where to read more", () => {
    // Issue 33: one usage path; issuer publish and trust no longer print "error [WIW_BAD_USAGE]" apart.
    const r = runCli(['issuer', 'publish']);
    assert.equal(r.code, 2);
    assert.equal(
      r.stderr,
      'error: issuer publish needs --dir DIR\n' + 'Run "workload-identity-webhook issuer publish --help" for usage.\n',
    );
  });

  test("another command's flag is named as such; a far-off flag gets no guess", () => {
    assert.match(
      runCli(['preview', '-f', EXAMPLE, '--dir', 'x']).stderr,
      /unknown flag --dir for preview \(a flag of issuer publish\)/,
    );
    assert.match(runCli(['trust', '--zzzzzzzz']).stderr, /^error: unknown flag --zzzzzzzz for trust\n/);
  });

  test('a mistyped command gets the nearest command', () => {
    const r = runCli(['doctr']);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /^error: unknown command "doctr"; did you mean "doctor"\?\nRun "workload-identity-webhook help"/,
    );
  });

  test('a missing value, a value that looks like a flag, a stray argument, an -o the command lacks', () => {
    const cases: [string[], RegExp][] = [
      [['preview', '-f', EXAMPLE, '--old'], /^error: --old needs a value\n/],
      [
        ['trust', '--issuer', '--namespace', 'x'],
        /--issuer needs a value \(one that starts with "-" is written --issuer=VALUE\)/,
      ],
      [['preview', '-f', EXAMPLE, 'stray'], /unexpected argument "stray"/],
      [['preview', '-f', EXAMPLE, '-o', 'xml'], /-o xml: expected yaml, json or patch/],
      [['issuer', 'publish', '-o', 'json'], /issuer publish has no -o/],
      [['trust', '--issuer', 'a', '--issuer', 'b'], /--issuer given 2 times/],
      [['issuer', 'list'], /issuer list: expected "issuer publish"/],
      [['preview', '-f', EXAMPLE, '--strict=maybe'], /--strict="maybe" must be true or false/],
    ];
    for (const [args, message] of cases) {
      const r = runCli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
    }
  });
});

describe('util.parseArgs forms', () => {
  test('--flag=value and --flag value; switches bare or =true|false; -f repeatable; -n and -o short', () => {
    const a = parseArgs(['preview', '-f', 'a.yaml', '--filename=b.yaml', '--aws-default-region=eu-west-1', '--strict']);
    assert.deepEqual(a.own.get('filename'), ['a.yaml', 'b.yaml']);
    assert.equal(a.flags.get('aws-default-region'), 'eu-west-1');
    assert.equal(a.flags.get('strict'), 'true');
    assert.equal(a.output, 'yaml');
    assert.equal(parseArgs(['preview', '-f', 'a', '--strict=false']).flags.get('strict'), 'false');
    const d = parseArgs(['doctor', '-n', 'apps', '-o', 'json', '--kubeconfig', '/k']);
    assert.deepEqual(d.own.get('namespace'), ['apps']);
    assert.equal(d.output, 'json');
    assert.equal(d.flags.get('kubeconfig'), '/k');
    const p = parseArgs(['issuer', 'publish', '--dir', 'site', '--key-file', 'a.pem', '--key-file', 'b.pem']);
    assert.equal(p.command, 'issuer publish');
    assert.deepEqual(p.own.get('key-file'), ['a.pem', 'b.pem']);
  });

  test('token-requestor takes its own settings; serve does not', () => {
    assert.equal(parseArgs(['token-requestor', '--lease-name', 'x']).flags.get('lease-name'), 'x');
    assert.throws(() => parseArgs(['serve', '--lease-name', 'x']), /unknown flag --lease-name for serve/);
  });

  test('closest: only a near candidate', () => {
    assert.equal(closest('namespce', ['namespace', 'issuer']), 'namespace');
    assert.equal(closest('zzz', ['namespace', 'issuer']), undefined);
    assert.equal(editDistance('kitten', 'sitting'), 3);
  });
});
