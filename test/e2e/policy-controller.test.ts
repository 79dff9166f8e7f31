// The policy mode's controller (issue 32 item 2) on the newest kube-apiserver: it renders each
// namespace's WorkloadIdentityParameters from its ServiceAccounts through the core and keeps them
// current, so a ServiceAccount change reaches the Pods the policy admits within seconds.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { join } from 'node:path';
import { startCli } from '../harness/cli-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { createProviders, serviceAccountAnnotations } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import { denial } from '../../src/errors.ts';
import { kubeApiOf } from '../../src/kube/connect.ts';
import type { Pod } from '../../src/kube/types.ts';
import { ParametersController } from '../../src/policy-mode/controller.ts';
import { runParametersController, type ParametersRunner } from '../../src/policy-mode/run.ts';
import {
  PARAMETERS_GROUP,
  PARAMETERS_NAME,
  PARAMETERS_PLURAL,
  PARAMETERS_VERSION,
} from '../../src/policy-mode/policy.ts';
import { dryRun, installPolicyMode } from '../support/policy-mode.ts';
import { roleArn } from '../support/identities.ts';

const providers = createProviders(loadConfig(new Map(), {}));
const ROLE = (n: number) => roleArn(`r${n}`);
const POD: Pod = {
  metadata: { name: 'p' },
  spec: { serviceAccountName: 'app', containers: [{ name: 'c', image: 'i' }] },
};

function envOf(stored: Awaited<ReturnType<typeof dryRun>>): Record<string, string | undefined> {
  if ('refused' in stored) return {};
  return Object.fromEntries((stored.spec?.containers?.[0].env ?? []).map((e) => [e.name, e.value]));
}

describe('the parameters controller', () => {
  let cp: ControlPlane;
  let controller: ParametersController;
  const log = pino({ level: 'warn' });

  before(async () => {
    cp = await startControlPlane({ name: 'policy-controller', version: 'newest' });
    await installPolicyMode(cp);
    for (const ns of ['team-a', 'team-b']) await cp.request('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await cp.request('POST', '/api/v1/namespaces/team-a/serviceaccounts', {
      metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE(1) } },
    });
    controller = new ParametersController({
      api: kubeApiOf(cp.kubeConfig()),
      providers,
      annotations: serviceAccountAnnotations(providers),
      log,
      debounceMs: 100,
    });
    await controller.start();
  });
  after(async () => {
    await controller?.stop();
    await cp?.stop();
  });

  test("a namespace's ServiceAccounts reach its parameter object, and through the policy its Pods", async () => {
    const path = `/apis/${PARAMETERS_GROUP}/${PARAMETERS_VERSION}/namespaces/team-a/${PARAMETERS_PLURAL}/${PARAMETERS_NAME}`;
    const object = await until('team-a parameters', async () => {
      const r = await cp.request('GET', path);
      return r.status === 200 ? JSON.parse(r.body) : undefined;
    });
    assert.deepEqual(Object.keys(object.spec.serviceAccounts), ['app']);
    assert.equal(object.metadata.managedFields[0].manager, 'workload-identity-webhook');
    const env = await until(
      'the policy injects role 1',
      async () => envOf(await dryRun(cp, 'team-a', POD)).AWS_ROLE_ARN,
    );
    assert.equal(env, ROLE(1));
    // team-b's Pods read team-b's object: the same ServiceAccount name there has no identity.
    const other = await dryRun(cp, 'team-b', POD);
    assert.equal(envOf(other).AWS_ROLE_ARN, undefined);
  });

  test('a ServiceAccount changed, added or deleted reaches the Pods within seconds', async () => {
    const started = performance.now();
    await kubeApiOf(cp.kubeConfig()).request('PATCH', '/api/v1/namespaces/team-a/serviceaccounts/app', {
      contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { 'eks.amazonaws.com/role-arn': ROLE(2) } } },
    });
    await until(
      'role 2 in new Pods',
      async () => envOf(await dryRun(cp, 'team-a', POD)).AWS_ROLE_ARN === ROLE(2) || undefined,
    );
    const changed = performance.now() - started;
    await cp.request('POST', '/api/v1/namespaces/team-b/serviceaccounts', {
      metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE(3) } },
    });
    await until(
      'team-b gets role 3',
      async () => envOf(await dryRun(cp, 'team-b', POD)).AWS_ROLE_ARN === ROLE(3) || undefined,
    );
    await cp.request('DELETE', '/api/v1/namespaces/team-a/serviceaccounts/app');
    await until(
      'no role for a deleted ServiceAccount',
      async () => envOf(await dryRun(cp, 'team-a', POD)).AWS_ROLE_ARN === undefined || undefined,
    );
    console.log(`a ServiceAccount change reached the policy's Pods in ${Math.round(changed)} ms`);
    assert.ok(controller.writes >= 4, `${controller.writes} writes`);
  });

  test("tenant policy's change renders every namespace again: a revoked role leaves the parameters within seconds", async () => {
    await controller.stop();
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'team-e' } });
    await cp.request('POST', '/api/v1/namespaces/team-e/serviceaccounts', {
      metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE(7) } },
    });
    let version = {};
    let revoked = false;
    const judged = new ParametersController({
      api: kubeApiOf(cp.kubeConfig()),
      providers,
      annotations: serviceAccountAnnotations(providers),
      log,
      debounceMs: 100,
      policyPollMs: 100,
      judge: async () => (revoked ? () => denial('PolicyDenied', `role ${ROLE(7)} is not granted`) : undefined),
      policyVersion: () => version,
    });
    await judged.start();
    try {
      await until(
        'role 7 granted',
        async () => envOf(await dryRun(cp, 'team-e', POD)).AWS_ROLE_ARN === ROLE(7) || undefined,
      );
      const started = performance.now();
      revoked = true;
      version = {};
      await until(
        'role 7 revoked',
        async () => envOf(await dryRun(cp, 'team-e', POD)).AWS_ROLE_ARN === undefined || undefined,
      );
      console.log(`a tenant policy change reached the policy's Pods in ${Math.round(performance.now() - started)} ms`);
    } finally {
      await judged.stop();
    }
  });

  test('a ServiceAccount over the budget is left out, with an Event on it naming the budget', async () => {
    await controller.stop();
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'team-f' } });
    for (const n of [1, 2, 3])
      await cp.request('POST', '/api/v1/namespaces/team-f/serviceaccounts', {
        metadata: { name: `sa-${n}`, annotations: { 'eks.amazonaws.com/role-arn': ROLE(10 + n) } },
      });
    const small = new ParametersController({
      api: kubeApiOf(cp.kubeConfig()),
      providers,
      annotations: serviceAccountAnnotations(providers),
      log,
      debounceMs: 100,
      budget: 9000,
    });
    await small.start();
    try {
      const events = await until('an Event on sa-3', async () => {
        const r = await cp.request('GET', '/api/v1/namespaces/team-f/events');
        const items = (
          JSON.parse(r.body) as { items: { involvedObject: { name: string }; reason: string; message: string }[] }
        ).items;
        return items.some((e) => e.involvedObject.name === 'sa-3') ? items : undefined;
      });
      const event = events.find((e) => e.involvedObject.name === 'sa-3')!;
      assert.equal(event.reason, 'LeftOutOfPolicyParameters');
      assert.match(event.message, /budget of 9000 bytes/);
      assert.deepEqual(
        events.filter((e) => e.involvedObject.name !== 'sa-3').map((e) => e.involvedObject.name),
        [],
      );
      const sa3 = { ...POD, spec: { ...POD.spec!, serviceAccountName: 'sa-3' } };
      const sa1 = { ...POD, spec: { ...POD.spec!, serviceAccountName: 'sa-1' } };
      await until(
        'sa-1 served',
        async () => envOf(await dryRun(cp, 'team-f', sa1)).AWS_ROLE_ARN === ROLE(11) || undefined,
      );
      assert.equal(envOf(await dryRun(cp, 'team-f', sa3)).AWS_ROLE_ARN, undefined);
    } finally {
      await small.stop();
    }
  });

  test('serve --policy-parameters runs the controller: a ServiceAccount reaches the policy through it', async () => {
    await controller.stop();
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'serve-leases' } });
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'team-d' } });
    const serve = startCli(
      'serve',
      ['serve', '--kubeconfig', cp.kubeconfigPath, '--self-signed', '--port', '0', '--metrics-port', '0'],
      join(cp.dir, 'serve.log'),
      { env: { WIW_POLICY_PARAMETERS: 'true', WIW_POLICY_PARAMETERS_LEASE_NAMESPACE: 'serve-leases' } },
    );
    try {
      await serve.waitForLog('listening', 'serve listening');
      await cp.request('POST', '/api/v1/namespaces/team-d/serviceaccounts', {
        metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE(6) } },
      });
      await until(
        'role 6 through serve',
        async () => envOf(await dryRun(cp, 'team-d', POD)).AWS_ROLE_ARN === ROLE(6) || undefined,
      );
      const lease = JSON.parse(
        (
          await cp.request(
            'GET',
            '/apis/coordination.k8s.io/v1/namespaces/serve-leases/leases/workload-identity-webhook-policy-parameters',
          )
        ).body,
      );
      assert.ok(lease.spec?.holderIdentity, 'serve holds the Lease');
    } finally {
      await serve.stop();
    }
  });

  test('leader-elected: of two replicas one writes; when it stops, the other takes over', async () => {
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'leases' } });
    await cp.request('POST', '/api/v1/namespaces', { metadata: { name: 'team-c' } });
    const runners: ParametersRunner[] = ['replica-1', 'replica-2'].map((identity) =>
      runParametersController({
        leaseNamespace: 'leases',
        identity,
        leaseDurationSeconds: 3,
        api: kubeApiOf(cp.kubeConfig()),
        providers,
        annotations: serviceAccountAnnotations(providers),
        log,
        debounceMs: 100,
      }),
    );
    try {
      const leader = await until('a leader', async () => runners.find((r) => r.isLeader));
      const sa = (n: number) => ({ metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': ROLE(n) } } });
      await cp.request('POST', '/api/v1/namespaces/team-c/serviceaccounts', sa(4));
      await until(
        'role 4 through the leader',
        async () => envOf(await dryRun(cp, 'team-c', POD)).AWS_ROLE_ARN === ROLE(4) || undefined,
      );
      assert.equal(runners.filter((r) => r.isLeader).length, 1, 'one leader');
      assert.equal(runners.find((r) => r !== leader)!.controller, undefined, 'the standby writes nothing');
      await leader.stop();
      const standby = runners.find((r) => r !== leader)!;
      await until('the standby leads', async () => standby.isLeader || undefined);
      await kubeApiOf(cp.kubeConfig()).request('PATCH', '/api/v1/namespaces/team-c/serviceaccounts/app', {
        contentType: 'application/merge-patch+json',
        body: { metadata: { annotations: { 'eks.amazonaws.com/role-arn': ROLE(5) } } },
      });
      await until(
        'role 5 through the new leader',
        async () => envOf(await dryRun(cp, 'team-c', POD)).AWS_ROLE_ARN === ROLE(5) || undefined,
      );
    } finally {
      for (const r of runners) await r.stop();
    }
  });
});
