// `preview --policy FILE` and `check-policy`: tenant policy offline, as an operator runs it.
// Runs the built CLI (test/harness/cli-process.ts), what operators run.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse, stringify } from 'yaml';
import { runCli } from '../harness/cli-process.ts';
import { roleArn } from '../support/identities.ts';

const STARTER = resolve(
  import.meta.dirname,
  '../../charts/workload-identity-webhook/files/policies/namespace-labels.yaml',
);
const dir = mkdtempSync(join(tmpdir(), 'wiw-policy-cli-'));

function file(name: string, value: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof value === 'string' ? value : stringify(value));
  return path;
}

const namespace = (labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name: 'team-a', labels },
});
const sa = file('sa.yaml', {
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: {
    name: 'app',
    namespace: 'team-a',
    annotations: { 'eks.amazonaws.com/role-arn': roleArn('app', '222222222222') },
  },
});
const pod = file('pod.yaml', {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'team-a' },
  spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
});
const labelled = file(
  'ns-labelled.yaml',
  namespace({ 'aws-account.workload-identity-webhook.io/222222222222': 'true' }),
);
const unlabelled = file('ns-unlabelled.yaml', namespace({}));
const broken = file('broken.yaml', {
  apiVersion: 'workload-identity-webhook.io/v1alpha1',
  kind: 'WorkloadIdentityPolicy',
  metadata: { name: 'broken' },
  spec: {
    validations: [{ name: 'v', expression: 'false', examples: [{ name: 'always', expect: { allowed: true } }] }],
  },
});

describe('preview --policy', () => {
  test('the Namespace among the documents decides: labelled for the account, the Pod is mutated', () => {
    const r = runCli(['preview', '--policy', STARTER, '-f', labelled, '-f', sa, '-f', pod]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const env = parse(r.stdout).spec.containers[0].env;
    assert.ok(
      env.some(
        (e: { name: string; value: string }) => e.name === 'AWS_ROLE_ARN' && e.value === roleArn('app', '222222222222'),
      ),
    );
  });

  test("not labelled, it is denied with the policy's message and exit 1", () => {
    const r = runCli(['preview', '--policy', STARTER, '-f', unlabelled, '-f', sa, '-f', pod]);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr,
      'denied (PolicyDenied): namespace team-a may not use AWS account 222222222222; a cluster administrator allows it with the namespace label aws-account.workload-identity-webhook.io/222222222222=true (WorkloadIdentityPolicy "namespace-labels", validation "aws-account-of-namespace")\n',
    );
  });

  test('without the Namespace, it is judged without labels, and says so', () => {
    const r = runCli(['preview', '--policy', STARTER, '-f', sa, '-f', pod]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /^warning: Namespace team-a is not among the documents: tenant policy sees it without labels\ndenied \(PolicyDenied\): /,
    );
  });

  test('a broken policy is reported; it refuses identities in deny mode and is ignored with keep-last-good', () => {
    const deny = runCli(['preview', '--policy', broken, '-f', labelled, '-f', sa, '-f', pod]);
    assert.equal(deny.code, 1);
    assert.match(
      deny.stderr,
      /^warning: WorkloadIdentityPolicy "broken" \(.*broken\.yaml\) is not used: spec\.validations\[0\]\.examples\[0\]: validation "v", example "always": expected allowed, but the expression gave false \(denied: failed expression: false\); cloud identities are refused \(--policy-failure-mode=deny\)\n/,
    );
    assert.match(
      deny.stderr,
      /\ndenied \(PolicyUnavailable\): cloud identities are refused until the broken tenant policy is fixed/,
    );
    const keep = runCli([
      'preview',
      '--policy',
      broken,
      '--policy-failure-mode',
      'keep-last-good',
      '-f',
      labelled,
      '-f',
      sa,
      '-f',
      pod,
    ]);
    assert.equal(keep.code, 0, keep.stderr);
    assert.match(keep.stderr, /is not used: .*; it is not enforced\n$/);
  });

  test('--policy-file is read by preview too', () => {
    const r = runCli(['preview', '--policy-file', STARTER, '-f', unlabelled, '-f', sa, '-f', pod]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^denied \(PolicyDenied\): /);
  });

  test('a file that holds no policies is bad input (exit 2)', () => {
    const r = runCli(['preview', '--policy', sa, '-f', sa, '-f', pod]);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /^error \[WIW_BAD_POLICY_FILE\]: .*sa\.yaml: found v1 ServiceAccount; a policy file holds workload-identity-webhook\.io\/v1alpha1 WorkloadIdentityPolicy objects only\n$/,
    );
  });
});

describe('check-policy', () => {
  test('reports each policy and exits 0 when all are good', () => {
    const r = runCli(['check-policy', '-f', STARTER]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^ok {4}namespace-labels \(.*namespace-labels\.yaml\): 3 validations, 1 defaults, 0 identity providers; 11 examples passed\n$/,
    );
  });

  test('lists every problem of a broken policy and exits 1', () => {
    const r = runCli(['check-policy', '-f', STARTER, '-f', broken]);
    assert.equal(r.code, 1);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 3);
    assert.match(lines[1], /^FAIL {2}broken \(.*\): not used$/);
    assert.equal(
      lines[2],
      '      ExampleFailed spec.validations[0].examples[0]: validation "v", example "always": expected allowed, but the expression gave false (denied: failed expression: false)',
    );
  });
});
