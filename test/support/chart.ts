// Helm and the chart from the tests: render with values, lint, install; server-side dry runs of
// rendered manifests; and the plain manifests in webhook-config/, generated from the chart.
//
//   node test/support/chart.ts write-plain-manifests   regenerates webhook-config/
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { resolveBinaries } from '../harness/binaries.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import { TENANT } from './identities.ts';

export const REPO = resolve(import.meta.dirname, '../..');
export const CHART = join(REPO, 'charts/workload-identity-webhook');
export const PLAIN_DIR = join(REPO, 'webhook-config');
/** The version the harness's kube-apiserver reports; helm's own default is far older. */
export const KUBE_VERSION = '1.34.4';

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: any;
};

export interface Rendered {
  manifests: Manifest[];
  /** Template file (e.g. templates/rbac.yaml) of each manifest, same order. */
  sources: string[];
  text: string;
}

let helmPath: Promise<string> | undefined;
function helmBinary(): Promise<string> {
  helmPath ??= resolveBinaries().then((b) => b.helm);
  return helmPath;
}

export class HelmError extends Error {
  readonly stderr: string;
  /** What it printed before failing: `helm lint` prints its findings there. */
  readonly stdout: string;
  constructor(args: string[], stderr: string, stdout = '') {
    super(`helm ${args.join(' ')} failed:\n${stderr}`);
    this.stderr = stderr;
    this.stdout = stdout;
  }
}

export async function helm(args: string[], options: { kubeconfig?: string } = {}): Promise<string> {
  const full = [...args, ...(options.kubeconfig ? ['--kubeconfig', options.kubeconfig] : [])];
  try {
    const { stdout } = await promisify(execFile)(await helmBinary(), full, {
      cwd: REPO,
      maxBuffer: 32 << 20,
      // Helm keeps caches and config under these; keep them out of the user's home.
      env: {
        ...process.env,
        HELM_CACHE_HOME: join(tmpdir(), 'wiw-helm-cache'),
        HELM_CONFIG_HOME: join(tmpdir(), 'wiw-helm-config'),
        HELM_DATA_HOME: join(tmpdir(), 'wiw-helm-data'),
      },
    });
    return stdout;
  } catch (err) {
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new HelmError(full, stderr || (err as Error).message, stdout);
  }
}

/** Runs `fn` with the values written to a temporary file. */
export async function withValuesFile<T>(values: object, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'wiw-values-'));
  const file = join(dir, 'values.yaml');
  await writeFile(file, stringify(values));
  try {
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function parseRendered(text: string): Rendered {
  const manifests: Manifest[] = [];
  const sources: string[] = [];
  for (const doc of parseAllDocuments(text)) {
    const value = doc.toJS() as Manifest | null;
    if (!value) continue;
    const source =
      /# Source: [^/]+\/(.+)/.exec(String(doc.commentBefore ?? ''))?.[1] ??
      /# Source: [^/]+\/(.+)/.exec(doc.toString())?.[1];
    manifests.push(value);
    sources.push(source ?? 'unknown');
  }
  return { manifests, sources, text };
}

export async function renderChart(
  values: object = {},
  /** tests: also the `helm test` hooks (templates/tests/), which an install does not create. */
  options: { release?: string; namespace?: string; tests?: boolean; kubeVersion?: string } = {},
): Promise<Rendered> {
  const release = options.release ?? 'wiw';
  const namespace = options.namespace ?? 'wiw-system';
  const skip = options.tests ? [] : ['--skip-tests'];
  const text = await withValuesFile(values, (file) =>
    helm([
      'template',
      release,
      CHART,
      '--namespace',
      namespace,
      '--kube-version',
      options.kubeVersion ?? KUBE_VERSION,
      ...skip,
      '-f',
      file,
    ]),
  );
  return parseRendered(text);
}

/**
 * NOTES.txt as `helm install` would print it: `helm template` renders NOTES but never prints
 * them, so a copy of the chart gets one more template that includes NOTES.txt as a YAML string.
 */
export async function renderNotes(values: object = {}, options: { release?: string; namespace?: string } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'wiw-notes-'));
  try {
    const chart = join(dir, 'chart');
    await cp(CHART, chart, { recursive: true });
    const name = 'templates/notes-under-test.yaml';
    await writeFile(
      join(chart, name),
      'notes: {{ include "workload-identity-webhook/templates/NOTES.txt" . | toJson }}\n',
    );
    const text = await withValuesFile(values, (file) =>
      helm([
        'template',
        options.release ?? 'wiw',
        chart,
        '--namespace',
        options.namespace ?? 'wiw-system',
        '--kube-version',
        KUBE_VERSION,
        '--show-only',
        name,
        '-f',
        file,
      ]),
    );
    return (parseRendered(text).manifests[0] as unknown as { notes: string }).notes;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function lintChart(values: object = {}): Promise<string> {
  return withValuesFile(values, (file) =>
    helm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '-f', file]),
  );
}

export function helmUpgradeInstall(
  cp: ControlPlane,
  release: string,
  namespace: string,
  values: object,
  command: 'install' | 'upgrade' = 'install',
  /** Another chart than the checkout's, e.g. oci://HOST/PATH/charts/NAME with `--version`. */
  chart: { ref: string; args: string[] } = { ref: CHART, args: [] },
): Promise<string> {
  return withValuesFile(values, (file) =>
    helm([command, release, chart.ref, ...chart.args, '--namespace', namespace, '-f', file], {
      kubeconfig: cp.kubeconfigPath,
    }),
  );
}

export function find(manifests: Manifest[], kind: string, name?: string): Manifest | undefined {
  return manifests.find((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
}

export function all(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.kind === kind);
}

/** The `name=value` environment of a container (valueFrom entries left out). */
export function containerEnv(deployment: Manifest, container = 0): Record<string, string> {
  const env = deployment.spec.template.spec.containers[container].env as { name: string; value?: string }[];
  return Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
}

/** What the chart names the objects of the release `wiw`, which renderChart renders by default. */
export const FULLNAME = 'wiw-workload-identity-webhook';

/** The webhook's Deployment among rendered manifests; the test fails if there is none. */
export function webhookDeployment(manifests: Manifest[]): Manifest {
  const d = find(manifests, 'Deployment', FULLNAME);
  assert.ok(d, 'the webhook Deployment is rendered');
  return d;
}

/** Whether a Kubernetes label selector (matchLabels and matchExpressions) selects these labels. */
export function selects(
  selector: {
    matchLabels?: Record<string, string>;
    matchExpressions?: { key: string; operator: string; values?: string[] }[];
  },
  labels: Record<string, string>,
): boolean {
  const labelsMatch = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    labelsMatch &&
    (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      const has = Object.hasOwn(labels, key);
      if (operator === 'In') return has && values.includes(labels[key]);
      if (operator === 'NotIn') return !has || !values.includes(labels[key]);
      if (operator === 'Exists') return has;
      if (operator === 'DoesNotExist') return !has;
      throw new Error(`unknown operator ${operator}`);
    })
  );
}

// --- the API server side -------------------------------------------------------------------

interface ResourceInfo {
  plural: string;
  namespaced: boolean;
}
const discovery = new WeakMap<ControlPlane, Map<string, ResourceInfo>>();

async function resourceFor(cp: ControlPlane, apiVersion: string, kind: string): Promise<ResourceInfo> {
  let known = discovery.get(cp);
  if (!known) discovery.set(cp, (known = new Map()));
  const key = `${apiVersion}/${kind}`;
  if (!known.has(key)) {
    const path = apiVersion === 'v1' ? '/api/v1' : `/apis/${apiVersion}`;
    const res = await cp.request('GET', path);
    if (res.status !== 200) throw new Error(`discovery of ${apiVersion} failed: HTTP ${res.status} ${res.body}`);
    for (const r of JSON.parse(res.body).resources as { name: string; kind: string; namespaced: boolean }[]) {
      if (!r.name.includes('/')) known.set(`${apiVersion}/${r.kind}`, { plural: r.name, namespaced: r.namespaced });
    }
  }
  const info = known.get(key);
  if (!info) throw new Error(`the API server does not serve ${kind} in ${apiVersion}`);
  return info;
}

/** The REST path of a manifest's collection (create) or of the object itself (get/delete). */
export async function resourcePath(cp: ControlPlane, m: Manifest, namespace: string, item = false): Promise<string> {
  const info = await resourceFor(cp, m.apiVersion, m.kind);
  const base = m.apiVersion === 'v1' ? '/api/v1' : `/apis/${m.apiVersion}`;
  const ns = info.namespaced ? `/namespaces/${m.metadata.namespace ?? namespace}` : '';
  return `${base}${ns}/${info.plural}${item ? `/${m.metadata.name}` : ''}`;
}

/**
 * Server-side dry-run create with strict field validation: the API server runs defaulting,
 * validation and admission and stores nothing; an unknown or misspelled field is an error.
 * Returns the failures (empty when all were accepted).
 */
export async function dryRunCreate(cp: ControlPlane, manifests: Manifest[], namespace: string): Promise<string[]> {
  const failures: string[] = [];
  for (const m of manifests) {
    const path = await resourcePath(cp, m, namespace);
    const res = await cp.request('POST', `${path}?dryRun=All&fieldValidation=Strict`, m);
    if (res.status !== 201 && res.status !== 200) {
      failures.push(`${m.kind} ${m.metadata.name}: HTTP ${res.status}: ${JSON.parse(res.body).message ?? res.body}`);
    }
  }
  return failures;
}

/** The chart's own CRDs (crds/), as helm installs them. */
export async function chartCrds(): Promise<Manifest[]> {
  const dir = join(CHART, 'crds');
  const out: Manifest[] = [];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const doc of parseAllDocuments(await readFile(join(dir, file), 'utf8'))) out.push(doc.toJS() as Manifest);
  }
  return out;
}

/**
 * Stand-ins for the CRDs of cert-manager and the Prometheus operator, so their objects can be
 * dry-run here. Written for this project (not copied): they list the fields the chart uses
 * under their real names and nothing else, so with strict validation a misspelt field fails.
 */
export function stubCrds(): Manifest[] {
  const str = { type: 'string' };
  const strs = { type: 'array', items: str };
  const issuerRef = { type: 'object', required: ['name'], properties: { name: str, kind: str, group: str } };
  const crd = (group: string, kind: string, plural: string, spec: object): Manifest => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', properties: { spec } } },
        },
      ],
    },
  });
  return [
    crd('cert-manager.io', 'Certificate', 'certificates', {
      type: 'object',
      required: ['secretName', 'issuerRef'],
      properties: {
        secretName: str,
        commonName: str,
        isCA: { type: 'boolean' },
        duration: str,
        renewBefore: str,
        dnsNames: strs,
        ipAddresses: strs,
        usages: strs,
        issuerRef,
        privateKey: {
          type: 'object',
          properties: {
            algorithm: { type: 'string', enum: ['RSA', 'ECDSA', 'Ed25519'] },
            size: { type: 'integer' },
            rotationPolicy: { type: 'string', enum: ['Never', 'Always'] },
            encoding: str,
          },
        },
      },
    }),
    crd('cert-manager.io', 'Issuer', 'issuers', {
      type: 'object',
      properties: {
        selfSigned: { type: 'object', properties: { crlDistributionPoints: strs } },
        ca: { type: 'object', required: ['secretName'], properties: { secretName: str } },
      },
    }),
    crd('monitoring.coreos.com', 'PrometheusRule', 'prometheusrules', {
      type: 'object',
      properties: {
        groups: {
          type: 'array',
          items: {
            type: 'object',
            required: ['name', 'rules'],
            properties: {
              name: str,
              interval: str,
              rules: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['expr'],
                  properties: {
                    alert: str,
                    record: str,
                    expr: { 'x-kubernetes-int-or-string': true },
                    for: str,
                    labels: { type: 'object', additionalProperties: str },
                    annotations: { type: 'object', additionalProperties: str },
                  },
                },
              },
            },
          },
        },
      },
    }),
    crd('monitoring.coreos.com', 'ServiceMonitor', 'servicemonitors', {
      type: 'object',
      required: ['selector'],
      properties: {
        jobLabel: str,
        selector: { type: 'object', properties: { matchLabels: { type: 'object', additionalProperties: str } } },
        namespaceSelector: { type: 'object', properties: { any: { type: 'boolean' }, matchNames: strs } },
        endpoints: {
          type: 'array',
          items: {
            type: 'object',
            properties: { port: str, path: str, scheme: str, interval: str, scrapeTimeout: str },
          },
        },
      },
    }),
  ];
}

// --- plain manifests -------------------------------------------------------------------------

export const PLAIN_RELEASE = 'workload-identity-webhook';
export const PLAIN_NAMESPACE = 'workload-identity-webhook';
const HEADER =
  '# Generated from charts/workload-identity-webhook with its default values\n# (`node test/support/chart.ts write-plain-manifests`); do not edit: change the chart.\n';

/** The files of webhook-config/, by name, as the chart renders them now. */
export async function plainManifests(): Promise<Map<string, string>> {
  const rendered = await renderChart({}, { release: PLAIN_RELEASE, namespace: PLAIN_NAMESPACE });
  const byTemplate = new Map<string, Manifest[]>();
  rendered.manifests.forEach((m, i) => {
    const file = rendered.sources[i].replace(/^templates\//, '');
    byTemplate.set(file, [...(byTemplate.get(file) ?? []), m]);
  });
  const files = new Map<string, string>();
  files.set(
    'namespace.yaml',
    HEADER +
      stringify({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: PLAIN_NAMESPACE, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
      }),
  );
  for (const [file, docs] of byTemplate) files.set(file, HEADER + docs.map((d) => stringify(d)).join('---\n'));
  // Apply order: what others refer to first, the webhook configuration last.
  const order = [
    'namespace.yaml',
    'serviceaccount.yaml',
    'certificates.yaml',
    'rbac.yaml',
    'service.yaml',
    'deployment.yaml',
    'pdb.yaml',
    'validatingadmissionpolicy.yaml',
    'mutatingwebhookconfiguration.yaml',
  ];
  const names = [...files.keys()].sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
  files.set(
    'kustomization.yaml',
    HEADER + stringify({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: names }),
  );
  return files;
}

export async function readPlainManifests(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const name of (await readdir(PLAIN_DIR)).sort()) {
    if (name.endsWith('.yaml')) files.set(name, await readFile(join(PLAIN_DIR, name), 'utf8'));
  }
  return files;
}

async function writePlainManifests(): Promise<void> {
  const existing = await readdir(PLAIN_DIR).catch(() => [] as string[]);
  for (const name of existing) if (name.endsWith('.yaml')) await rm(join(PLAIN_DIR, name));
  for (const [name, text] of await plainManifests()) await writeFile(join(PLAIN_DIR, name), text);
}

if (import.meta.main) {
  if (process.argv[2] !== 'write-plain-manifests') {
    process.stderr.write('usage: node test/support/chart.ts write-plain-manifests\n');
    process.exit(2);
  }
  await writePlainManifests();
  process.stdout.write(`wrote ${PLAIN_DIR}\n`);
}

// --- the values matrix the chart test files walk -----------------------------------------------

export const TEST_CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n';

/** Each certificate mode, token requestor on and off, both failure policies and scopes, custom selectors. */
export const VALUES_MATRIX: { name: string; values: Record<string, any> }[] = [
  { name: 'defaults (self-managed)', values: {} },
  {
    name: 'self-managed, token requestor, Ignore',
    values: { tokenRequestor: { enabled: true, namespaces: ['apps'] }, webhook: { failurePolicy: 'Ignore' } },
  },
  { name: 'cert-manager with its own CA', values: { certificates: { mode: 'certManager' } } },
  {
    name: 'cert-manager with a ClusterIssuer, token requestor, custom namespace selectors',
    values: {
      certificates: {
        mode: 'certManager',
        certManager: { issuerRef: { name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' } },
      },
      tokenRequestor: { enabled: true, namespaces: ['apps'] },
      webhook: {
        excludeNamespaces: ['monitoring'],
        namespaceSelector: {
          matchLabels: { 'identity.example.com/enabled': 'true' },
          matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['sandbox'] }],
        },
      },
    },
  },
  {
    name: 'provided certificate, Ignore, one replica, no Secret webhooks',
    values: {
      certificates: { mode: 'provided', provided: { secretName: 'my-tls', caBundle: TEST_CA_PEM } },
      webhook: { failurePolicy: 'Ignore', secrets: { enabled: false } },
      replicaCount: 1,
    },
  },
  {
    name: 'tenant policy from the cluster with the starter policy, keep-last-good',
    values: { config: { watchPolicies: true, policyFailureMode: 'keep-last-good' }, policy: { starter: true } },
  },
  { name: 'tenant policy from a ConfigMap', values: { policy: { configMap: 'wiw-policy' } } },
  {
    name: 'everything optional on, url clientConfig, all config set',
    values: {
      tokenRequestor: { enabled: true, namespaces: ['apps'], extraArgs: ['--log-level=debug'] },
      networkPolicy: {
        enabled: true,
        metricsFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
        egress: [{}],
      },
      serviceMonitor: { enabled: true, labels: { release: 'prometheus' } },
      webhook: { url: 'https://127.0.0.1:9443', timeoutSeconds: 5, annotations: { 'example.com/owner': 'platform' } },
      config: {
        awsDefaultRegion: 'eusc-de-east-1',
        azureTenantId: TENANT,
        gcpDefaultRegion: 'europe-west1',
        gcpAudience: 'https://iam.googleapis.com/x',
        logLevel: 'debug',
        awsStsRegionalEndpoints: true,
      },
      priorityClassName: 'system-cluster-critical',
      podAnnotations: { 'example.com/a': 'b' },
    },
  },
  {
    name: 'labelled scope, reinvocation Never, alerts, dashboard and ServiceMonitors with the token requestor',
    values: {
      webhook: {
        scope: 'labelled',
        reinvocationPolicy: 'Never',
        namespaceSelector: { matchLabels: { team: 'a' } },
      },
      tokenRequestor: { enabled: true, namespaces: ['apps'] },
      serviceMonitor: { enabled: true },
      prometheusRule: { enabled: true, runbookUrl: 'https://docs.example.com/observability.md' },
      grafanaDashboard: { enabled: true },
      priorityClassName: '',
    },
  },
];
