// The Helm chart without a cluster: extra arguments, environment and volumes for the webhook
// container, the token requestor's disruption budget, NetworkPolicy and spread, Chart.yaml's icon,
// and `helm test`: its Pod, its NOTES, and its check, run here against injected and missing
// identities.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.ts';
import {
  CHART,
  FULLNAME,
  REPO,
  all,
  containerEnv,
  find,
  renderChart,
  renderNotes,
  webhookDeployment,
} from '../support/chart.ts';

describe("extra containers settings, the token requestor's availability, the icon and helm test", () => {
  test('extraArgs, extraEnv, extraVolumes and extraVolumeMounts reach the webhook container: --record-key-file can be set', async () => {
    const mount = '/etc/workload-identity-webhook/record-key';
    const { manifests } = await renderChart({
      extraArgs: [`--record-key-file=${mount}/key`, '--log-level=debug'],
      extraEnv: [{ name: 'TZ', value: 'UTC' }],
      extraVolumes: [{ name: 'record-key', secret: { secretName: 'wiw-record-key' } }],
      extraVolumeMounts: [{ name: 'record-key', mountPath: mount, readOnly: true }],
    });
    const pod = webhookDeployment(manifests).spec.template.spec;
    const c = pod.containers[0];
    assert.deepEqual(c.args, ['serve', `--record-key-file=${mount}/key`, '--log-level=debug']);
    assert.equal(containerEnv(webhookDeployment(manifests)).TZ, 'UTC');
    assert.ok(
      c.env.some((e: { name: string }) => e.name === 'WIW_LOG_LEVEL'),
      "config's variables stay",
    );
    assert.deepEqual(pod.volumes.at(-1), { name: 'record-key', secret: { secretName: 'wiw-record-key' } });
    assert.deepEqual(c.volumeMounts.at(-1), { name: 'record-key', mountPath: mount, readOnly: true });
    // The flags parse as serve's own, and win over the environment config sets.
    const { parseArgs } = await import('../../src/cli-args.ts');
    const parsed = parseArgs(c.args);
    const config = loadConfig(parsed.flags, containerEnv(webhookDeployment(manifests)));
    assert.equal(config.recordKeyFile, `${mount}/key`);
    assert.equal(config.logLevel, 'debug');
    // Without them, the container is as before.
    const plain = webhookDeployment((await renderChart({})).manifests).spec.template.spec;
    assert.deepEqual(plain.containers[0].args, ['serve']);
    assert.ok(!plain.volumes.some((v: { name: string }) => v.name === 'record-key'));
  });

  test('the token requestor gets a PodDisruptionBudget, a NetworkPolicy that opens only metrics, and topology spread', async () => {
    const name = `${FULLNAME}-token-requestor`;
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    const d = find(manifests, 'Deployment', name)!;
    const selector = d.spec.selector.matchLabels;
    const pdb = find(manifests, 'PodDisruptionBudget', name)!;
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, selector);
    const np = find(manifests, 'NetworkPolicy', name)!;
    assert.deepEqual(np.spec.podSelector.matchLabels, selector);
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    assert.deepEqual(np.spec.ingress, [
      { ports: [{ port: 'metrics', protocol: 'TCP' }], from: [{ namespaceSelector: {} }] },
    ]);
    const spread = d.spec.template.spec.topologySpreadConstraints;
    assert.deepEqual(
      spread.map((t: any) => t.topologyKey),
      ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    );
    for (const t of spread) assert.deepEqual(t.labelSelector.matchLabels, selector);
    // The webhook's PodDisruptionBudget and NetworkPolicy still select only the webhook's Pods.
    assert.notDeepEqual(find(manifests, 'PodDisruptionBudget', FULLNAME)!.spec.selector.matchLabels, selector);

    const custom = (
      await renderChart({
        tokenRequestor: {
          enabled: true,
          namespaces: ['apps'],
          replicaCount: 1,
          networkPolicy: { metricsFrom: [], egress: [{ ports: [{ port: 443 }] }] },
          topologySpreadConstraints: [
            { maxSkew: 2, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
          ],
        },
      })
    ).manifests;
    assert.equal(find(custom, 'PodDisruptionBudget', name), undefined, 'one replica: no PDB to block drains');
    const closed = find(custom, 'NetworkPolicy', name)!;
    assert.deepEqual(closed.spec.policyTypes, ['Ingress', 'Egress']);
    assert.equal(closed.spec.ingress, null, 'no metricsFrom: every ingress closed');
    assert.deepEqual(closed.spec.egress, [{ ports: [{ port: 443 }] }]);
    const one = find(custom, 'Deployment', name)!.spec.template.spec.topologySpreadConstraints;
    assert.deepEqual(one, [
      {
        maxSkew: 2,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'DoNotSchedule',
        labelSelector: { matchLabels: selector },
      },
    ]);
    const off = (
      await renderChart({
        tokenRequestor: {
          enabled: true,
          namespaces: ['apps'],
          networkPolicy: { enabled: false },
          podDisruptionBudget: { enabled: false },
        },
      })
    ).manifests;
    assert.equal(find(off, 'NetworkPolicy', name), undefined);
    assert.equal(find(off, 'PodDisruptionBudget', name), undefined);
  });

  test("Chart.yaml's icon is the repository's raw URL of an SVG that exists in the repository", () => {
    const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { icon: string; home: string };
    const repo = /^https:\/\/github\.com\/([^/]+\/[^/]+)$/.exec(chart.home)![1];
    const m = new RegExp(`^https://raw\\.githubusercontent\\.com/${repo}/main/(.+\\.svg)$`).exec(chart.icon);
    assert.ok(m, `icon ${chart.icon} is a raw URL of ${repo}`);
    const svg = readFileSync(join(REPO, m[1]), 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 128 128"/);
    assert.ok(svg.length < 4096, 'a small icon');
  });

  test('helm test: a Pod with no API access, of a ServiceAccount of its own that asks for an AWS role, in tests.namespace', async () => {
    const rendered = await renderChart(
      { webhook: { scope: 'labelled' }, tests: { namespace: 'apps' } },
      { tests: true },
    );
    const tests = rendered.manifests.filter((m) => m.metadata.annotations?.['helm.sh/hook'] === 'test');
    assert.deepEqual(
      tests.map((m) => m.kind),
      ['ServiceAccount', 'Pod'],
    );
    const [sa, pod] = tests;
    for (const m of tests) assert.equal(m.metadata.namespace, 'apps');
    assert.equal(sa.automountServiceAccountToken, false);
    assert.match(sa.metadata.annotations!['eks.amazonaws.com/role-arn'], /^arn:aws:iam::111122223333:role\//);
    // No RBAC binds it: the test reads only what the webhook injected.
    for (const b of [...all(rendered.manifests, 'RoleBinding'), ...all(rendered.manifests, 'ClusterRoleBinding')])
      assert.ok(!b.subjects.some((s: { name: string }) => s.name === sa.metadata.name));
    assert.equal(pod.spec.serviceAccountName, sa.metadata.name);
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.equal(pod.spec.restartPolicy, 'Never');
    assert.equal(pod.metadata.labels!['workload-identity-webhook.io/inject'], 'true', 'scope labelled sends it');
    const c = pod.spec.containers[0];
    assert.equal(c.image, webhookDeployment(rendered.manifests).spec.template.spec.containers[0].image);
    assert.deepEqual(c.securityContext.capabilities, { drop: ['ALL'] });
    assert.deepEqual(c.args, [
      sa.metadata.annotations!['eks.amazonaws.com/role-arn'],
      'sts.amazonaws.com',
      `system:serviceaccount:apps:${sa.metadata.name}`,
    ]);
    // Default: the namespace `default`; an install (helm template --skip-tests) has no test objects.
    const defaults = await renderChart({}, { tests: true });
    assert.ok(defaults.manifests.some((m) => m.kind === 'Pod' && m.metadata.namespace === 'default'));
    assert.ok(!(await renderChart({})).manifests.some((m) => m.kind === 'Pod'));
  });

  test('NOTES name the helm test command and the namespace its Pod runs in', async () => {
    assert.match(await renderNotes({}), /helm test wiw -n wiw-system +\(a Pod in namespace default /);
    assert.match(await renderNotes({ tests: { namespace: 'apps' } }), /\(a Pod in namespace apps /);
  });

  test("the test Pod's check passes only with the role, audience and subject injected", async () => {
    const { manifests } = await renderChart({}, { tests: true });
    const c = manifests.find((m) => m.kind === 'Pod')!.spec.containers[0];
    const [role, audience, subject] = c.args as string[];
    const dir = await mkdtemp(join(tmpdir(), 'wiw-helm-test-'));
    const jwt = (claims: object) =>
      ['{"alg":"RS256"}', JSON.stringify(claims), 'sig'].map((p) => Buffer.from(p).toString('base64url')).join('.');
    const run = async (env: Record<string, string>, token?: object) => {
      if (token) await writeFile(join(dir, 'token'), jwt(token));
      const r = await promisify(execFile)(process.execPath, ['-e', c.command[2], ...c.args], {
        env: { PATH: process.env.PATH, ...env },
      }).then(
        (out) => ({ code: 0, stdout: out.stdout }),
        (err) => ({ code: err.code as number, stdout: err.stdout as string }),
      );
      return r;
    };
    try {
      const injected = { AWS_ROLE_ARN: role, AWS_WEB_IDENTITY_TOKEN_FILE: join(dir, 'token') };
      const good = await run(injected, { aud: [audience], sub: subject });
      assert.equal(good.code, 0, good.stdout);
      assert.match(good.stdout, /^ok: /);
      const none = await run({});
      assert.equal(none.code, 1);
      assert.match(none.stdout, /FAIL AWS_ROLE_ARN is undefined/);
      assert.match(none.stdout, /FAIL AWS_WEB_IDENTITY_TOKEN_FILE is not set/);
      const other = await run(injected, { aud: ['sts.example'], sub: 'system:serviceaccount:x:y' });
      assert.equal(other.code, 1);
      assert.match(other.stdout, /audience is \["sts\.example"\]/);
      assert.match(other.stdout, /subject is "system:serviceaccount:x:y"/);
      assert.doesNotMatch(other.stdout + good.stdout, /eyJ/, 'the token is never printed');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
