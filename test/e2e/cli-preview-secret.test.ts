// `workload-identity-webhook preview` with a GEP-26 Secret as the object to admit, as an operator
// runs it, on the documented examples: the built CLI (test/harness/cli-process.ts).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli } from '../harness/cli-process.ts';
import { textData } from '../support/secrets.ts';
import { CHANGED_ID, roleArn, TENANT } from '../support/identities.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../examples/secrets');
const dir = mkdtempSync(join(tmpdir(), 'wiw-preview-secret-'));
const TOKEN_PATH = '/var/run/secrets/gardener.cloud/workload-identity/token';

const preview = (args: string[]) => runCli(['preview', ...args]);

function file(name: string, docs: unknown[]): string {
  const path = join(dir, name);
  writeFileSync(path, docs.map((d) => stringify(d)).join('---\n'));
  return path;
}

function exampleSecret(provider: string): Record<string, any> {
  return parse(readFileSync(join(EXAMPLES, `${provider}.yaml`), 'utf8').split('---\n')[1]);
}

describe('preview of a Secret', () => {
  test('prints the Secret as the API server would store it: stringData merged, derived keys added', () => {
    const r = preview(['-f', join(EXAMPLES, 'aws.yaml')]);
    assert.equal(r.code, 0, r.stderr);
    const secret = parse(r.stdout);
    assert.equal(secret.stringData, undefined);
    assert.equal(
      textData(secret).credentialsFile,
      `[default]\nrole_arn = ${roleArn('backup-writer')}\nweb_identity_token_file = ${TOKEN_PATH}\nregion = eu-west-1\n`,
    );
  });

  test('every documented example is admitted', () => {
    for (const provider of ['aws', 'azure', 'gcp']) {
      const r = preview(['-f', join(EXAMPLES, `${provider}.yaml`), '-o', 'patch']);
      assert.equal(r.code, 0, `${provider}: ${r.stderr}`);
      const patch = JSON.parse(r.stdout) as { op: string; path: string }[];
      assert.ok(patch.length > 0 && patch.every((op) => op.op === 'add' && op.path.startsWith('/data/')), provider);
    }
  });

  test('--old previews an UPDATE: the Azure tenant may not change', () => {
    const old = file('old.yaml', [exampleSecret('azure')]);
    const next = exampleSecret('azure');
    next.stringData.config = next.stringData.config.replace(TENANT, CHANGED_ID);
    const r = preview(['-f', file('new.yaml', [next]), '--old', old]);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      `denied (ImmutableAccount): config.tenantID cannot change from "${TENANT}" to "${CHANGED_ID}": a workload identity Secret stays with one cloud account; create a new Secret for another\n`,
    );
    assert.equal(preview(['-f', join(EXAMPLES, 'azure.yaml'), '--old', old, '-o', 'patch']).code, 0);
  });

  test('a reference into another namespace is judged against the ServiceAccounts given', () => {
    const secret = exampleSecret('aws');
    secret.metadata.annotations['workload-identity-webhook.io/service-account'] = 'platform/backup';
    const secretFile = file('cross.yaml', [secret]);
    const missing = preview(['-f', secretFile]);
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /^warning: ServiceAccount platform\/backup is not among the documents: previewed as if it did not exist\ndenied \(ReferenceNotGranted\): /,
    );
    const granting = file('granting.yaml', [
      {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: {
          name: 'backup',
          namespace: 'platform',
          annotations: { 'workload-identity-webhook.io/allowed-referrer-namespaces': 'apps' },
        },
      },
    ]);
    const granted = preview(['-f', secretFile, '-f', granting, '-o', 'json']);
    assert.equal(granted.code, 0, granted.stderr);
    assert.equal(textData(JSON.parse(granted.stdout)).roleARN, roleArn('backup-writer'));
  });

  test('an unlabelled Secret is printed unchanged, with a warning', () => {
    const secret = exampleSecret('gcp');
    delete secret.metadata.labels;
    const r = preview(['-f', file('plain.yaml', [secret]), '-o', 'patch']);
    assert.equal(r.code, 0);
    assert.deepEqual(JSON.parse(r.stdout), []);
    assert.match(r.stderr, /the webhook leaves it alone/);
  });

  test('bad usage exits 2 with the reason', () => {
    const two = file('two.yaml', [exampleSecret('aws'), exampleSecret('gcp')]);
    const r = preview(['-f', two]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /preview needs exactly one Secret; found 2/);
    const old = preview(['-f', join(EXAMPLES, 'aws.yaml'), '--old']);
    assert.equal(old.code, 2);
    assert.match(old.stderr, /--old needs a value/);
    const requestorFlag = preview(['-f', join(EXAMPLES, 'aws.yaml'), '--lease-name', 'x']);
    assert.equal(requestorFlag.code, 2);
    assert.match(requestorFlag.stderr, /unknown flag --lease-name/);
  });
});

test('docs/secrets.md shows the examples exactly as tested', () => {
  const docs = readFileSync(resolve(import.meta.dirname, '../../docs/secrets.md'), 'utf8');
  for (const name of ['aws', 'aws-pod', 'azure', 'azure-pod', 'gcp', 'gcp-pod']) {
    const text = readFileSync(join(EXAMPLES, `${name}.yaml`), 'utf8');
    // The comment header is the file's; the YAML below it is in the docs verbatim.
    const body = text.replace(/^(#.*\n)+/, '');
    assert.ok(docs.includes(body), `docs/secrets.md lacks examples/secrets/${name}.yaml`);
  }
});
