// include-containers, beside skip-containers, for every cloud (issue 31 item 2;
// aws/amazon-eks-pod-identity-webhook#147): only the named containers and init containers get the
// injection, skip wins for a name in both, names matching no container are warned of.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mutatePod } from '../../src/mutate/pod.ts';
import type { Container, Pod } from '../../src/kube/types.ts';
import { apply, pod, providers, sa } from '../support/builders.ts';
import { CLIENT, GCP_EMAIL, ROLE_ARN, TENANT, WIF_PROVIDER } from '../support/identities.ts';

const CLOUDS = [
  {
    prefix: 'eks.amazonaws.com',
    separator: ',',
    labels: {},
    sa: { 'eks.amazonaws.com/role-arn': ROLE_ARN },
    variable: 'AWS_ROLE_ARN',
  },
  {
    prefix: 'azure.workload.identity',
    separator: ';',
    labels: { 'azure.workload.identity/use': 'true' },
    sa: { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT },
    variable: 'AZURE_CLIENT_ID',
  },
  {
    prefix: 'cloud.google.com',
    separator: ',',
    labels: {},
    sa: { 'cloud.google.com/workload-identity-provider': WIF_PROVIDER },
    variable: 'GOOGLE_APPLICATION_CREDENTIALS',
  },
] as const;

const SPEC = {
  initContainers: [{ name: 'init' }, { name: 'mesh', restartPolicy: 'Always' }, { name: 'setup' }],
  containers: [{ name: 'app' }, { name: 'other' }],
};

for (const cloud of CLOUDS) {
  const include = `${cloud.prefix}/include-containers`;
  const skip = `${cloud.prefix}/skip-containers`;
  const run = (annotations: Record<string, string>) => {
    const p = pod({ labels: cloud.labels, annotations, spec: structuredClone(SPEC) });
    const result = mutatePod(providers(), { pod: p, namespace: 'team-a', serviceAccount: sa(cloud.sa) });
    assert.equal(result.allowed, true, result.allowed ? '' : result.denial.message);
    if (!result.allowed) return assert.fail();
    return { out: apply(p, result.patch), warnings: result.warnings };
  };
  const has = (c: Container) => Boolean(c.env?.some((e) => e.name === cloud.variable));
  /** The Pod's own containers (the webhook's own, pfnet's gcloud-setup or Azure's proxy, aside) that got the identity. */
  const served = (out: Pod) =>
    [...out.spec!.initContainers!, ...out.spec!.containers!]
      .filter((c) => [...SPEC.initContainers, ...SPEC.containers].some((s) => s.name === c.name))
      .filter(has)
      .map((c) => c.name);
  const mounted = (out: Pod, name: string) =>
    [...out.spec!.initContainers!, ...out.spec!.containers!].find((c) => c.name === name)!.volumeMounts?.length ?? 0;

  describe(include, () => {
    test('without it every container is served (the baseline the others narrow)', () => {
      assert.deepEqual(served(run({}).out), ['init', 'mesh', 'setup', 'app', 'other']);
    });

    test('only the named containers, init containers and native sidecars get the env and the mount', () => {
      const { out, warnings } = run({ [include]: ['app', ' mesh', 'init '].join(cloud.separator) });
      assert.deepEqual(served(out), ['init', 'mesh', 'app']);
      assert.equal(mounted(out, 'other'), 0);
      assert.equal(mounted(out, 'setup'), 0);
      assert.ok(mounted(out, 'app') > 0);
      assert.deepEqual(warnings, []);
    });

    test('skip wins for a name in both lists, with a warning naming it', () => {
      const { out, warnings } = run({
        [include]: ['app', 'other'].join(cloud.separator),
        [skip]: 'other',
      });
      assert.deepEqual(served(out), ['app']);
      assert.deepEqual(warnings, [`Pod annotation ${skip} wins: "other" left alone, though ${include} names them`]);
    });

    test('names that match no container are warned of, quoted; the named ones still get it', () => {
      const { out, warnings } = run({ [include]: ['app', 'ghost', 'x"y'].join(cloud.separator) });
      assert.deepEqual(served(out), ['app']);
      assert.deepEqual(warnings, [`Pod annotation ${include} names no container or init container "ghost", "x\\"y"`]);
    });

    test('a list of blanks names nobody and narrows nothing', () => {
      const { out, warnings } = run({ [include]: ` ${cloud.separator} ` });
      assert.equal(served(out).length, 5);
      assert.deepEqual(warnings, []);
    });
  });
}

describe("include-containers and the webhook's own containers", () => {
  type Case = {
    labels: Record<string, string>;
    annotations: Record<string, string>;
    sa: Record<string, string>;
    own: string[];
  };
  const cases: Case[] = [
    {
      labels: { 'azure.workload.identity/use': 'true' },
      annotations: {
        'azure.workload.identity/include-containers': 'app',
        'azure.workload.identity/inject-proxy-sidecar': 'true',
      },
      sa: { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT },
      own: ['azwi-proxy', 'azwi-proxy-init'],
    },
    {
      labels: {},
      annotations: { 'cloud.google.com/include-containers': 'app' },
      sa: {
        'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
        'cloud.google.com/service-account-email': GCP_EMAIL,
      },
      own: ['gcloud-setup'],
    },
  ];
  for (const c of cases)
    test(`${c.own.join(', ')} added as without it, and a reinvocation changes nothing`, () => {
      const p = pod({ labels: c.labels, annotations: c.annotations, spec: structuredClone(SPEC) });
      const first = mutatePod(providers(), { pod: p, namespace: 'team-a', serviceAccount: sa(c.sa) });
      assert.ok(first.allowed, first.allowed ? '' : first.denial.message);
      const out = apply(p, first.allowed ? first.patch : []);
      const names = out.spec!.initContainers!.map((i) => i.name);
      for (const own of c.own) assert.ok(names.includes(own), `${own} in ${names.join(', ')}`);
      assert.equal(out.spec!.containers!.find((x) => x.name === 'other')!.env, undefined);
      const again = mutatePod(providers(), { pod: out, namespace: 'team-a', serviceAccount: sa(c.sa) });
      assert.ok(again.allowed, again.allowed ? '' : again.denial.message);
      assert.deepEqual(again.allowed && again.patch, []);
    });
});
