// The injection record cannot be forged or replayed into removing what the webhook did not add,
// stays small whatever the number of containers, and survives container names that are also
// property names of plain objects.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mutatePod } from '../../src/mutate/pod.ts';
import {
  digest,
  INJECTED_ANNOTATION,
  readRecord,
  RecordKeys,
  writeRecord,
  type InjectionRecord,
} from '../../src/mutate/injection-record.ts';
import type { Pod } from '../../src/kube/types.ts';
import { apply, envOf, pod, providers, sa } from '../support/builders.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN as ARN, WIF_PROVIDER } from '../support/identities.ts';

const AWS = { 'eks.amazonaws.com/role-arn': ARN };
const keys = RecordKeys.random();

function admit(p: Pod, annotations: Record<string, string>, namespace = 'team-a', saName = 'app', recordKeys = keys) {
  return mutatePod(providers(), { pod: p, namespace, serviceAccount: sa(annotations, saName, namespace), recordKeys });
}

function mutated(
  p: Pod,
  annotations: Record<string, string>,
  namespace = 'team-a',
  saName = 'app',
  recordKeys = keys,
): Pod {
  const r = admit(p, annotations, namespace, saName, recordKeys);
  assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
  return apply(p, r.patch);
}

/** What another webhook, earlier in the chain, added to the Pod. */
function withOtherWebhooksWork(p: Pod): Pod {
  const out = structuredClone(p);
  out.metadata!.annotations = { ...out.metadata!.annotations, 'proxy.example.com/injected': 'true' };
  out.spec!.volumes = [...(out.spec!.volumes ?? []), { name: 'corp-ca', configMap: { name: 'corp-ca' } }];
  for (const c of out.spec!.containers!) {
    c.env = [...(c.env ?? []), { name: 'HTTPS_PROXY', value: 'http://proxy.corp:3128' }];
    c.volumeMounts = [...(c.volumeMounts ?? []), { name: 'corp-ca', mountPath: '/etc/ssl/corp' }];
  }
  return out;
}

describe('a forged injection record', () => {
  test("written by the Pod's author in the old format, it removes nothing another webhook added", () => {
    const forged = pod({
      annotations: {
        [INJECTED_ANNOTATION]: JSON.stringify({
          sa: 'someone-else',
          env: { app: ['HTTPS_PROXY'] },
          volumes: ['corp-ca'],
          annotations: ['proxy.example.com/injected'],
        }),
      },
    });
    const before = withOtherWebhooksWork(forged);
    const r = admit(before, AWS);
    assert.ok(r.allowed);
    assert.ok(
      r.patch.every((op) => op.op !== 'remove'),
      JSON.stringify(r.patch),
    );
    const after = apply(before, r.patch);
    assert.equal(envOf(after.spec!.containers![0]).HTTPS_PROXY, 'http://proxy.corp:3128');
    assert.ok(after.spec!.volumes!.some((v) => v.name === 'corp-ca'));
    assert.equal(after.metadata!.annotations!['proxy.example.com/injected'], 'true');
    assert.equal(envOf(after.spec!.containers![0]).AWS_ROLE_ARN, ARN);
  });

  test('in the new format with a made-up signature, it is not trusted', () => {
    const record = {
      v: 2,
      sa: 'someone-else',
      env: [['HTTPS_PROXY', digest('http://proxy.corp:3128')]],
      vol: [],
      ann: [],
      keep: [],
      mac: 'A'.repeat(22),
    };
    const before = withOtherWebhooksWork(pod({ annotations: { [INJECTED_ANNOTATION]: JSON.stringify(record) } }));
    const r = admit(before, AWS);
    assert.ok(r.allowed);
    assert.ok(
      r.patch.every((op) => op.op !== 'remove'),
      JSON.stringify(r.patch),
    );
  });

  test("signed with another key (another cluster's webhook, preview), it is not trusted", () => {
    const elsewhere = mutated(pod(), AWS, 'team-a', 'app', RecordKeys.random());
    elsewhere.spec!.serviceAccountName = 'plain';
    const r = admit(elsewhere, {}, 'team-a', 'plain');
    assert.ok(r.allowed);
    assert.deepEqual(r.patch, []);
  });

  test('a genuine record replayed in another namespace is not trusted', () => {
    const genuine = mutated(pod(), AWS, 'team-a');
    const replay = withOtherWebhooksWork(
      pod({ annotations: { [INJECTED_ANNOTATION]: genuine.metadata!.annotations![INJECTED_ANNOTATION] } }),
    );
    replay.metadata!.namespace = 'team-b';
    replay.spec!.serviceAccountName = 'plain';
    const r = admit(replay, {}, 'team-b', 'plain');
    assert.ok(r.allowed);
    assert.deepEqual(r.patch, []);
  });

  test('a genuine record replayed onto a Pod whose values differ removes none of them', () => {
    const genuine = mutated(pod(), AWS);
    // Same names as the webhook's, other values: the user's (or another webhook's).
    const replay = pod({
      annotations: { [INJECTED_ANNOTATION]: genuine.metadata!.annotations![INJECTED_ANNOTATION] },
      spec: {
        serviceAccountName: 'plain',
        volumes: [
          {
            name: 'aws-iam-token',
            projected: {
              sources: [{ serviceAccountToken: { audience: 'other', expirationSeconds: 3600, path: 'token' } }],
            },
          },
        ],
        containers: [
          {
            name: 'app',
            env: [{ name: 'AWS_ROLE_ARN', value: 'arn:aws:iam::999999999999:role/mine' }],
            volumeMounts: [{ name: 'aws-iam-token', mountPath: '/mine' }],
          },
        ],
      },
    });
    const r = admit(replay, {}, 'team-a', 'plain');
    assert.ok(r.allowed);
    assert.deepEqual(
      r.patch.filter((op) => op.op === 'remove').map((op) => op.path),
      ['/metadata/annotations/workload-identity-webhook.io~1injected'],
    );
  });
});

describe('the genuine record', () => {
  test("a user value equal to the webhook's stays when the identity is removed", () => {
    const p = pod({
      spec: { containers: [{ name: 'app' }, { name: 'mine', env: [{ name: 'AWS_ROLE_ARN', value: ARN }] }] },
    });
    const once = mutated(p, AWS);
    once.spec!.serviceAccountName = 'plain';
    const back = mutated(once, {}, 'team-a', 'plain');
    assert.deepEqual(envOf(back.spec!.containers![0]), {});
    assert.deepEqual(envOf(back.spec!.containers![1]), { AWS_ROLE_ARN: ARN });
    assert.equal(back.spec!.volumes!.length, 0);
  });

  test('verifies with the previous key after a rotation', () => {
    const oldKeys = RecordKeys.derive('serving key 1');
    const once = mutated(pod(), AWS, 'team-a', 'app', oldKeys);
    once.spec!.serviceAccountName = 'plain';
    const back = mutated(once, {}, 'team-a', 'plain', RecordKeys.derive('serving key 2', 'serving key 1'));
    assert.deepEqual(envOf(back.spec!.containers![0]), {});
  });

  test('does not grow with the number of containers', () => {
    const containers = Array.from({ length: 2000 }, (_, i) => ({ name: `c${i}`, image: 'busybox' }));
    const out = mutated(pod({ spec: { containers } }), {
      ...AWS,
      'azure.workload.identity/client-id': CLIENT,
    });
    const record = out.metadata!.annotations![INJECTED_ANNOTATION];
    const small = mutated(pod(), {
      ...AWS,
      'azure.workload.identity/client-id': CLIENT,
    }).metadata!.annotations![INJECTED_ANNOTATION];
    assert.equal(record.length, small.length);
    assert.ok(record.length < 1024, `${record.length} bytes`);
  });
});

describe('setup init containers', () => {
  test("pfnet's gcloud setup container goes with the identity when the ServiceAccount changes; a user's init container stays", () => {
    const pfnet = {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': GCP_EMAIL,
    };
    const p = pod({ spec: { initContainers: [{ name: 'migrate', image: 'db:1', env: [{ name: 'X', value: '1' }] }] } });
    const once = mutated(p, pfnet);
    assert.deepEqual(
      once.spec!.initContainers!.map((c) => c.name),
      ['gcloud-setup', 'migrate'],
    );
    once.spec!.serviceAccountName = 'plain';
    const back = mutated(once, {}, 'team-a', 'plain');
    assert.deepEqual(back.spec!.initContainers, [
      { name: 'migrate', image: 'db:1', env: [{ name: 'X', value: '1' }], volumeMounts: [] },
    ]);
    assert.deepEqual(back.spec!.volumes, []);
    assert.deepEqual(envOf(back.spec!.containers![0]), {});
  });
});

describe("the Azure peer's proxy containers", () => {
  const AZURE = { 'azure.workload.identity/client-id': '00000000-0000-0000-0000-000000000001' };
  const proxied = (spec: Record<string, unknown> = {}) =>
    pod({
      labels: { 'azure.workload.identity/use': 'true' },
      annotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' },
      spec: { initContainers: [{ name: 'migrate', image: 'db:1' }], ...spec },
    });
  const admitWith = (flags: Record<string, string>, p: Pod, annotations: Record<string, string>, saName = 'app') => {
    const r = mutatePod(providers(flags), {
      pod: p,
      namespace: 'team-a',
      serviceAccount: sa(annotations, saName),
      recordKeys: keys,
    });
    assert.ok(r.allowed, r.allowed ? '' : r.denial.message);
    return r;
  };

  for (const [mode, flags, inits, containers] of [
    ['native sidecar', {}, ['azwi-proxy', 'migrate', 'azwi-proxy-init'], ['app']],
    [
      'first container',
      { 'azure-proxy-native-sidecar': 'false' },
      ['migrate', 'azwi-proxy-init'],
      ['azwi-proxy', 'app'],
    ],
  ] as const) {
    test(`${mode}: added once, unchanged by a second admission, replaced with the identity when the ServiceAccount changes`, () => {
      const p = proxied();
      const once = apply(p, admitWith(flags, p, AZURE).patch);
      assert.deepEqual(
        once.spec!.initContainers!.map((c) => c.name),
        inits,
      );
      assert.deepEqual(
        once.spec!.containers!.map((c) => c.name),
        containers,
      );
      // Reinvoked with the same ServiceAccount: nothing to add, the proxy is not given the identity twice.
      assert.deepEqual(admitWith(flags, once, AZURE).patch, []);
      // Another ServiceAccount: the old proxy goes with the old identity, the new one carries the new.
      const moved = structuredClone(once);
      moved.spec!.serviceAccountName = 'other';
      const other = { 'azure.workload.identity/client-id': '00000000-0000-0000-0000-000000000009' };
      const next = apply(moved, admitWith(flags, moved, other, 'other').patch);
      assert.deepEqual(
        next.spec!.initContainers!.map((c) => c.name),
        inits,
      );
      for (const c of [...next.spec!.initContainers!, ...next.spec!.containers!].filter((c) => c.name !== 'migrate'))
        assert.equal(envOf(c).AZURE_CLIENT_ID, '00000000-0000-0000-0000-000000000009', c.name);
      // And with no Azure identity left at all (the Pod opts out), nothing of it stays.
      const out = structuredClone(once);
      out.metadata!.labels = { 'workload-identity-webhook.io/skip': 'true' };
      out.spec!.serviceAccountName = 'plain';
      const back = apply(out, admitWith(flags, out, {}, 'plain').patch);
      assert.deepEqual(
        back.spec!.initContainers!.map((c) => c.name),
        ['migrate'],
      );
      assert.deepEqual(
        back.spec!.containers!.map((c) => c.name),
        ['app'],
      );
      assert.deepEqual(back.spec!.volumes, []);
    });
  }

  test("a user's own container named azwi-proxy stays, is given the identity like any container, and stays on removal", () => {
    const mine = { name: 'azwi-proxy', image: 'registry.example/my-proxy:1', args: ['--proxy-port=8000'] };
    const p = proxied({ initContainers: [mine] });
    const once = apply(p, admitWith({}, p, AZURE).patch);
    const kept = once.spec!.initContainers!.find((c) => c.name === 'azwi-proxy')!;
    assert.equal(kept.image, 'registry.example/my-proxy:1');
    assert.ok(envOf(kept).AZURE_CLIENT_ID);
    const out = structuredClone(once);
    out.metadata!.labels = { 'workload-identity-webhook.io/skip': 'true' };
    out.spec!.serviceAccountName = 'plain';
    const back = apply(out, admitWith({}, out, {}, 'plain').patch);
    assert.deepEqual(back.spec!.initContainers![0], { ...mine, env: [], volumeMounts: [] });
  });
});

describe('container names that are also object property names', () => {
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    test(`a container named "${name}" is injected and cleaned like any other`, () => {
      const p = pod({
        spec: {
          containers: [{ name, image: 'busybox', env: [{ name: 'AWS_ROLE_ARN', value: ARN }] }, { name: 'app' }],
        },
      });
      const once = mutated(p, AWS);
      assert.equal(once.spec!.containers![0].name, name);
      assert.equal(envOf(once.spec!.containers![1]).AWS_ROLE_ARN, ARN);
      once.spec!.serviceAccountName = 'plain';
      const back = mutated(once, {}, 'team-a', 'plain');
      assert.deepEqual(envOf(back.spec!.containers![0]), { AWS_ROLE_ARN: ARN });
      assert.deepEqual(envOf(back.spec!.containers![1]), {});
    });
  }
});

describe('records written by earlier versions', () => {
  // The MAC's input is a format: a Pod admitted by an earlier version carries its record, and a
  // change of the format would read it as forged. These MACs were made by the format as it was
  // when ctr and lab were added (a fixed key); they must keep verifying.
  const fixed = RecordKeys.derive('fixed test key for record MAC vectors');
  const base = {
    v: 2 as const,
    sa: 'app',
    env: [['AWS_ROLE_ARN', 'd1']],
    vol: [['aws-iam-token', 'd2']],
    ann: [],
    keep: [],
  };
  const vectors: [string, object, string][] = [
    ['no optional field', base, 'nXrqsfoz8L5b0xDf59lzmg'],
    ['setup init containers', { ...base, init: [['gcloud-setup', 'd3']] }, 'kkWnHAdAem9j0aybp2inqL'],
    ['added containers', { ...base, ctr: [['azwi-proxy', 'd4']] }, 'GMI4HQABwnZASus--ypjj8'],
    ['added labels', { ...base, lab: [['eks.amazonaws.com/pod-identity', 'd5']] }, 'wK9A1DH6nH4LNWjCSh7u33'],
    ['an empty label list, as none', { ...base, lab: [] }, 'nXrqsfoz8L5b0xDf59lzmg'],
    [
      'all of them',
      {
        ...base,
        init: [['gcloud-setup', 'd3']],
        ctr: [['azwi-proxy', 'd4']],
        lab: [['eks.amazonaws.com/pod-identity', 'd5']],
      },
      'ZQdfzTvZCenU-QwnOcRYi4',
    ],
  ];
  for (const [what, record, mac] of vectors)
    test(`${what}: the same MAC, and the record verifies`, () => {
      const written = writeRecord(fixed, 'team-a', record as InjectionRecord);
      assert.equal(JSON.parse(written).mac, mac);
      assert.ok(readRecord(fixed, 'team-a', JSON.stringify({ ...record, mac })), 'verified');
      assert.equal(
        readRecord(fixed, 'team-b', JSON.stringify({ ...record, mac })),
        undefined,
        'bound to its namespace',
      );
    });
});
