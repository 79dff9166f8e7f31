// A role per container for AWS (issue 31 item 2; aws/amazon-eks-pod-identity-webhook#147, #77):
// the ServiceAccount's container-profiles names the role-arns profile each container uses, set
// as AWS_PROFILE beside the shared config file.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mutatePod } from '../../src/mutate/pod.ts';
import type { Pod } from '../../src/kube/types.ts';
import { apply, envOf, pod, providers, sa } from '../support/builders.ts';
import { roleArn } from '../support/identities.ts';

const READER = roleArn('reader');
const WRITER = roleArn('writer');
const ROLES = { 'eks.amazonaws.com/role-arns': `reader=${READER},writer=${WRITER}` };
const KEY = 'eks.amazonaws.com/container-profiles';

function run(annotations: Record<string, string>, p: Pod = threeContainers()) {
  return mutatePod(providers(), { pod: p, namespace: 'team-a', serviceAccount: sa(annotations) });
}
function threeContainers(podAnnotations?: Record<string, string>, appEnv?: { name: string; value: string }[]) {
  return pod({
    annotations: podAnnotations,
    spec: {
      initContainers: [{ name: 'migrate' }],
      containers: [{ name: 'app', ...(appEnv ? { env: appEnv } : {}) }, { name: 'other' }],
    },
  });
}
function served(annotations: Record<string, string>, p: Pod = threeContainers()) {
  const r = run(annotations, p);
  assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
  const out = apply(p, r.allowed ? r.patch : []);
  const all = [...out.spec!.initContainers!, ...out.spec!.containers!];
  return Object.fromEntries(all.map((c) => [c.name, envOf(c)]));
}

describe('eks.amazonaws.com/container-profiles', () => {
  test('each named container gets AWS_PROFILE of its profile, the others the default profile', () => {
    const env = served({ ...ROLES, [KEY]: 'app=writer, migrate=reader' });
    assert.equal(env.app.AWS_PROFILE, 'writer');
    assert.equal(env.migrate.AWS_PROFILE, 'reader');
    assert.equal(env.other.AWS_PROFILE, undefined);
    for (const name of ['app', 'migrate', 'other'])
      assert.equal(env[name].AWS_CONFIG_FILE, '/var/run/secrets/eks.amazonaws.com/serviceaccount/config');
  });

  test("a container's own AWS_PROFILE is kept", () => {
    const p = threeContainers(undefined, [{ name: 'AWS_PROFILE', value: 'mine' }]);
    assert.equal(served({ ...ROLES, [KEY]: 'app=writer' }, p).app.AWS_PROFILE, 'mine');
  });

  test('skip-containers and include-containers apply: a container left alone gets no profile', () => {
    const skipped = served(
      { ...ROLES, [KEY]: 'app=writer' },
      threeContainers({ 'eks.amazonaws.com/skip-containers': 'app' }),
    );
    assert.deepEqual(skipped.app, {});
    const included = served(
      { ...ROLES, [KEY]: 'app=writer,other=reader' },
      threeContainers({ 'eks.amazonaws.com/include-containers': 'other' }),
    );
    assert.deepEqual(included.app, {});
    assert.equal(included.other.AWS_PROFILE, 'reader');
  });

  test('a profile role-arns does not define is refused, naming it and the profiles there are', () => {
    const r = run({ ...ROLES, [KEY]: 'app=admin' });
    assert.equal(r.allowed, false);
    assert.match(
      r.allowed ? '' : r.denial.message,
      /container-profiles: container "app" names profile "admin", which is not one of the role-arns profiles \(default, reader, writer\)/,
    );
  });

  test('without role-arns it is refused; a malformed entry is refused by name', () => {
    const r = run({ 'eks.amazonaws.com/role-arn': READER, [KEY]: 'app=reader' });
    assert.match(
      r.allowed ? '' : r.denial.message,
      /container-profiles names role-arns profiles, but eks.amazonaws.com\/role-arns is not set/,
    );
    const bad = run({ ...ROLES, [KEY]: 'App_1=reader' });
    assert.match(bad.allowed ? '' : bad.denial.message, /"App_1" is not a container name/);
  });
});
