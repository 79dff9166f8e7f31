// AWS_ROLE_SESSION_NAME from the Pod's name or a literal (issue 31 item 1, the peer's #112):
// opt-in by --aws-role-session-name or the role-session-name annotation, the Pod's over the
// ServiceAccount's over the flag; a container's own value kept; STS's RoleSessionName rules at
// the bound (64 characters).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/errors.ts';
import type { EnvVar, Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { apply, config, pod, providers, sa } from '../support/builders.ts';
import { ROLE_ARN as ARN } from '../support/identities.ts';

const KEY = 'eks.amazonaws.com/role-session-name';
const FROM_NAME = { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } };

function run(p: Pod, annotations: Record<string, string>, flags: Record<string, string> = {}) {
  return mutatePod(providers(flags), { pod: p, namespace: 'team-a', serviceAccount: sa(annotations) });
}

/** The admitted Pod's AWS_ROLE_SESSION_NAME entries of container `c`, and the warnings. */
function session(p: Pod, annotations: Record<string, string>, flags: Record<string, string> = {}, c = 0) {
  const result = run(p, { 'eks.amazonaws.com/role-arn': ARN, ...annotations }, flags);
  assert.ok(result.allowed, result.allowed ? '' : result.denial.message);
  const env = (apply(p, result.patch).spec!.containers![c].env ?? []) as EnvVar[];
  return { entries: env.filter((e) => e.name === 'AWS_ROLE_SESSION_NAME'), warnings: result.warnings };
}

const named = (name: string | undefined, annotations?: Record<string, string>): Pod => {
  const p = pod({ annotations });
  if (name === undefined) {
    delete p.metadata!.name;
    p.metadata!.generateName = 'worker-7d9f8c6b5-';
  } else p.metadata!.name = name;
  return p;
};

describe('AWS: AWS_ROLE_SESSION_NAME (aws/amazon-eks-pod-identity-webhook#112)', () => {
  test('off unless asked: no flag, no annotation, no variable', () => {
    assert.deepEqual(session(named('web-0'), {}).entries, []);
  });

  test("pod-name: the downward API's metadata.name, so a Pod named by generateName gets its generated name", () => {
    assert.deepEqual(session(named(undefined), {}, { 'aws-role-session-name': 'pod-name' }).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', valueFrom: FROM_NAME },
    ]);
    assert.deepEqual(session(named('web-0'), { [KEY]: 'pod-name' }).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', valueFrom: FROM_NAME },
    ]);
  });

  test("the Pod's annotation over the ServiceAccount's over the flag; none turns it off", () => {
    const flags = { 'aws-role-session-name': 'pod-name' };
    assert.deepEqual(session(named('web-0'), { [KEY]: 'batch@team-a' }, flags).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', value: 'batch@team-a' },
    ]);
    assert.deepEqual(session(named('web-0', { [KEY]: 'nightly' }), { [KEY]: 'batch@team-a' }, flags).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', value: 'nightly' },
    ]);
    assert.deepEqual(session(named('web-0', { [KEY]: 'none' }), {}, flags).entries, []);
    assert.deepEqual(session(named('web-0'), {}, { 'aws-role-session-name': 'fixed=1' }).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', value: 'fixed=1' },
    ]);
  });

  test('a container that sets AWS_ROLE_SESSION_NAME keeps its own; the others get it', () => {
    const p = pod({
      spec: {
        containers: [
          { name: 'app', image: 'app', env: [{ name: 'AWS_ROLE_SESSION_NAME', value: 'mine' }] },
          { name: 'side', image: 'app' },
        ],
      },
    });
    p.metadata!.name = 'web-0';
    assert.deepEqual(session(p, { [KEY]: 'pod-name' }).entries, [{ name: 'AWS_ROLE_SESSION_NAME', value: 'mine' }]);
    assert.deepEqual(session(p, { [KEY]: 'pod-name' }, {}, 1).entries, [
      { name: 'AWS_ROLE_SESSION_NAME', valueFrom: FROM_NAME },
    ]);
  });

  test('at the bound: a 64-character literal is injected, 65 are refused naming the annotation and the rule', () => {
    const at = 'a'.repeat(64);
    assert.deepEqual(session(named('web-0'), { [KEY]: at }).entries, [{ name: 'AWS_ROLE_SESSION_NAME', value: at }]);
    const result = run(named('web-0'), { 'eks.amazonaws.com/role-arn': ARN, [KEY]: `${at}a` });
    assert.equal(result.allowed, false);
    if (result.allowed) return;
    assert.equal(result.denial.reason, 'InvalidAnnotation');
    assert.equal(
      result.denial.message,
      `ServiceAccount team-a/app annotation ${KEY}="${at}a" is neither "pod-name", "none" nor an STS RoleSessionName (2 to 64 letters, digits and "_+=,.@-")`,
    );
    for (const bad of ['x', 'has space', 'ünï', 'a/b', '']) {
      const r = run(named('web-0', { [KEY]: bad }), { 'eks.amazonaws.com/role-arn': ARN });
      assert.equal(r.allowed, false, bad);
      if (!r.allowed) assert.match(r.denial.message, /^Pod annotation eks\.amazonaws\.com\/role-session-name=/);
    }
    // A hostile value is shown escaped, on one line.
    const hostile = run(named('web-0', { [KEY]: 'a\nSTS said: ok\u001b[2J' }), { 'eks.amazonaws.com/role-arn': ARN });
    assert.equal(hostile.allowed, false);
    if (!hostile.allowed) {
      assert.match(hostile.denial.message, /role-session-name="a\\nSTS said: ok\\u001b\[2J" is neither/);
      assert.ok(!hostile.denial.message.includes('\n') && !hostile.denial.message.includes('\u001b'));
    }
  });

  test('the flag refuses what STS would, naming the flag and the bound', () => {
    assert.deepEqual(config({ 'aws-role-session-name': 'b'.repeat(64) }).awsRoleSessionName, {
      literal: 'b'.repeat(64),
    });
    assert.deepEqual(config({ 'aws-role-session-name': 'pod-name' }).awsRoleSessionName, { podName: true });
    assert.throws(
      () => config({ 'aws-role-session-name': 'b'.repeat(65) }),
      (e: unknown) =>
        e instanceof ConfigError && /^--aws-role-session-name="b{65}" .*\(2 to 64 letters/.test(e.message),
    );
    assert.throws(() => config({ 'aws-role-session-name': 'none' }), ConfigError);
  });

  test('a Pod name STS would refuse (over 64 characters, or one) is not injected, with a warning', () => {
    const long = `${'n'.repeat(60)}.team-a`;
    const { entries, warnings } = session(named(long), { [KEY]: 'pod-name' });
    assert.deepEqual(entries, []);
    assert.ok(
      warnings.some((w) => w.includes(`"${long}" has 67 characters and STS takes a RoleSessionName of 2 to 64`)),
      warnings.join('\n'),
    );
    assert.deepEqual(session(named('p'), { [KEY]: 'pod-name' }).entries, []);
    // 64 fits.
    assert.equal(session(named('n'.repeat(64)), { [KEY]: 'pod-name' }).entries.length, 1);
  });

  test('with role-arns the annotation warns: the shared config file does not read AWS_ROLE_SESSION_NAME', () => {
    const { entries, warnings } = session(named('web-0'), {
      'eks.amazonaws.com/role-arns': `writer=${ARN}`,
      [KEY]: 'pod-name',
    });
    assert.deepEqual(entries, []);
    assert.ok(warnings.some((w) => w.includes('role-session-name is not applied with eks.amazonaws.com/role-arns')));
  });
});
