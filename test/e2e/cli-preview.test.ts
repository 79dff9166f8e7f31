// `workload-identity-webhook preview`: the mutation core offline, as an operator runs it: the built
// CLI (test/harness/cli-process.ts).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { runCli } from '../harness/cli-process.ts';
import { OTHER_AWS_ACCOUNT, roleArn } from '../support/identities.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../examples');
const dir = mkdtempSync(join(tmpdir(), 'wiw-preview-'));

const preview = (args: string[], input?: string, env?: Record<string, string>) =>
  runCli(['preview', ...args], { input, env });

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('preview', () => {
  test('prints the mutated Pod as YAML by default and exits 0', () => {
    const r = preview(['-f', join(EXAMPLES, 'aws.yaml')]);
    assert.equal(r.code, 0, r.stderr);
    const pod = parse(r.stdout);
    assert.equal(pod.kind, 'Pod');
    assert.equal(pod.spec.volumes[0].name, 'aws-iam-token');
    assert.ok(pod.spec.containers[0].env.some((e: { name: string }) => e.name === 'AWS_ROLE_ARN'));
    assert.doesNotMatch(r.stdout, /&a\d|\*a\d/, 'no YAML anchors or aliases');
  });

  test('-o json prints JSON, -o patch the JSON Patch', () => {
    const json = preview(['-f', join(EXAMPLES, 'gcp.yaml'), '-o', 'json']);
    assert.equal(JSON.parse(json.stdout).spec.volumes[0].name, 'gcp-iam-token');
    const patch = JSON.parse(preview(['-f', join(EXAMPLES, 'gcp.yaml'), '-o', 'patch']).stdout);
    assert.ok(Array.isArray(patch) && patch.every((op: { op: string }) => op.op === 'add'));
  });

  test('ServiceAccounts and the Pod may come from separate files and stdin; namespace defaults to default', () => {
    const sa = file(
      'sa.json',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: 'x', annotations: { 'eks.amazonaws.com/role-arn': roleArn('x') } },
      }),
    );
    const pod =
      'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {serviceAccountName: x, containers: [{name: c}]}\n';
    const r = preview(['-f', sa, '-f', '-', '-o', 'patch'], pod);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(JSON.parse(r.stdout).length > 0);
  });

  test('a Pod with nothing to inject gives the empty patch []', () => {
    const sa = file(
      'backup-sa.yaml',
      `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: backup, namespace: demo, annotations: {eks.amazonaws.com/role-arn: "${roleArn('backup')}"}}\n`,
    );
    const ok = preview(['-f', sa, '-f', join(EXAMPLES, 'opted-out.yaml'), '-o', 'patch']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), '[]');
  });

  test('a denial exits 1 with the message on stderr', () => {
    const input =
      'kind: ServiceAccount\napiVersion: v1\nmetadata: {name: x, annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/x"}}\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {serviceAccountName: x, containers: [{name: c}]}\n';
    // Outside --strict a malformed ARN is injected as written, with a warning, as the AWS peer does.
    const r = preview(['-f', '-', '--strict'], input);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      /denied \(InvalidRoleArn\): ServiceAccount default\/x annotation eks\.amazonaws\.com\/role-arn/,
    );
    const tolerated = preview(['-f', '-', '-o', 'patch'], input);
    assert.equal(tolerated.code, 0);
    assert.match(
      tolerated.stderr,
      /^warning: .*is not an IAM role ARN.*; injecting it as written, as the peer webhook does/,
    );
  });

  test('--aws-compose-role-arn: a bare role name completes; without an account an unreadable IMDS is a start-up error', () => {
    const input =
      'kind: ServiceAccount\napiVersion: v1\nmetadata: {name: x, annotations: {eks.amazonaws.com/role-arn: team/reader}}\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {serviceAccountName: x, containers: [{name: c}]}\n';
    const composed = preview(
      ['-f', '-', '-o', 'json', '--aws-compose-role-arn', '--aws-compose-role-arn-account', '111122223333'],
      input,
    );
    assert.equal(composed.code, 0, composed.stderr);
    const env = JSON.parse(composed.stdout).spec.containers[0].env as { name: string; value: string }[];
    assert.equal(env.find((e) => e.name === 'AWS_ROLE_ARN')?.value, roleArn('team/reader'));
    // Nothing listens on port 9 of loopback: the look-up fails at once.
    const unreadable = preview(['-f', '-', '--aws-compose-role-arn'], input, {
      AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:9',
    });
    assert.equal(unreadable.code, 2);
    assert.match(
      unreadable.stderr,
      /^error \[[A-Z_]+\]: --aws-compose-role-arn: cannot read the EC2 instance identity document at http:\/\/127\.0\.0\.1:9 .*give the account with --aws-compose-role-arn-account\n$/,
    );
  });

  test('AWS_ROLE_SESSION_NAME: the Pod-name fieldRef for a generateName Pod, from the flag or the annotation; a long name warns', () => {
    const sa = (annotations: string) =>
      `kind: ServiceAccount\napiVersion: v1\nmetadata: {name: x, annotations: {eks.amazonaws.com/role-arn: "${roleArn('x')}"${annotations}}}\n---\n`;
    const podNamed = (metadata: string) =>
      `kind: Pod\napiVersion: v1\nmetadata: {${metadata}}\nspec: {serviceAccountName: x, containers: [{name: c}]}\n`;
    const session = (r: { code: number | null; stdout: string; stderr: string }) => {
      assert.equal(r.code, 0, r.stderr);
      return (JSON.parse(r.stdout).spec.containers[0].env as { name: string }[]).find(
        (e) => e.name === 'AWS_ROLE_SESSION_NAME',
      );
    };
    const fromName = {
      name: 'AWS_ROLE_SESSION_NAME',
      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } },
    };
    const generated = podNamed('generateName: worker-');
    assert.deepEqual(
      session(preview(['-f', '-', '-o', 'json', '--aws-role-session-name', 'pod-name'], sa('') + generated)),
      fromName,
    );
    assert.deepEqual(
      session(preview(['-f', '-', '-o', 'json'], sa(', eks.amazonaws.com/role-session-name: pod-name') + generated)),
      fromName,
    );
    assert.equal(session(preview(['-f', '-', '-o', 'json'], sa('') + generated)), undefined);
    const long = preview(
      ['-f', '-', '-o', 'json', '--aws-role-session-name', 'pod-name'],
      sa('') + podNamed(`name: ${'n'.repeat(65)}`),
    );
    assert.equal(session(long), undefined);
    assert.match(long.stderr, /^warning: .*"n{65}" has 65 characters and STS takes a RoleSessionName of 2 to 64/m);
  });

  test('include-containers: only the named container gets the identity; an unknown name is a warning on stderr', () => {
    const input =
      `kind: ServiceAccount\napiVersion: v1\nmetadata: {name: x, annotations: {eks.amazonaws.com/role-arn: "${roleArn('x')}"}}\n---\n` +
      'kind: Pod\napiVersion: v1\nmetadata: {name: p, annotations: {eks.amazonaws.com/include-containers: "app,ghost"}}\n' +
      'spec: {serviceAccountName: x, containers: [{name: app}, {name: other}]}\n';
    const r = preview(['-f', '-', '-o', 'json'], input);
    assert.equal(r.code, 0, r.stderr);
    const [app, other] = JSON.parse(r.stdout).spec.containers;
    assert.ok(app.env.some((e: { name: string }) => e.name === 'AWS_ROLE_ARN'));
    assert.equal(app.volumeMounts[0].name, 'aws-iam-token');
    assert.deepEqual(other, { name: 'other' });
    assert.match(
      r.stderr,
      /^warning: Pod annotation eks.amazonaws.com\/include-containers names no container or init container "ghost"$/m,
    );
  });

  test('source-profiles (role chaining): the shared config file shows the chained profile; a cycle is refused', () => {
    const sa = (sources: string) =>
      'kind: ServiceAccount\napiVersion: v1\nmetadata: {name: x, annotations: {' +
      `eks.amazonaws.com/role-arn: "${roleArn('hub')}", ` +
      `eks.amazonaws.com/role-arns: "target=${roleArn('target', OTHER_AWS_ACCOUNT)}", ` +
      `eks.amazonaws.com/source-profiles: "${sources}"}}\n---\n` +
      'kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec: {serviceAccountName: x, containers: [{name: app}]}\n';
    const r = preview(['-f', '-'], sa('target=default'));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      parse(r.stdout).metadata.annotations['workload-identity-webhook.io/aws-config-file'],
      `[default]\nrole_arn = ${roleArn('hub')}\n` +
        'web_identity_token_file = /var/run/secrets/eks.amazonaws.com/serviceaccount/token\n\n' +
        `[profile target]\nrole_arn = ${roleArn('target', OTHER_AWS_ACCOUNT)}\nsource_profile = default\n`,
    );
    const cycle = preview(['-f', '-'], sa('target=default, default=target'));
    assert.equal(cycle.code, 1);
    assert.match(
      cycle.stderr,
      /denied \(InvalidAnnotation\): ServiceAccount default\/x annotation eks.amazonaws.com\/source-profiles: the chain target → default → target is a cycle/,
    );
  });

  test("configuration flags are the same as serve's", () => {
    const r = preview(['-f', join(EXAMPLES, 'azure.yaml'), '-o', 'json', '--azure-cloud', 'AzureUSGovernmentCloud']);
    const env = JSON.parse(r.stdout).spec.containers[0].env;
    assert.ok(
      env.some(
        (e: { name: string; value: string }) =>
          e.name === 'AZURE_AUTHORITY_HOST' && e.value === 'https://login.microsoftonline.us/',
      ),
    );
  });

  test('bad usage and unreadable input exit 2 with a precise message', () => {
    const cases: [string[], string | undefined, RegExp][] = [
      [[], undefined, /preview needs at least one -f FILE/],
      [['-f', join(dir, 'missing.yaml')], undefined, /cannot read .*missing\.yaml: ENOENT/],
      [['-f', '-'], 'a: [unclosed', /-: /],
      [['-f', '-'], 'kind: ServiceAccount\nmetadata: {name: x}\n', /exactly one Pod among the documents; found 0/],
      [['-f', join(EXAMPLES, 'aws.yaml'), '-o', 'xml'], undefined, /-o xml: expected yaml, json or patch/],
      [
        ['-f', join(EXAMPLES, 'aws.yaml'), '-f', join(EXAMPLES, 'gcp.yaml')],
        undefined,
        /exactly one Pod among the documents; found 2/,
      ],
      [['-f', join(EXAMPLES, 'aws.yaml'), '--no-such-flag', 'x'], undefined, /unknown flag --no-such-flag/],
      [
        ['-f', join(EXAMPLES, 'aws.yaml'), '--aws-default-region', 'Mars'],
        undefined,
        /--aws-default-region="Mars" is not an AWS region/,
      ],
    ];
    for (const [args, input, message] of cases) {
      const r = preview(args, input);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
  });
});
