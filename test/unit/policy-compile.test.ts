// Golden tests of tenant policy at load: reading the spec, compiling the CEL, running the
// examples, and the status that reports what keeps a policy from being used.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { activation, compileExpression } from '../../src/policy/cel.ts';
import { compilePolicy } from '../../src/policy/compile.ts';
import { exampleVariables } from '../../src/policy/inputs.ts';
import { loadPolicyFile, policyDocumentsFromText } from '../../src/policy/load.ts';
import type { CompileResult } from '../../src/policy/model.ts';
import { policyStatus, statusChanged } from '../../src/policy/status.ts';
import { PolicyStore } from '../../src/policy/store.ts';
import { TENANT } from '../support/identities.ts';

const STARTER = resolve(
  import.meta.dirname,
  '../../charts/workload-identity-webhook/files/policies/namespace-labels.yaml',
);

function compile(spec: unknown, name = 'p', generation = 1): CompileResult {
  return compilePolicy({ name, generation, source: 'test', spec });
}

function problems(spec: unknown): { reason: string; path: string; message: string }[] {
  const r = compile(spec);
  assert.equal(r.ok, false, 'expected the policy to be refused');
  return r.ok ? [] : r.problems;
}

const ownAccount = {
  name: 'own-account',
  expression:
    "identity.provider != 'aws' || ('aws-account.example/' + identity.account) in namespaceObject.metadata.labels",
  message: 'not your account',
};

describe('CEL expressions', () => {
  test('a syntax error names the line and column', () => {
    const p = compileExpression("identity.account == '1' &&");
    assert.ok('error' in p);
    assert.match(p.error, /^syntax error at line 1, column \d+: /);
  });

  test('unknown variables, fields and functions are compile errors, not denials later', () => {
    assert.deepEqual(compileExpression('namespace.name == "a"'), {
      error: 'syntax error at line 1, column 1: reserved identifier',
    });
    assert.deepEqual(compileExpression('ns.name == "a"'), {
      error: 'unknown variable "ns"; the variables are namespaceObject, serviceAccount, object, identity',
    });
    const field = compileExpression("identity.acount == '1'");
    assert.ok('error' in field);
    assert.match(
      field.error,
      /^identity has no field "acount"; its fields are provider, identityProvider, partition, account, /,
    );
    assert.deepEqual(compileExpression('namespaceObject.metadata.name.first'), {
      error: 'namespaceObject.metadata.name is a string: it has no field "first"',
    });
    assert.deepEqual(compileExpression('isTenant(identity.tenant)'), { error: 'unknown function "isTenant"' });
  });

  test('map keys under labels and annotations are free, and macros bind their own variables', () => {
    const p = compileExpression(
      "namespaceObject.metadata.labels.team == 'a' && object.metadata.annotations.exists(k, k.startsWith('x/'))",
    );
    assert.ok(!('error' in p));
  });

  test('the strings extension is there, as in Kubernetes CEL', () => {
    const p = compileExpression("'a/b'.split('/')[1].upperAscii() + identity.provider");
    assert.ok(!('error' in p));
    assert.deepEqual(p.run(activation(exampleVariables({ identity: { provider: 'aws' } }))), { value: 'Baws' });
  });
});

describe('reading a policy', () => {
  test('unknown fields, wrong types and bad values are reported with their paths', () => {
    const got = problems({
      identityProviders: [
        { name: 'prod', aws: { accountIds: [111122223333], region: 'europe' } },
        { name: 'Bad_Name', azure: { tenantId: 'not a tenant' }, gcp: { projectNumber: '1', pool: 'p1234' } },
      ],
      validations: [{ name: 'v', expresion: 'true' }],
      defaults: [{ name: 'd', field: 'zone', expression: "'x'" }],
      extra: true,
    });
    assert.deepEqual(
      got.map((p) => `${p.path}: ${p.message}`),
      [
        'spec.extra: unknown field; the fields of spec are identityProviders, validations, defaults',
        'spec.identityProviders[0].aws.accountIds[0]: Invalid value: 111122223333: must be a string',
        'spec.identityProviders[0].aws.region: Invalid value: "europe": an AWS region such as eu-west-1',
        'spec.identityProviders[1].name: Invalid value: "Bad_Name": a lowercase name of letters, digits and "-"',
        'spec.identityProviders[1]: Invalid value: name exactly one of aws, azure or gcp (found azure and gcp)',
        'spec.validations[0].expresion: unknown field; the fields of spec.validations[] are name, expression, message, messageExpression, examples',
        'spec.validations[0].expression: Required value',
        'spec.defaults[0].field: Unsupported value: "zone": supported values: region, tenant, audience, tokenExpirationSeconds',
      ],
    );
    assert.ok(got.every((p) => p.reason === 'InvalidSpec'));
  });

  test('names are unique per list, and a default names only the clouds its field applies to', () => {
    const got = problems({
      validations: [
        { name: 'a', expression: 'true' },
        { name: 'a', expression: 'true' },
      ],
      defaults: [{ name: 'd', field: 'tenant', providers: ['aws'], expression: 'null' }],
    });
    assert.deepEqual(
      got.map((p) => `${p.path}: ${p.message}`),
      [
        'spec.validations: Duplicate value: "a": names must be unique',
        'spec.defaults[0].providers[0]: Unsupported value: "aws": tenant applies to azure',
      ],
    );
  });

  test('an expression that does not compile names its field', () => {
    const got = problems({
      validations: [{ name: 'v', expression: 'identity.account in namespaceObject.metadata.lables', message: 'm' }],
    });
    assert.deepEqual(got, [
      {
        reason: 'CompileError',
        path: 'spec.validations[0].expression',
        message: 'namespaceObject.metadata has no field "lables"; its fields are name, labels',
      },
    ]);
  });

  test('without a message, a denial quotes the expression as ValidatingAdmissionPolicy does', () => {
    const r = compile({ validations: [{ name: 'v', expression: ' false ' }] });
    assert.ok(r.ok);
    assert.equal(r.policy.validations[0].message, 'failed expression: false');
  });

  test('identity providers read with their defaults; Azure tenants are compared in lowercase and hosts keep a trailing slash', () => {
    const r = compile({
      identityProviders: [
        {
          name: 'prod',
          displayName: 'Production',
          aws: { accountIds: ['111122223333'], region: 'eu-west-1', tokenExpirationSeconds: 3600 },
        },
        { name: 'gov', aws: { partition: 'aws-us-gov' } },
        {
          name: 'corp',
          azure: {
            tenantId: '72F988BF-86F1-41AF-91AB-2D7CD011DB47',
            cloud: 'AzureUSGovernmentCloud',
            authorityHost: 'https://login.example.us',
          },
        },
        { name: 'onprem', gcp: { projectNumber: '123456789012', pool: 'on-prem', region: 'europe-west1' } },
      ],
    });
    assert.ok(r.ok);
    assert.deepEqual(r.policy.identityProviders, [
      {
        name: 'prod',
        displayName: 'Production',
        provider: 'aws',
        partition: 'aws',
        accountIds: ['111122223333'],
        defaults: { region: 'eu-west-1', tokenExpirationSeconds: 3600 },
      },
      { name: 'gov', displayName: 'gov', provider: 'aws', partition: 'aws-us-gov', accountIds: [], defaults: {} },
      {
        name: 'corp',
        displayName: 'corp',
        provider: 'azure',
        tenantId: TENANT,
        cloud: 'AzureUSGovernmentCloud',
        authorityHost: 'https://login.example.us/',
        defaults: {},
      },
      {
        name: 'onprem',
        displayName: 'onprem',
        provider: 'gcp',
        projectNumber: '123456789012',
        pool: 'on-prem',
        defaults: { region: 'europe-west1' },
      },
    ]);
  });

  test("token expiry bounds are each cloud's own", () => {
    const got = problems({
      identityProviders: [
        { name: 'a', aws: { tokenExpirationSeconds: 300 } },
        { name: 'z', azure: { tenantId: TENANT, tokenExpirationSeconds: 90000 } },
        { name: 'g', gcp: { projectNumber: '1', pool: 'pool', tokenExpirationSeconds: 1800 } },
      ],
    });
    assert.deepEqual(
      got.map((p) => p.message),
      [
        'Invalid value: 300: must be between 600 and 4294967296',
        'Invalid value: 90000: must be between 3600 and 86400',
        'Invalid value: 1800: must be between 3600 and 4294967296',
      ],
    );
  });
});

describe('examples', () => {
  test('every example runs at load and a passing policy counts them', () => {
    const r = compile({
      validations: [
        {
          ...ownAccount,
          examples: [
            {
              name: 'own',
              namespaceObject: { metadata: { labels: { 'aws-account.example/111122223333': 'true' } } },
              identity: { provider: 'aws', account: '111122223333' },
              expect: { allowed: true },
            },
            {
              name: 'other',
              identity: { provider: 'aws', account: '444455556666' },
              expect: { allowed: false, message: 'not your account' },
            },
          ],
        },
      ],
    });
    assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems));
    assert.equal(r.policy.examples, 2);
  });

  test('a failing example keeps the policy out and says which example and why', () => {
    const got = problems({
      validations: [
        {
          ...ownAccount,
          examples: [
            { name: 'other tenant', identity: { provider: 'aws', account: '444455556666' }, expect: { allowed: true } },
            {
              name: 'wrong message',
              identity: { provider: 'aws', account: '444455556666' },
              expect: { allowed: false, message: 'no' },
            },
            {
              name: 'own',
              namespaceObject: { metadata: { labels: { 'aws-account.example/1': 'x' } } },
              identity: { provider: 'aws', account: '1' },
              expect: { allowed: false },
            },
          ],
        },
      ],
    });
    assert.deepEqual(got, [
      {
        reason: 'ExampleFailed',
        path: 'spec.validations[0].examples[0]',
        message:
          'validation "own-account", example "other tenant": expected allowed, but the expression gave false (denied: not your account)',
      },
      {
        reason: 'ExampleFailed',
        path: 'spec.validations[0].examples[1]',
        message: 'validation "own-account", example "wrong message": expected the message "no", got "not your account"',
      },
      {
        reason: 'ExampleFailed',
        path: 'spec.validations[0].examples[2]',
        message: 'validation "own-account", example "own": expected denied, but the expression gave true (allowed)',
      },
    ]);
  });

  test('an expression that fails on an example, or gives no boolean, fails that example', () => {
    const got = problems({
      validations: [
        {
          name: 'missing-key',
          expression: "namespaceObject.metadata.labels['team'] == 'a'",
          examples: [{ name: 'no team label', expect: { allowed: false } }],
        },
        { name: 'not-bool', expression: 'identity.account', examples: [{ name: 'any', expect: { allowed: true } }] },
      ],
    });
    assert.deepEqual(
      got.map((p) => p.message),
      [
        'validation "missing-key", example "no team label": expected denied, but the expression failed: field not found: team',
        'validation "not-bool", example "any": expected allowed, but the expression gave ""; a validation must give true or false',
      ],
    );
  });

  test('messageExpression builds the message from the input; one that fails falls back to message', () => {
    const r = compile({
      validations: [
        {
          name: 'v',
          expression: 'false',
          message: 'static',
          messageExpression: "'namespace ' + namespaceObject.metadata.name + ' may not use ' + identity.account",
          examples: [
            {
              name: 'dynamic',
              namespaceObject: { metadata: { name: 'tenant-a' } },
              identity: { account: '42' },
              expect: { allowed: false, message: 'namespace tenant-a may not use 42' },
            },
          ],
        },
        {
          name: 'w',
          expression: 'false',
          message: 'static',
          messageExpression: "namespaceObject.metadata.labels['missing']",
          examples: [{ name: 'fallback', expect: { allowed: false, message: 'static' } }],
        },
      ],
    });
    assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems));
  });

  test('default examples compare the value; null and an empty string both mean "no default"', () => {
    const spec = (expect: unknown) => ({
      defaults: [
        {
          name: 'region-of-namespace',
          field: 'region',
          expression: "'region' in namespaceObject.metadata.labels ? namespaceObject.metadata.labels.region : ''",
          examples: [
            {
              name: 'labelled',
              namespaceObject: { metadata: { labels: { region: 'eu-west-1' } } },
              expect: { value: 'eu-west-1' },
            },
            { name: 'unlabelled', expect },
          ],
        },
      ],
    });
    assert.ok(compile(spec({ value: null })).ok);
    assert.ok(compile(spec({ value: '' })).ok);
    assert.deepEqual(
      problems(spec({ value: 'us-east-1' })).map((p) => p.message),
      ['default "region-of-namespace", example "unlabelled": expected "us-east-1", got null'],
    );
  });

  test('a token expiry default gives a whole number', () => {
    assert.ok(
      compile({
        defaults: [
          {
            name: 'e',
            field: 'tokenExpirationSeconds',
            expression: '3600',
            examples: [{ name: 'n', expect: { value: 3600 } }],
          },
        ],
      }).ok,
    );
    assert.deepEqual(
      problems({
        defaults: [
          {
            name: 'e',
            field: 'tokenExpirationSeconds',
            expression: '1.5',
            examples: [{ name: 'n', expect: { value: 3600 } }],
          },
        ],
      }).map((p) => p.message),
      [
        'default "e", example "n": expected 3600, but the expression gave 1.5; tokenExpirationSeconds must be a whole number of seconds (or null)',
      ],
    );
  });

  test('the policy of docs/policy.md compiles and its examples pass', () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../docs/policy.md'), 'utf8');
    const yaml = /```yaml\n(apiVersion: workload-identity-webhook\.io\/v1alpha1\n[\s\S]*?)```/.exec(doc)![1];
    const [r] = policyDocumentsFromText(yaml, 'docs/policy.md').map(compilePolicy);
    assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems, null, 2));
    assert.equal(r.examples, 4);
  });

  test('the starter policy in charts/workload-identity-webhook/files/policies compiles and all its examples pass', () => {
    const [r] = loadPolicyFile(STARTER);
    assert.ok(r.ok, r.ok ? '' : JSON.stringify(r.problems, null, 2));
    assert.equal(r.policy.name, 'namespace-labels');
    assert.equal(r.policy.validations.length, 3);
    assert.equal(r.policy.defaults.length, 1);
    assert.ok(r.policy.examples >= 10);
  });
});

describe('policy files', () => {
  test('hold WorkloadIdentityPolicy objects only, each named once', () => {
    const doc = (name: string) =>
      `apiVersion: workload-identity-webhook.io/v1alpha1\nkind: WorkloadIdentityPolicy\nmetadata: {name: ${name}}\nspec: {}\n`;
    assert.deepEqual(
      policyDocumentsFromText(`${doc('a')}---\n${doc('b')}`, 'f.yaml').map((d) => d.name),
      ['a', 'b'],
    );
    assert.throws(() => policyDocumentsFromText('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n', 'f.yaml'), {
      code: 'WIW_BAD_POLICY_FILE',
      message:
        'f.yaml: found v1 ConfigMap; a policy file holds workload-identity-webhook.io/v1alpha1 WorkloadIdentityPolicy objects only',
    });
    assert.throws(() => policyDocumentsFromText(`${doc('a')}---\n${doc('a')}`, 'f.yaml'), {
      message: 'f.yaml: two WorkloadIdentityPolicy objects are named "a"',
    });
    assert.throws(() => loadPolicyFile('/nonexistent/policy.yaml'), {
      message: 'cannot read policy file /nonexistent/policy.yaml: ENOENT',
    });
  });
});

describe('status', () => {
  const now = new Date('2026-01-02T03:04:05.678Z');

  test('a good policy is Ready with what it holds', () => {
    const s = policyStatus(
      compile(
        {
          validations: [
            { ...ownAccount, examples: [{ name: 'x', identity: { provider: 'gcp' }, expect: { allowed: true } }] },
          ],
        },
        'p',
        3,
      ),
      undefined,
      now,
    );
    assert.deepEqual(s, {
      observedGeneration: 3,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Valid',
          message: 'in force: 1 validation, 0 defaults, 0 identity providers; 1 example passed',
          observedGeneration: 3,
          lastTransitionTime: '2026-01-02T03:04:05Z',
        },
      ],
      problems: [],
      examples: { total: 1, failed: 0 },
    });
  });

  test('a failing example sets Ready=False with reason ExampleFailed and names the example', () => {
    const r = compile(
      {
        validations: [
          {
            ...ownAccount,
            examples: [{ name: 'wrong', identity: { provider: 'aws', account: '1' }, expect: { allowed: true } }],
          },
        ],
      },
      'p',
      2,
    );
    const status = policyStatus(r, undefined, now);
    assert.equal(status.conditions[0].status, 'False');
    assert.equal(status.conditions[0].reason, 'ExampleFailed');
    assert.equal(
      status.conditions[0].message,
      'spec.validations[0].examples[0]: validation "own-account", example "wrong": expected allowed, but the expression gave false (denied: not your account); not used until fixed (meanwhile admissions follow the webhook\'s --policy-failure-mode)',
    );
    assert.deepEqual(status.examples, { total: 1, failed: 1 });
  });

  test('lastTransitionTime moves only when Ready changes, and an unchanged status is not written again', () => {
    const good = compile({ validations: [ownAccount] });
    const first = policyStatus(good, undefined, now);
    const again = policyStatus(good, first, new Date('2026-02-01T00:00:00Z'));
    assert.equal(again.conditions[0].lastTransitionTime, '2026-01-02T03:04:05Z');
    assert.equal(statusChanged(JSON.parse(JSON.stringify(first)), again), false);
    const broken = policyStatus(
      compile({ validations: [{ name: 'v', expression: '(' }] }),
      first,
      new Date('2026-02-01T00:00:00Z'),
    );
    assert.equal(broken.conditions[0].lastTransitionTime, '2026-02-01T00:00:00Z');
    assert.equal(statusChanged(first, broken), true);
  });
});

describe('broken policies at admission', () => {
  const good = (gen: number) => compile({ validations: [ownAccount] }, 'p', gen);
  const broken = (gen: number) => compile({ validations: [{ name: 'v', expression: '(' }] }, 'p', gen);

  test('deny (the default) makes a broken policy refuse identities, whatever was good before', () => {
    const store = new PolicyStore('deny');
    store.put(good(1));
    assert.deepEqual(store.put(broken(2)), { state: 'denying' });
    assert.equal(store.current().policies.length, 0);
    assert.deepEqual(
      store.current().unavailable.map((u) => u.name),
      ['p'],
    );
    assert.match(store.current().unavailable[0].message, /^spec\.validations\[0\]\.expression: syntax error at line 1/);
  });

  test('keep-last-good enforces the last good version, and a policy never good is not enforced', () => {
    const store = new PolicyStore('keep-last-good');
    assert.deepEqual(store.put(broken(1)), { state: 'not-enforced' });
    assert.equal(store.current().policies.length, 0);
    assert.equal(store.current().unavailable.length, 0);
    store.put(good(2));
    assert.deepEqual(store.put(broken(3)), { state: 'last-good', generation: 2 });
    assert.equal(store.current().policies[0].generation, 2);
    store.delete('test', 'p');
    assert.equal(store.current().policies.length, 0);
  });
});
