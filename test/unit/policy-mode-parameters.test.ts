// The policy mode's parameters (src/policy-mode/parameters.ts): rendered by the webhook's core from
// ServiceAccounts, judged by tenant policy, bounded by their budget.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { denial } from '../../src/errors.ts';
import type { ServiceAccountView } from '../../src/kube/types.ts';
import { renderParameters } from '../../src/policy-mode/parameters.ts';
import { roleArn } from '../support/identities.ts';

const providers = createProviders(
  loadConfig(new Map([['azure-tenant-id', '11111111-2222-4333-8444-555555555555']]), {}),
);
const sa = (name: string, annotations: Record<string, string> = {}): ServiceAccountView => ({
  namespace: 'ns',
  name,
  uid: '',
  annotations,
});
const role = (n: number) => ({ 'eks.amazonaws.com/role-arn': roleArn(`r${n}`) });

test("a ServiceAccount's pieces come from the core: volume, mounts, env groups, and Windows paths apart", () => {
  const { spec, leftOut } = renderParameters(providers, 'ns', [sa('app', role(1))]);
  assert.deepEqual(leftOut, []);
  const app = spec.serviceAccounts.app;
  const aws = app.linux.find((i) => i.provider === 'aws')!;
  assert.equal(aws.volumes[0].name, 'aws-iam-token');
  assert.deepEqual(aws.mounts, [
    { name: 'aws-iam-token', mountPath: '/var/run/secrets/eks.amazonaws.com/serviceaccount', readOnly: true },
  ]);
  const env = Object.fromEntries(aws.envGroups.flat().map((e) => [e.name, e.value]));
  assert.equal(env.AWS_ROLE_ARN, roleArn('r1'));
  assert.equal(env.AWS_WEB_IDENTITY_TOKEN_FILE, '/var/run/secrets/eks.amazonaws.com/serviceaccount/token');
  assert.deepEqual(aws.configuredBy?.[0], ['AWS_ROLE_ARN', 'AWS_WEB_IDENTITY_TOKEN_FILE']);
  assert.equal(aws.skipAnnotation, 'eks.amazonaws.com/skip-containers');
  assert.equal(aws.skipLabel, 'eks.amazonaws.com/skip-pod-identity-webhook');
  const windows = app.windows!.find((i) => i.provider === 'aws')!;
  assert.equal(
    Object.fromEntries(windows.envGroups.flat().map((e) => [e.name, e.value])).AWS_WEB_IDENTITY_TOKEN_FILE,
    'C:\\var\\run\\secrets\\eks.amazonaws.com\\serviceaccount\\token',
  );
});

test('ServiceAccounts without annotations cost nothing: the fallback (Azure, by its label) serves them', () => {
  const { spec } = renderParameters(providers, 'ns', [sa('default'), sa('plain'), sa('app', role(1))]);
  assert.deepEqual(Object.keys(spec.serviceAccounts), ['app']);
  assert.deepEqual(
    spec.fallback!.linux.map((i) => [i.provider, i.requireLabel]),
    [['azure', { key: 'azure.workload.identity/use', value: 'true' }]],
  );
});

test("tenant policy's refusal and an oversize ServiceAccount leave it out, with the reason", () => {
  const judge = () => denial('PolicyDenied', 'role r2 is not granted to namespace ns');
  const refused = renderParameters(providers, 'ns', [sa('app', role(2))], judge);
  assert.deepEqual(refused.leftOut, [{ serviceAccount: 'app', reason: 'role r2 is not granted to namespace ns' }]);
  assert.equal(refused.spec.serviceAccounts.app, undefined);
  const big: ServiceAccountView = {
    ...sa('big', role(3)),
    oversize: { key: 'eks.amazonaws.com/role-arn', bytes: 99_999, maxBytes: 2048 },
  };
  const over = renderParameters(providers, 'ns', [big]);
  assert.equal(over.leftOut[0].serviceAccount, 'big');
  assert.match(over.leftOut[0].reason, /eks\.amazonaws\.com\/role-arn/);
});

test('the budget: ServiceAccounts in name order until the next would not fit; the rest left out, naming the budget', () => {
  const accounts = Array.from({ length: 40 }, (_, n) => sa(`sa-${String(n).padStart(2, '0')}`, role(n)));
  const whole = renderParameters(providers, 'ns', accounts);
  assert.equal(Object.keys(whole.spec.serviceAccounts).length, 40);
  const budget = Math.floor(whole.bytes / 2);
  const half = renderParameters(providers, 'ns', accounts, undefined, budget);
  const kept = Object.keys(half.spec.serviceAccounts);
  assert.ok(kept.length >= 15 && kept.length < 25, `${kept.length} kept`);
  assert.deepEqual(
    kept,
    accounts.slice(0, kept.length).map((a) => a.name),
  );
  assert.equal(half.leftOut.length, 40 - kept.length);
  assert.match(half.leftOut[0].reason, new RegExp(`budget of ${budget} bytes`));
  assert.ok(Buffer.byteLength(JSON.stringify(half.spec)) <= budget, 'the object within its budget');
  assert.equal(Buffer.byteLength(JSON.stringify(half.spec)), half.bytes, 'bytes counted exactly');
});
