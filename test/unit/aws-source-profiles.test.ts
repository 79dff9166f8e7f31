// Role chaining for AWS (issue 31 item 3; aws/amazon-eks-pod-identity-webhook#258): the
// ServiceAccount's source-profiles makes a role-arns profile assume its role with another
// profile's credentials (`source_profile`) instead of with the token; every chain ends at a
// profile that presents the token, within MAX_CHAIN_HOPS calls.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_CHAIN_HOPS } from '../../src/bounds.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { apply, pod, providers, sa } from '../support/builders.ts';
import { OTHER_AWS_ACCOUNT, ROLE_ARN as HUB, roleArn } from '../support/identities.ts';

const TARGET = roleArn('target', OTHER_AWS_ACCOUNT);
const KEY = 'eks.amazonaws.com/source-profiles';
const TOKEN = '/var/run/secrets/eks.amazonaws.com/serviceaccount/token';

function run(annotations: Record<string, string>) {
  const p = pod();
  const r = mutatePod(providers(), { pod: p, namespace: 'team-a', serviceAccount: sa(annotations) });
  return { r, p };
}
function configFile(annotations: Record<string, string>): string {
  const { r, p } = run(annotations);
  assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
  return apply(p, r.allowed ? r.patch : []).metadata!.annotations!['workload-identity-webhook.io/aws-config-file'];
}
function denied(annotations: Record<string, string>): string {
  const { r } = run(annotations);
  assert.equal(r.allowed, false, 'the Pod is refused');
  return r.allowed ? '' : r.denial.message;
}

describe('eks.amazonaws.com/source-profiles', () => {
  test('a chained profile is role_arn + source_profile, without the token file; its source keeps the token', () => {
    const file = configFile({
      'eks.amazonaws.com/role-arn': HUB,
      'eks.amazonaws.com/role-arns': `target=${TARGET}`,
      [KEY]: 'target=default',
    });
    assert.equal(
      file,
      `[default]\nrole_arn = ${HUB}\nweb_identity_token_file = ${TOKEN}\n\n` +
        `[profile target]\nrole_arn = ${TARGET}\nsource_profile = default\n`,
    );
  });

  test("the default that copies the first listed profile follows that profile's source", () => {
    const file = configFile({ 'eks.amazonaws.com/role-arns': `target=${TARGET},hub=${HUB}`, [KEY]: 'target=hub' });
    assert.match(file, /^\[default\]\nrole_arn = \S+target\nsource_profile = hub\n/);
    assert.match(file, /\[profile hub\]\nrole_arn = \S+s3-reader\nweb_identity_token_file = /);
  });

  test('the first listed profile chained from default, default being its copy: refused, saying why', () => {
    const message = denied({ 'eks.amazonaws.com/role-arns': `target=${TARGET},hub=${HUB}`, [KEY]: 'target=default' });
    assert.match(
      message,
      /the chain target → default → default is a cycle: .*; "default" is a copy of the first listed profile "target" \(neither role-arn nor a profile named default gives it a role\) and takes its source: give default its own role, or list another profile first/,
    );
    // With its own role, default presents the token and target is chained from it.
    const file = configFile({
      'eks.amazonaws.com/role-arns': `target=${TARGET},default=${HUB}`,
      [KEY]: 'target=default',
    });
    assert.match(file, /^\[default\]\nrole_arn = \S+s3-reader\nweb_identity_token_file = /);
  });

  test('each role is an identity; a chained one names its source, a role reached both ways is two', () => {
    const { r } = run({
      'eks.amazonaws.com/role-arns': `hub=${HUB},target=${TARGET},direct=${TARGET}`,
      [KEY]: 'target=hub',
    });
    assert.ok(r.allowed);
    const [injection] = r.allowed ? r.injections : [];
    const records = [injection.identity, ...(injection.additionalIdentities ?? [])];
    assert.deepEqual(
      records.map((i) => [i.profile, i.roleArn, i.sourceProfile, i.sourceRoleArn]),
      [
        ['default', HUB, undefined, undefined],
        ['target', TARGET, 'hub', HUB],
        ['direct', TARGET, undefined, undefined],
      ],
    );
  });

  test('a profile or source role-arns lacks is refused, naming the annotation, the entry and the profiles', () => {
    const roles = { 'eks.amazonaws.com/role-arns': `hub=${HUB},target=${TARGET}` };
    assert.match(
      denied({ ...roles, [KEY]: 'admin=hub' }),
      /ServiceAccount team-a\/app annotation eks.amazonaws.com\/source-profiles: profile "admin", which is not one of the role-arns profiles \(default, hub, target\)/,
    );
    assert.match(
      denied({ ...roles, [KEY]: 'target=admin' }),
      /source-profiles: the source of profile "target", profile "admin", which is not one of the role-arns profiles/,
    );
    // A source of any length is shown quoted and clipped.
    const long = denied({ ...roles, [KEY]: `target=${'x'.repeat(101)}$` });
    assert.match(long, /the source of profile "target", profile "x{80}…\(102 chars\)", which is not one/);
  });

  test('a cycle is refused, naming it; a profile its own source too', () => {
    const roles = { 'eks.amazonaws.com/role-arns': `a=${HUB},b=${TARGET},c=${TARGET}` };
    assert.match(denied({ ...roles, [KEY]: 'a=b,b=c,c=a' }), /source-profiles: the chain a → b → c → a is a cycle/);
    assert.match(denied({ ...roles, [KEY]: 'b=b' }), /the chain b → b is a cycle/);
  });

  test(`a chain of ${MAX_CHAIN_HOPS} AssumeRole calls is written; one more is refused, naming the bound`, () => {
    const names = Array.from({ length: MAX_CHAIN_HOPS + 2 }, (_, i) => `p${i}`);
    const roles = { 'eks.amazonaws.com/role-arns': names.map((n) => `${n}=${roleArn(n)}`).join(',') };
    const chain = (length: number) =>
      names
        .slice(1, length + 1)
        .map((n, i) => `${n}=${names[i]}`)
        .join('\n');
    assert.match(
      configFile({ ...roles, [KEY]: chain(MAX_CHAIN_HOPS) }),
      /\[profile p4\]\nrole_arn = \S+\nsource_profile = p3\n/,
    );
    assert.match(
      denied({ ...roles, [KEY]: chain(MAX_CHAIN_HOPS + 1) }),
      new RegExp(
        `profile "p5" is 5 AssumeRole calls from the token \\(p5 → p4 → p3 → p2 → p1 → p0\\), more than the ${MAX_CHAIN_HOPS} a chain may have`,
      ),
    );
  });

  test('the list bounds and forms, as for role-arns: 64 entries, one source each, entries of <profile>=<source profile>', () => {
    const roles = { 'eks.amazonaws.com/role-arns': `hub=${HUB},target=${TARGET}` };
    const many = Array.from({ length: 65 }, (_, i) => `p${i}=hub`).join(',');
    assert.match(denied({ ...roles, [KEY]: many }), /source-profiles lists 65 entries, more than the 64 it may have/);
    assert.match(denied({ ...roles, [KEY]: 'target' }), /source-profiles: "target" is not <profile>=<source profile>/);
    assert.match(denied({ ...roles, [KEY]: 'target=hub,target=default' }), /profile "target" is given a source twice/);
    assert.match(denied({ ...roles, [KEY]: 'ta$rget=hub' }), /profile "ta\$rget" is not a profile name/);
  });

  test('without role-arns it is refused', () => {
    assert.match(
      denied({ 'eks.amazonaws.com/role-arn': HUB, [KEY]: 'target=default' }),
      /annotation eks.amazonaws.com\/source-profiles names role-arns profiles, but eks.amazonaws.com\/role-arns is not set/,
    );
  });
});
