// The Pods that slipped past (issue 31 item 6): doctor's and serve's "would inject, and has none
// of it" is the admission's own decision, so it can never disagree with serve: over every cloud,
// skip-containers, include-containers, container-profiles and the opt-out label, a Pod is listed
// exactly when serve would add something to one of its containers, and never once serve's patch
// (or a peer's same token volume) is on it. Also the label selectors the reasons are judged with.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { missingInjection } from '../../src/doctor/slipped.ts';
import { OwnerResolver } from '../../src/doctor/owners.ts';
import type { KubeApi } from '../../src/kube/api.ts';
import { selects } from '../../src/kube/label-selector.ts';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { RecordKeys } from '../../src/mutate/injection-record.ts';
import { apply, pod, providers, sa } from '../support/builders.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN, TENANT, WIF_PROVIDER } from '../support/identities.ts';

const P = providers({ 'azure-tenant-id': TENANT });
const INJECTED = 'workload-identity-webhook.io/injected';

const CLOUDS = [
  { prefix: 'eks.amazonaws.com', sep: ',', labels: {}, sa: { 'eks.amazonaws.com/role-arn': ROLE_ARN } },
  {
    prefix: 'azure.workload.identity',
    sep: ';',
    labels: { 'azure.workload.identity/use': 'true' },
    sa: { 'azure.workload.identity/client-id': CLIENT },
  },
  {
    prefix: 'cloud.google.com',
    sep: ',',
    labels: {},
    sa: {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': GCP_EMAIL,
    },
  },
] as const;

const twoContainers = (labels: Record<string, string>, annotations?: Record<string, string>): Pod =>
  pod({
    labels,
    annotations,
    spec: { initContainers: [{ name: 'migrate' }], containers: [{ name: 'app' }, { name: 'sidecar' }] },
  });

describe('missingInjection: the admission decision on a running Pod', () => {
  test('every cloud and container selection: listed exactly when serve would reach a container; never once served', () => {
    const keys = RecordKeys.derive('serve');
    let listed = 0;
    for (const cloud of CLOUDS)
      for (const annotations of [
        undefined,
        { [`${cloud.prefix}/skip-containers`]: 'app' },
        { [`${cloud.prefix}/skip-containers`]: ['migrate', 'app', 'sidecar'].join(cloud.sep) },
        { [`${cloud.prefix}/include-containers`]: 'sidecar' },
        { [`${cloud.prefix}/include-containers`]: 'nothing-by-this-name' },
        { [`${cloud.prefix}/include-containers`]: 'app', [`${cloud.prefix}/skip-containers`]: 'app' },
      ])
        for (const optOut of [false, true]) {
          const p = twoContainers(
            { ...cloud.labels, ...(optOut ? { 'workload-identity-webhook.io/skip': 'true' } : {}) },
            annotations,
          );
          const account = sa(cloud.sa);
          const served = mutatePod(P, { pod: p, namespace: 'team-a', serviceAccount: account, recordKeys: keys });
          assert.ok(served.allowed);
          const touched = new Set(
            served.patch
              .map((op) => /^\/spec\/(containers|initContainers)\/(\d+)\//.exec(op.path))
              .filter((m) => m !== null)
              .map((m) => p.spec![m[1] as 'containers']![Number(m[2])].name),
          );
          const missing = missingInjection(P, p, account);
          const what = `${cloud.prefix} ${JSON.stringify(annotations)} opt-out ${optOut}`;
          assert.deepEqual(missing?.containers.toSorted() ?? [], [...touched].sort(), what);
          if (missing) listed++;
          // Serve's own Pod, checked by a process that does not hold serve's record key.
          assert.equal(missingInjection(P, apply(p, served.patch), account), undefined, what);
        }
    // The cases that must be listed are listed (not a vacuous agreement).
    assert.ok(listed >= 9, `${listed} listed`);
  });

  test('a peer webhook that injected the same token volume counts as injected', () => {
    const p = twoContainers({});
    const account = sa(CLOUDS[0].sa);
    const served = mutatePod(P, { pod: p, namespace: 'team-a', serviceAccount: account });
    assert.ok(served.allowed);
    const peer = apply(p, served.patch);
    delete peer.metadata!.annotations![INJECTED];
    assert.equal(missingInjection(P, peer, account), undefined);
    assert.deepEqual(missingInjection(P, p, account), {
      providers: ['aws'],
      containers: ['migrate', 'app', 'sidecar'],
    });
  });

  test('no identity, no ServiceAccount: nothing is missing', () => {
    assert.equal(missingInjection(P, twoContainers({}), sa({})), undefined);
    assert.equal(missingInjection(P, twoContainers({}), undefined), undefined);
  });

  test('container-profiles: a profile per container is listed; one role-arns lacks is told as a refusal', () => {
    const roles = { 'eks.amazonaws.com/role-arns': `writer=${ROLE_ARN}` };
    const ok = missingInjection(
      P,
      twoContainers({}),
      sa({ ...roles, 'eks.amazonaws.com/container-profiles': 'app=writer' }),
    );
    assert.deepEqual(ok?.providers, ['aws']);
    assert.equal(ok?.refused, undefined);
    const bad = missingInjection(
      P,
      twoContainers({}),
      sa({ ...roles, 'eks.amazonaws.com/container-profiles': 'app=admin' }),
    );
    assert.match(bad?.refused ?? '', /container-profiles: container "app" names profile "admin"/);
  });
});

describe('label selectors, as the API server judges a webhook entry', () => {
  const labels = { team: 'a', 'kubernetes.io/metadata.name': 'apps' };
  const cases: [unknown, boolean][] = [
    [undefined, true],
    [{}, true],
    [{ matchLabels: { team: 'a' } }, true],
    [{ matchLabels: { team: 'b' } }, false],
    [{ matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['apps'] }] }, false],
    [{ matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['apps', 'x'] }] }, true],
    [{ matchExpressions: [{ key: 'missing', operator: 'NotIn', values: ['x'] }] }, true],
    [{ matchExpressions: [{ key: 'missing', operator: 'In', values: ['x'] }] }, false],
    [{ matchExpressions: [{ key: 'team', operator: 'Exists' }] }, true],
    [{ matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, false],
    [{ matchExpressions: [{ key: 'toString', operator: 'Exists' }] }, false],
    [{ matchExpressions: [{ key: 'team', operator: 'Gt', values: ['1'] }] }, false],
    [{ matchLabels: { team: 'a' }, matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, false],
  ];
  for (const [selector, expected] of cases)
    test(`${JSON.stringify(selector)}: ${expected}`, () => {
      assert.equal(selects(selector as Parameters<typeof selects>[0], labels), expected);
    });
});

describe('owners: the thing a person restarts, and hostile values', () => {
  const owned = (ref: Record<string, unknown>): Pod => ({
    metadata: { name: 'p', namespace: 'apps', ownerReferences: [{ controller: true, uid: 'u', ...ref }] },
  });
  /** The API server's answer for the one intermediate object read (a ReplicaSet, a Job). */
  const api = (up: Record<string, unknown> | undefined) =>
    ({
      request: async () => ({ metadata: { ownerReferences: up ? [{ controller: true, ...up }] : [] } }),
    }) as unknown as KubeApi;

  test('a kind that is an Object.prototype member is no restartable workload', async () => {
    for (const kind of ['toString', 'constructor', '__proto__']) {
      const owner = await new OwnerResolver(api(undefined)).ownerOf(owned({ apiVersion: 'apps/v1', kind, name: 'x' }));
      assert.equal(owner.restartable, false, kind);
    }
  });

  test('ReplicaSet to its Deployment; a Job to its CronJob, whose name is quoted in the command printed', async () => {
    const deployment = await new OwnerResolver(api({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' })).ownerOf(
      owned({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8' }),
    );
    assert.deepEqual(deployment, { kind: 'Deployment', namespace: 'apps', name: 'web', restartable: true });
    const cron = await new OwnerResolver(api({ apiVersion: 'batch/v1', kind: 'CronJob', name: "n'$(id)" })).ownerOf(
      owned({ apiVersion: 'batch/v1', kind: 'Job', name: 'j' }),
    );
    assert.equal(cron.restartable, false);
    assert.match(cron.instead!, /--from='cronjob\/n'\\''\$\(id\)' 'n'\\''\$\(id\)-identity'$/);
  });
});
