// The Helm chart without a cluster: its serving certificate in each mode (self-managed,
// cert-manager, provided), and how it runs: replicas, disruption budget, probes and resources, the
// restricted security profile, the associations folder of EKS Pod Identity, the NetworkPolicy,
// client authentication, the NOTES' warning, the V8 flags and the ServiceMonitor. Least privilege
// (RBAC) is in chart-rbac.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { imageEnv, imageNodeOptions } from '../support/cgroup.ts';
import {
  CHART,
  FULLNAME,
  TEST_CA_PEM,
  REPO,
  VALUES_MATRIX,
  all,
  find,
  renderChart,
  renderNotes,
  webhookDeployment,
} from '../support/chart.ts';

const valuesYaml = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, any>;

describe('certificate modes', () => {
  test('self-managed: an empty Secret, and access to it and to the webhook configuration by name only', async () => {
    const { manifests } = await renderChart({});
    const secret = find(manifests, 'Secret', `${FULLNAME}-certs`)!;
    assert.equal(secret.type, 'Opaque');
    assert.equal(secret.data, undefined, 'the chart creates it empty; the webhook fills it');
    const role = find(manifests, 'Role', `${FULLNAME}-certs`)!;
    assert.deepEqual(role.rules, [
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [`${FULLNAME}-certs`],
        verbs: ['get', 'list', 'watch', 'update'],
      },
    ]);
    const clusterRole = find(manifests, 'ClusterRole', FULLNAME)!;
    assert.deepEqual(clusterRole.rules[1], {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['mutatingwebhookconfigurations'],
      resourceNames: [FULLNAME],
      verbs: ['get', 'list', 'watch', 'patch'],
    });
    const mwc = find(manifests, 'MutatingWebhookConfiguration')!;
    assert.ok(
      mwc.webhooks.every((w: any) => w.clientConfig.caBundle === undefined),
      'caBundle left to the webhook (helm upgrade keeps what it patched)',
    );
    assert.equal(webhookDeployment(manifests).spec.template.spec.volumes.length, 1, 'no certificate volume');
  });

  test('cert-manager: a CA, an Issuer for it, a serving Certificate and CA injection; no Secret access', async () => {
    const { manifests } = await renderChart({ certificates: { mode: 'certManager' } });
    const certs = all(manifests, 'Certificate');
    assert.deepEqual(
      certs.map((c) => c.metadata.name),
      [`${FULLNAME}-ca`, `${FULLNAME}-serving`],
    );
    const serving = certs[1];
    assert.equal(serving.spec.secretName, `${FULLNAME}-tls`);
    assert.ok(serving.spec.dnsNames.includes(`${FULLNAME}.wiw-system.svc`));
    assert.deepEqual(serving.spec.issuerRef, { name: `${FULLNAME}-ca`, kind: 'Issuer', group: 'cert-manager.io' });
    assert.equal(
      find(manifests, 'MutatingWebhookConfiguration')!.metadata.annotations!['cert-manager.io/inject-ca-from'],
      `wiw-system/${FULLNAME}-serving`,
    );
    assert.equal(find(manifests, 'Role'), undefined);
    assert.equal(find(manifests, 'ClusterRole')!.rules.length, 1);
    const pod = webhookDeployment(manifests).spec.template.spec;
    assert.deepEqual(pod.volumes[1], { name: 'tls', secret: { secretName: `${FULLNAME}-tls` } });

    const external = await renderChart({
      certificates: { mode: 'certManager', certManager: { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer' } } },
    });
    assert.deepEqual(all(external.manifests, 'Issuer'), []);
    assert.deepEqual(find(external.manifests, 'Certificate')!.spec.issuerRef, {
      name: 'corp-ca',
      kind: 'ClusterIssuer',
    });
  });

  test('provided: the given CA is the caBundle, the given Secret is mounted; missing either fails with the value to set', async () => {
    const { manifests } = await renderChart({
      certificates: { mode: 'provided', provided: { secretName: 'my-tls', caBundle: TEST_CA_PEM } },
    });
    for (const w of find(manifests, 'MutatingWebhookConfiguration')!.webhooks) {
      assert.equal(Buffer.from(w.clientConfig.caBundle, 'base64').toString(), TEST_CA_PEM);
    }
    assert.equal(webhookDeployment(manifests).spec.template.spec.volumes[1].secret.secretName, 'my-tls');
    await assert.rejects(
      renderChart({ certificates: { mode: 'provided', provided: { secretName: 'my-tls' } } }),
      /certificates\.provided\.caBundle/,
    );
    await assert.rejects(
      renderChart({ certificates: { mode: 'provided', provided: { caBundle: TEST_CA_PEM } } }),
      /certificates\.provided\.secretName is required/,
    );
  });
});

describe('availability, security and least privilege', () => {
  test('two replicas spread over zones and nodes, a PodDisruptionBudget, probes, requests and limits', async () => {
    const { manifests } = await renderChart({});
    const d = webhookDeployment(manifests);
    assert.equal(d.spec.replicas, 2);
    assert.equal(d.spec.strategy.rollingUpdate.maxUnavailable, 0);
    const pod = d.spec.template.spec;
    assert.deepEqual(
      pod.topologySpreadConstraints.map((t: any) => t.topologyKey),
      ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
    );
    for (const t of pod.topologySpreadConstraints)
      assert.deepEqual(t.labelSelector.matchLabels, d.spec.selector.matchLabels);
    const pdb = find(manifests, 'PodDisruptionBudget')!;
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector, d.spec.selector);
    const c = pod.containers[0];
    assert.equal(c.livenessProbe.httpGet.path, '/healthz');
    assert.equal(c.readinessProbe.httpGet.path, '/readyz');
    assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
    assert.ok(pod.terminationGracePeriodSeconds > valuesYaml.config.drainSeconds);
    // One replica: no PDB that would block every node drain.
    assert.equal(find((await renderChart({ replicaCount: 1 })).manifests, 'PodDisruptionBudget'), undefined);
  });

  test('every container runs under the restricted profile', async () => {
    const { manifests } = await renderChart({ tokenRequestor: { enabled: true, namespaces: ['apps'] } });
    const deployments = all(manifests, 'Deployment');
    assert.equal(deployments.length, 2);
    for (const d of deployments) {
      const pod = d.spec.template.spec;
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
      for (const c of pod.containers) {
        assert.equal(c.securityContext.allowPrivilegeEscalation, false);
        assert.equal(c.securityContext.readOnlyRootFilesystem, true);
        assert.deepEqual(c.securityContext.capabilities, { drop: ['ALL'] });
      }
    }
  });

  test('EKS Pod Identity: the association ConfigMap is mounted as a folder, so its updates reach the webhook', async () => {
    const pod = webhookDeployment((await renderChart({ awsPodIdentity: { configMap: 'eks-pod-identity' } })).manifests)
      .spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'pod-identity').configMap, {
      name: 'eks-pod-identity',
      items: [{ key: 'associations.json', path: 'associations.json' }],
    });
    const mount = pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'pod-identity');
    assert.deepEqual(mount, {
      name: 'pod-identity',
      mountPath: '/etc/workload-identity-webhook/pod-identity',
      readOnly: true,
    });
    const off = webhookDeployment((await renderChart({})).manifests).spec.template.spec;
    assert.ok(!off.volumes.some((v: { name: string }) => v.name === 'pod-identity'));
  });

  test('the NetworkPolicy is on by default and opens only the webhook port (from anywhere) and metrics (from Pods)', async () => {
    const np = find((await renderChart({})).manifests, 'NetworkPolicy')!;
    assert.deepEqual(np.spec.policyTypes, ['Ingress']);
    assert.deepEqual(np.spec.ingress, [
      { ports: [{ port: 'https', protocol: 'TCP' }] },
      { ports: [{ port: 'metrics', protocol: 'TCP' }], from: [{ namespaceSelector: {} }] },
    ]);
    assert.equal(
      find((await renderChart({ networkPolicy: { enabled: false } })).manifests, 'NetworkPolicy'),
      undefined,
    );
  });

  test('client authentication: the CA becomes a ConfigMap mounted for --client-ca-file', async () => {
    const { manifests } = await renderChart({ clientAuth: { caBundle: TEST_CA_PEM } });
    const cm = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-client-ca'))!;
    assert.equal(cm.data!['ca.crt'], TEST_CA_PEM);
    const pod = webhookDeployment(manifests).spec.template.spec;
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'client-ca').configMap, {
      name: cm.metadata.name,
    });
  });

  test('NOTES warn that /mutate is open to any caller unless client auth or a NetworkPolicy source restriction is set', async () => {
    const warning = /WARNING: \/mutate answers any caller[\s\S]*docs\/hardening\.md/;
    const webhookFrom = [{ ipBlock: { cidr: '10.0.0.0/28' } }];
    assert.match(await renderNotes({}), warning, 'defaults');
    assert.match(await renderNotes({ networkPolicy: { enabled: false, webhookFrom } }), warning, 'NetworkPolicy off');
    assert.doesNotMatch(await renderNotes({ clientAuth: { caBundle: TEST_CA_PEM } }), warning, 'client auth');
    assert.doesNotMatch(await renderNotes({ networkPolicy: { webhookFrom } }), warning, 'a source restriction');
    // The rest of the notes are still there.
    assert.match(
      await renderNotes({ networkPolicy: { webhookFrom } }),
      /is installed as wiw-workload-identity-webhook/,
    );
  });

  test("the V8 flags are the image's (NODE_OPTIONS in the Dockerfile) unless nodeOptions replaces them, and its allocator settings stay", async () => {
    const env = async (values: object) =>
      webhookDeployment((await renderChart(values)).manifests).spec.template.spec.containers[0].env.find(
        (e: { name: string }) => e.name === 'NODE_OPTIONS',
      );
    // An empty NODE_OPTIONS in the Pod would erase the image's: none is rendered by default.
    assert.equal(await env({}), undefined);
    // Nor are the image's allocator settings (MALLOC_*: issue 30) replaced: the Pod keeps them.
    const rendered = webhookDeployment((await renderChart({})).manifests).spec.template.spec.containers[0].env ?? [];
    assert.deepEqual(
      rendered.filter((e: { name: string }) => e.name.startsWith('MALLOC_') || e.name === 'GLIBC_TUNABLES'),
      [],
    );
    assert.ok(Object.keys(imageEnv()).includes('MALLOC_ARENA_MAX'), 'the Dockerfile sets the allocator');
    // The one place of the flags is the Dockerfile; docs/hardening.md states its heap share.
    const percent = /--max-old-space-size-percentage=(\d+)/.exec(imageNodeOptions())?.[1];
    assert.ok(percent, 'the Dockerfile sizes the heap');
    assert.match(
      readFileSync(join(REPO, 'docs/hardening.md'), 'utf8'),
      new RegExp(`^\\| heap \\| .* \\| ${percent} % of the container's memory \\|`, 'm'),
    );
    assert.deepEqual(await env({ nodeOptions: '--max-old-space-size-percentage=60 --max-semi-space-size=16' }), {
      name: 'NODE_OPTIONS',
      value: '--max-old-space-size-percentage=60 --max-semi-space-size=16',
    });
  });

  test('optional ServiceMonitor renders only when enabled', async () => {
    const off = (await renderChart({})).manifests;
    assert.equal(find(off, 'ServiceMonitor'), undefined);
    const on = (await renderChart(VALUES_MATRIX.find((m) => m.name.startsWith('everything optional on'))!.values))
      .manifests;
    const sm = find(on, 'ServiceMonitor')!;
    assert.equal(sm.metadata.labels!.release, 'prometheus');
    assert.equal(sm.spec.endpoints[0].port, 'metrics');
    const np = find(on, 'NetworkPolicy')!;
    assert.deepEqual(np.spec.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(np.spec.ingress[0].ports, [{ port: 'https', protocol: 'TCP' }]);
  });
});
