// The annotations the webhook writes onto a Pod (its credential files, projected by downward-API
// volumes, and its injection record) cannot change after admission (issue 28, finding 7): the
// chart's ValidatingAdmissionPolicy, installed as helm renders it on a real kube-apiserver,
// refuses a tenant's PATCH of each one (modified, removed, added where absent), on the Pod and on
// its status subresource, while the kubelet's status updates and ordinary label and annotation
// changes pass. Its list of annotations is the code's: every key the webhook writes, for every
// cloud and mode, and nothing else.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { PROVIDER_NAMES } from '../../src/clouds/registry.ts';
import { CREDENTIALS_ANNOTATION_PREFIX } from '../../src/clouds/gcp/providers.ts';
import { apply, providers, sa } from '../support/builders.ts';
import {
  createNamespace,
  createServiceAccount,
  startControlPlane,
  type ControlPlane,
} from '../harness/control-plane.ts';
import { renderChart, type Manifest } from '../support/chart.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import { BILLING_PROVIDER, CLIENT, GCP_EMAIL, ROLE_ARN, roleArn, TENANT, WIF_PROVIDER } from '../support/identities.ts';

// --- the policy's list against what the code writes -----------------------------------------

const SRC = resolve(import.meta.dirname, '../../src');

interface Owned {
  keys: string[];
  prefixes: string[];
}

/**
 * The policy and binding the chart renders with its defaults (none at all is a finding), for
 * the suite's version or a control plane's.
 */
async function chartPolicies(kubeVersion?: string): Promise<Manifest[]> {
  const { manifests } = await renderChart({}, { kubeVersion });
  return manifests.filter(
    (m) => m.kind.startsWith('ValidatingAdmissionPolicy') && /pod-annotations/.test(m.metadata.name),
  );
}

/** The owned keys and prefixes, read off the policy's `keys` and `prefixes` variables. */
function ownedOf(manifests: Manifest[]): Owned {
  const policy = manifests.find((m) => m.kind === 'ValidatingAdmissionPolicy');
  const variable = (name: string) =>
    JSON.parse(
      (policy?.spec.variables as { name: string; expression: string }[] | undefined)?.find((v) => v.name === name)
        ?.expression ?? '[]',
    ) as string[];
  return { keys: variable('keys').sort(), prefixes: variable('prefixes') };
}

const ownedBy = (owned: Owned, key: string) =>
  owned.keys.includes(key) || owned.prefixes.some((p) => key.startsWith(p));

const podIdentityDir = mkdtempSync(join(tmpdir(), 'wiw-vap-pod-identity-'));
const podIdentityFile = join(podIdentityDir, 'associations.json');
writeFileSync(
  podIdentityFile,
  JSON.stringify({ identities: [{ namespace: 'team-a', serviceAccount: 'pod-identity' }] }),
);
after(() => rmSync(podIdentityDir, { recursive: true, force: true }));

/**
 * Every cloud, dialect and mode the webhook injects, each a ServiceAccount (and the flags and Pod
 * labels it needs): what these Pods get is what the webhook writes.
 */
const SCENARIOS: {
  name: string;
  cloud: string;
  annotations: Record<string, string>;
  flags?: Record<string, string>;
  labels?: Record<string, string>;
  podAnnotations?: Record<string, string>;
}[] = [
  { name: 'AWS role-arn', cloud: 'aws', annotations: { 'eks.amazonaws.com/role-arn': ROLE_ARN } },
  {
    name: 'AWS role-arns (shared config file)',
    cloud: 'aws',
    annotations: { 'eks.amazonaws.com/role-arns': `reports=${ROLE_ARN}\nbilling=${roleArn('billing')}` },
  },
  {
    name: 'AWS EKS Pod Identity',
    cloud: 'aws',
    annotations: {},
    flags: { 'aws-container-credentials-config': podIdentityFile },
  },
  {
    name: 'Azure, with the proxy sidecar',
    cloud: 'azure',
    annotations: { 'azure.workload.identity/client-id': CLIENT, 'azure.workload.identity/tenant-id': TENANT },
    labels: { 'azure.workload.identity/use': 'true' },
    podAnnotations: { 'azure.workload.identity/inject-proxy-sidecar': 'true' },
  },
  {
    name: 'GCP Flux/GKE dialect, with named providers',
    cloud: 'gcp',
    annotations: {
      'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER,
      'iam.gke.io/gcp-service-account': GCP_EMAIL,
      'cloud.google.com/workload-identity-providers': `billing=${BILLING_PROVIDER}`,
    },
  },
  {
    name: 'GCP Flux dialect, gcloud mode',
    cloud: 'gcp',
    annotations: {
      'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/injection-mode': 'gcloud',
    },
  },
  {
    name: 'GCP pfnet dialect, gcloud mode',
    cloud: 'gcp',
    annotations: {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': GCP_EMAIL,
    },
  },
  {
    name: 'GCP pfnet dialect, direct mode with gcloud variables',
    cloud: 'gcp',
    annotations: {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/injection-mode': 'direct',
    },
    flags: { 'gcp-direct-gcloud': 'true' },
  },
];

/** The annotations a scenario's Pod gets (added or changed) and the ones its files project. */
function written(scenario: (typeof SCENARIOS)[number]): { written: string[]; projected: string[] } {
  const original: Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'team-a', labels: scenario.labels, annotations: { ...scenario.podAnnotations } },
    spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'busybox' }] },
  };
  const name = scenario.flags?.['aws-container-credentials-config'] ? 'pod-identity' : 'app';
  original.spec!.serviceAccountName = name;
  const result = mutatePod(providers(scenario.flags), {
    pod: original,
    namespace: 'team-a',
    serviceAccount: sa(scenario.annotations, name),
  });
  assert.ok(result.allowed, `${scenario.name}: ${result.allowed ? '' : result.denial.message}`);
  const out = apply(original, result.patch);
  const before = original.metadata!.annotations!;
  const annotations = out.metadata?.annotations ?? {};
  const fieldPaths = JSON.stringify(out.spec).matchAll(/"fieldPath":"metadata\.annotations\['([^']+)'\]"/g);
  return {
    written: Object.keys(annotations).filter((k) => before[k] !== annotations[k]),
    projected: [...fieldPaths].map((m) => m[1]),
  };
}

/** The files of src/ (recursively) under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/**
 * Every annotation key the source projects into a file or variable (a downward-API fieldPath
 * `metadata.annotations['${NAME}']`), read off the code itself, whether a scenario reaches it or
 * not: NAME is an exported constant (a key), or a local built from one (`${PREFIX}${name}`: a prefix).
 */
async function projectionSites(): Promise<{ site: string; key?: string; prefix?: string }[]> {
  const files = sources('.');
  const exported = new Map<string, unknown>();
  // The constants of the layers that write Pods (importing the rest of src/ would start the CLI).
  for (const file of [...sources('clouds'), ...sources('mutate')])
    for (const [k, v] of Object.entries(await import(join(SRC, file)))) exported.set(k, v);
  const sites: { site: string; key?: string; prefix?: string }[] = [];
  for (const file of files) {
    const text = readFileSync(join(SRC, file), 'utf8');
    for (const m of text.matchAll(/metadata\.annotations\['\$\{(\w+)\}'\]/g)) {
      const site = `src/${file}: ${m[1]}`;
      if (typeof exported.get(m[1]) === 'string') sites.push({ site, key: exported.get(m[1]) as string });
      else {
        const built = new RegExp(`const ${m[1]} = \`\\$\\{(\\w+)\\}`).exec(text)?.[1];
        const prefix = built === undefined ? undefined : exported.get(built);
        assert.equal(typeof prefix, 'string', `${site}: name the annotation with an exported constant`);
        sites.push({ site, prefix: prefix as string });
      }
    }
  }
  return sites;
}

describe('the chart value', () => {
  // Below 1.30, where the policy's API is not v1, helm refuses the whole chart (chart-rbac.test.ts).
  test('on by default; off renders nothing', async () => {
    assert.equal((await chartPolicies()).length, 2, 'a policy and its binding');
    const off = await renderChart({ podAnnotationPolicy: { enabled: false } });
    assert.deepEqual(
      off.manifests.filter((m) => m.kind.startsWith('ValidatingAdmissionPolicy')),
      [],
    );
  });
});

describe("the policy's annotations are the ones the webhook writes", () => {
  test('every cloud has a scenario, and each scenario is injected', () => {
    assert.deepEqual([...new Set(SCENARIOS.map((s) => s.cloud))].sort(), [...PROVIDER_NAMES].sort());
    for (const s of SCENARIOS) assert.ok(written(s).written.includes('workload-identity-webhook.io/injected'), s.name);
  });

  test('every annotation written or projected is in the policy; every key and prefix of the policy is written', async () => {
    const owned = ownedOf(await chartPolicies());
    const all = new Set<string>();
    for (const s of SCENARIOS) {
      const { written: keys, projected } = written(s);
      for (const key of [...keys, ...projected]) {
        all.add(key);
        assert.ok(ownedBy(owned, key), `${s.name}: the webhook writes ${key}, which the policy does not keep`);
      }
    }
    for (const key of owned.keys) assert.ok(all.has(key), `the policy keeps ${key}, which the webhook never writes`);
    for (const prefix of owned.prefixes)
      assert.ok(
        [...all].some((k) => k.startsWith(prefix) && !owned.keys.includes(k)),
        `the policy keeps the prefix ${prefix}, which no written key has`,
      );
  });

  test('every annotation the source projects into a file is in the policy, reached by a scenario or not', async () => {
    const owned = ownedOf(await chartPolicies());
    const sites = await projectionSites();
    assert.ok(sites.length >= 3, `${sites.length} projection sites found`);
    for (const { site, key, prefix } of sites) {
      if (key !== undefined) assert.ok(owned.keys.includes(key), `${site}: ${key} is projected, and not in the policy`);
      else
        assert.ok(
          owned.prefixes.includes(prefix!),
          `${site}: ${prefix}<name> is projected, and not a prefix of the policy`,
        );
    }
  });
});

// --- kube-apiserver enforces it --------------------------------------------------------------

interface Identity {
  name: string;
  cert: string;
  key: string;
}
interface Answer {
  status: number;
  body: any;
}

/** One request to kube-apiserver as `who` (a tenant, a node), with the patch type it names. */
function kube(
  cp: ControlPlane,
  who: Identity,
  method: string,
  path: string,
  body?: unknown,
  type = 'application/json',
) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise<Answer>((resolve, reject) => {
    const req = request(
      new URL(path, cp.server),
      {
        method,
        ca: cp.caPem,
        cert: who.cert,
        key: who.key,
        agent: false,
        timeout: 15_000,
        headers: { accept: 'application/json', ...(payload && { 'content-type': type }) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer`)));
    req.on('error', reject);
    req.end(payload);
  });
}

const MERGE = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const STRATEGIC = 'application/strategic-merge-patch+json';
const NS = 'tenant-a';
/** A namespace the webhook does not cover: the Pod with the most annotations lives there. */
const NS_UNCOVERED = 'tenant-b';
const pointer = (key: string) => `/metadata/annotations/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;

describe('kube-apiserver refuses any change to them on Pod UPDATE', () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let tenant: Identity;
  let kubelet: Identity;
  let owned: Owned;
  /** The tenant's Pods as admitted: name -> annotations. */
  const admitted = new Map<string, Record<string, string>>();
  const podPath = (name: string, ns = NS, sub = '') => `/api/v1/namespaces/${ns}/pods/${name}${sub}`;

  before(async () => {
    cp = await startControlPlane({ name: 'pod-annotations-policy' });
    const policies = await chartPolicies(cp.kubeVersion);
    owned = ownedOf(policies);
    for (const m of policies) {
      const path = `/apis/admissionregistration.k8s.io/v1/${m.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings'}`;
      const res = await cp.request('POST', path, m);
      assert.equal(res.status, 201, `${m.kind} ${m.metadata.name}: ${res.body}`);
    }
    await createNamespace(cp, NS);
    await createNamespace(cp, NS_UNCOVERED);
    await createServiceAccount(cp, NS, 'profiles', {
      'eks.amazonaws.com/role-arns': `reports=${ROLE_ARN}\nbilling=${roleArn('billing')}`,
    });
    await createServiceAccount(cp, NS, 'gcp', {
      'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER,
      'iam.gke.io/gcp-service-account': GCP_EMAIL,
      'cloud.google.com/workload-identity-providers': `billing=${BILLING_PROVIDER}`,
    });
    await createServiceAccount(cp, NS, 'pfnet', {
      'cloud.google.com/workload-identity-provider': WIF_PROVIDER,
      'cloud.google.com/service-account-email': GCP_EMAIL,
    });
    await createServiceAccount(cp, NS, 'none');

    // The tenant: a real RBAC user who may write Pods (and their status) in its namespaces only.
    tenant = { name: 'alice', ...(await cp.issueClientCert('alice')) };
    const podRights = {
      apiGroups: [''],
      resources: ['pods', 'pods/status'],
      verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'],
    };
    for (const ns of [NS, NS_UNCOVERED]) {
      await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
        metadata: { name: 'pod-writer' },
        rules: [podRights],
      });
      await cp.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
        metadata: { name: 'alice' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-writer' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
      });
    }
    // A kubelet's identity, with the kubelet's own role.
    kubelet = { name: 'system:node:node-1', ...(await cp.issueClientCert('system:node:node-1', ['system:nodes'])) };
    await cp.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'node-1' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'system:node:node-1' }],
    });

    wh = await startWebhook(cp);
    await registerWebhook(
      cp,
      wh,
      'wiw-pod-annotations',
      [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NS } } }],
      NS,
    );
    for (const sa of ['profiles', 'gcp', 'pfnet', 'none']) {
      const res = await kube(cp, tenant, 'POST', `/api/v1/namespaces/${NS}/pods`, {
        metadata: { name: sa, labels: { app: sa } },
        spec: { serviceAccountName: sa, nodeName: 'node-1', containers: [{ name: 'app', image: 'busybox' }] },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      admitted.set(sa, res.body.metadata.annotations ?? {});
    }
    // Bindings reach the admission chain asynchronously: wait until the policy judges an update.
    if (policies.length > 0)
      await until(
        'the policy to be in force',
        async () => {
          const res = await kube(
            cp,
            tenant,
            'PATCH',
            `${podPath('none')}?dryRun=All`,
            {
              metadata: { annotations: { 'workload-identity-webhook.io/injected': 'x' } },
            },
            MERGE,
          );
          return res.status !== 200 || undefined;
        },
        30_000,
      );
  });

  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  /**
   * Each way a tenant could touch what the webhook wrote (the tenant's Pods had no annotations):
   * modify and remove what this Pod has, add what the webhook wrote onto another. A named GCP
   * provider's key is judged only where a file of the Pod is projected from it.
   */
  function attempts(name: string): { what: string; body: unknown; type: string }[] {
    const present = admitted.get(name)!;
    const written = [...new Set([...admitted.values()].flatMap((a) => Object.keys(a)))].sort();
    return written.flatMap((key) =>
      key in present
        ? [
            { what: `modify ${key}`, body: { metadata: { annotations: { [key]: `${present[key]} ` } } }, type: MERGE },
            { what: `remove ${key}`, body: [{ op: 'remove', path: pointer(key) }], type: JSON_PATCH },
          ]
        : key.startsWith(CREDENTIALS_ANNOTATION_PREFIX)
          ? []
          : [{ what: `add ${key}`, body: { metadata: { annotations: { [key]: '{}' } } }, type: MERGE }],
    );
  }

  test('the webhook wrote each owned key onto some Pod (so each is modified and removed below)', () => {
    const present = new Set([...admitted.values()].flatMap((a) => Object.keys(a)));
    for (const key of owned.keys) assert.ok(present.has(key), `no Pod carries ${key}`);
    for (const prefix of owned.prefixes) assert.ok(present.has(`${prefix}billing`), `no Pod carries ${prefix}billing`);
    assert.ok(owned.keys.length > 0, 'the chart renders the policy');
  });

  test("a tenant's PATCH of each owned annotation is refused, on the Pod and on its status", async () => {
    const passed: string[] = [];
    for (const name of admitted.keys()) {
      for (const { what, body, type } of attempts(name)) {
        for (const sub of ['', '/status']) {
          const res = await kube(cp, tenant, 'PATCH', podPath(name, NS, sub), body, type);
          if (res.status !== 403) passed.push(`${name}${sub}: ${what}: HTTP ${res.status}`);
          else
            assert.match(
              res.body.message,
              /pod-annotations' .*denied request: the annotations the workload identity webhook writes cannot change after the Pod is admitted \(.+\); delete the Pod/,
            );
        }
      }
    }
    assert.deepEqual(passed, [], 'every change is refused');
    for (const [name, annotations] of admitted) {
      const res = await kube(cp, tenant, 'GET', podPath(name));
      assert.deepEqual(res.body.metadata.annotations ?? {}, annotations, `${name}: the annotations are as admitted`);
    }
  });

  test('a key under an owned prefix that no file of the Pod projects may be added: it changes nothing the Pod reads', async () => {
    const key = `${CREDENTIALS_ANNOTATION_PREFIX}unread`;
    const res = await kube(
      cp,
      tenant,
      'PATCH',
      `${podPath('gcp')}?dryRun=All`,
      { metadata: { annotations: { [key]: '{}' } } },
      MERGE,
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
  });

  test("the tenant's server-side apply of its manifest again (a label changed) passes and keeps them", async () => {
    const manifest = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'applied', labels: { app: 'a' } },
      spec: { serviceAccountName: 'profiles', containers: [{ name: 'app', image: 'busybox' }] },
    };
    const apply = () =>
      kube(cp, tenant, 'PATCH', `${podPath('applied')}?fieldManager=alice`, manifest, 'application/apply-patch+yaml');
    const first = await apply();
    assert.equal(first.status, 201, JSON.stringify(first.body));
    manifest.metadata.labels.app = 'b';
    const second = await apply();
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.equal(second.body.metadata.labels.app, 'b');
    assert.deepEqual(second.body.metadata.annotations, first.body.metadata.annotations);
  });

  test("at CREATE the webhook writes its annotations over the author's: a forged file or record does not survive", async () => {
    const forged = {
      'workload-identity-webhook.io/aws-config-file': '[default]\ncredential_process = /bin/sh -c id\n',
      'workload-identity-webhook.io/injected': '{"v":2,"sa":"profiles","mac":"forged"}',
    };
    const res = await kube(cp, tenant, 'POST', `/api/v1/namespaces/${NS}/pods`, {
      metadata: { name: 'forged', annotations: forged },
      spec: { serviceAccountName: 'profiles', containers: [{ name: 'app', image: 'busybox' }] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.metadata.annotations,
      admitted.get('profiles'),
      'exactly what the webhook writes for this ServiceAccount',
    );
  });

  test('a PUT of the whole Pod with a changed credential file is refused too', async () => {
    const pod = (await kube(cp, tenant, 'GET', podPath('profiles'))).body;
    pod.metadata.annotations['workload-identity-webhook.io/aws-config-file'] +=
      '\n[profile evil]\ncredential_process = /bin/sh -c id\n';
    const res = await kube(cp, tenant, 'PUT', podPath('profiles'), pod);
    assert.equal(res.status, 403, JSON.stringify(res.body));
    assert.match(res.body.message, /\(workload-identity-webhook\.io\/aws-config-file\)/);
  });

  test("the kubelet's status updates and ordinary label and annotation changes pass", async () => {
    for (const name of admitted.keys()) {
      const status = await kube(
        cp,
        kubelet,
        'PATCH',
        podPath(name, NS, '/status'),
        {
          status: {
            phase: 'Running',
            podIP: '10.0.0.7',
            conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z' }],
          },
        },
        STRATEGIC,
      );
      assert.equal(status.status, 200, `${name}: kubelet status: ${JSON.stringify(status.body)}`);
      assert.equal(status.body.status.podIP, '10.0.0.7');
      const note = await kube(
        cp,
        tenant,
        'PATCH',
        podPath(name),
        {
          metadata: { labels: { tier: 'web' }, annotations: { 'example.com/note': 'deployed by alice' } },
        },
        MERGE,
      );
      assert.equal(note.status, 200, `${name}: label and annotation: ${JSON.stringify(note.body)}`);
      const removed = await kube(
        cp,
        tenant,
        'PATCH',
        podPath(name),
        {
          metadata: { labels: { tier: null }, annotations: { 'example.com/note': null } },
        },
        MERGE,
      );
      assert.equal(removed.status, 200, `${name}: removing them: ${JSON.stringify(removed.body)}`);
      // Setting an owned annotation to the value it has changes nothing, and passes.
      const same = Object.fromEntries(Object.entries(admitted.get(name)!).filter(([k]) => ownedBy(owned, k)));
      const unchanged = await kube(cp, tenant, 'PATCH', podPath(name), { metadata: { annotations: same } }, MERGE);
      assert.equal(unchanged.status, 200, `${name}: the same values: ${JSON.stringify(unchanged.body)}`);
    }
  });

  test('a Pod with as many annotations as the API server allows is still updated, and still guarded', async (t) => {
    // About 40,000 annotations, near the API server's 256 KiB: the policy's cost stays in its budget
    // (walking them all took 14 s at 20,000 and broke CEL's cost limit at 40,000).
    const many: Record<string, string> = {};
    let size = 0;
    for (let i = 0; size < 250 * 1024; i++) {
      const key = `k${i.toString(36)}`;
      many[key] = '';
      size += key.length;
    }
    const created = await kube(cp, tenant, 'POST', `/api/v1/namespaces/${NS_UNCOVERED}/pods`, {
      metadata: { name: 'many', annotations: many },
      spec: { containers: [{ name: 'app', image: 'busybox' }] },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body).slice(0, 500));
    const path = podPath('many', NS_UNCOVERED);
    const started = performance.now();
    const ordinary = await kube(cp, tenant, 'PATCH', path, { metadata: { annotations: { k0: 'x', knew: '' } } }, MERGE);
    assert.equal(ordinary.status, 200, JSON.stringify(ordinary.body).slice(0, 500));
    const patched = performance.now();
    const forged = await kube(
      cp,
      tenant,
      'PATCH',
      path,
      {
        metadata: { annotations: { k1: 'y', 'workload-identity-webhook.io/aws-config-file': '[default]\n' } },
      },
      MERGE,
    );
    assert.equal(forged.status, 403, JSON.stringify(forged.body).slice(0, 500));
    assert.match(forged.body.message, /\(workload-identity-webhook\.io\/aws-config-file\)/);
    t.diagnostic(
      `${Object.keys(many).length} annotations: an ordinary PATCH ${Math.round(patched - started)} ms, ` +
        `the refused one ${Math.round(performance.now() - patched)} ms`,
    );
  });
});
