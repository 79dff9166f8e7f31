// The policy mode's differential harness: ServiceAccounts of the three clouds (the peer-diff
// corpus's and generated ones), the corpus's Pod shapes under each, the policy registered on a
// kube-apiserver (no webhook), and each Pod as the API server stores it beside `preview`'s Pod.
import { stringify } from 'yaml';
import type { ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import type { Pod, ServiceAccountView } from '../../src/kube/types.ts';
import type { PodProvider } from '../../src/clouds/types.ts';
import { previewPod } from '../../src/commands/preview.ts';
import { renderParameters } from '../../src/policy-mode/parameters.ts';
import {
  PARAMETERS_GROUP,
  PARAMETERS_PLURAL,
  PARAMETERS_VERSION,
  parametersObject,
} from '../../src/policy-mode/policy.ts';
import { find, renderChart, type Manifest } from './chart.ts';
import { diffPods, type Difference, type Stored } from './peer-diff-compare.ts';
import type { CorpusFile } from './peer-diff.ts';

export interface ServiceAccountManifest {
  metadata: { name: string; annotations?: Record<string, string> };
}

export interface PolicyNamespace {
  name: string;
  cloud: string;
  serviceAccounts: ServiceAccountManifest[];
  pods: Pod[];
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
const guid = (n: number) => `00000000-0000-4000-8000-${hex(n, 12)}`;

/** The n-th generated ServiceAccount of a cloud: the annotations each cloud reads, varied. */
export function generatedServiceAccount(cloud: string, n: number): ServiceAccountManifest {
  const name = `${cloud}-sa-${n}`;
  const pick = <T>(xs: readonly T[]) => xs[n % xs.length];
  if (cloud === 'aws') {
    const a: Record<string, string> = { 'eks.amazonaws.com/role-arn': `arn:aws:iam::${100000000000 + n}:role/r${n}` };
    if (n % 3 === 1) a['eks.amazonaws.com/sts-regional-endpoints'] = pick(['true', 'false']);
    if (n % 4 === 2) a['eks.amazonaws.com/token-expiration'] = pick(['3600', '86400', '7200']);
    if (n % 5 === 3) a['eks.amazonaws.com/audience'] = `aud-${n}`;
    if (n % 7 === 4) a['eks.amazonaws.com/role-session-name'] = `s${n}`;
    if (n % 11 === 5) {
      a['eks.amazonaws.com/role-arns'] = `reader=arn:aws:iam::${100000000000 + n}:role/reader`;
      a['eks.amazonaws.com/container-profiles'] = 'app=reader';
    }
    return { metadata: { name, annotations: a } };
  }
  if (cloud === 'azure') {
    const a: Record<string, string> = { 'azure.workload.identity/client-id': guid(n) };
    if (n % 3 === 1) a['azure.workload.identity/tenant-id'] = guid(10_000 + n);
    if (n % 4 === 2) a['azure.workload.identity/service-account-token-expiration'] = pick(['3600', '86400', '7200']);
    if (n % 11 === 5) a['azure.workload.identity/container-client-ids'] = `app=${guid(20_000 + n)}`;
    return { metadata: { name, annotations: a } };
  }
  const project = `project-${n}`;
  const a: Record<string, string> = {
    'cloud.google.com/workload-identity-provider': `projects/${1000 + n}/locations/global/workloadIdentityPools/pool-${n}/providers/prov-${n}`,
    'cloud.google.com/service-account-email': `app-${n}@${project}.iam.gserviceaccount.com`,
  };
  if (n % 3 === 1) a['cloud.google.com/injection-mode'] = pick(['direct', 'gcloud']);
  if (n % 4 === 2) a['cloud.google.com/token-expiration'] = pick(['3600', '86400', '7200']);
  if (n % 5 === 3) a['cloud.google.com/audience'] = `aud-${n}`;
  return { metadata: { name, annotations: a } };
}

/**
 * The corpus's namespaces, each with a `default` ServiceAccount (as every namespace of a cluster
 * has) and `perCloud` generated ones spread over them; every generated ServiceAccount runs two of
 * its namespace's Pod shapes, renamed.
 */
export function policyNamespaces(corpus: readonly CorpusFile[], perCloud: number): PolicyNamespace[] {
  const out: PolicyNamespace[] = corpus.map((f) => ({
    name: f.namespace,
    cloud: f.cloud,
    serviceAccounts: [
      ...(f.serviceAccounts as ServiceAccountManifest[]),
      ...(f.serviceAccounts.some((s: ServiceAccountManifest) => s.metadata.name === 'default')
        ? []
        : [{ metadata: { name: 'default' } }]),
    ],
    pods: f.pods.map((p: Pod) => structuredClone(p)),
  }));
  for (const cloud of ['aws', 'azure', 'gcp']) {
    const mine = out.filter((n) => n.cloud === cloud);
    for (let n = 0; n < perCloud; n++) {
      const ns = mine[n % mine.length];
      const sa = generatedServiceAccount(cloud, n);
      ns.serviceAccounts.push(sa);
      const shapes = corpusShapes(corpus, ns.name);
      for (const k of [0, 1]) {
        const shape = structuredClone(shapes[(2 * n + k) % shapes.length]);
        shape.metadata = { ...shape.metadata, name: `${sa.metadata.name}-${k}` };
        shape.spec = { ...shape.spec!, serviceAccountName: sa.metadata.name };
        delete shape.spec.serviceAccount;
        ns.pods.push(k === 0 ? withPodAnnotations(cloud, n, shape) : shape);
      }
    }
  }
  return out;
}

/**
 * Some first Pods carry what a Pod may say itself: AWS's region and session name, a volume under
 * the token volume's name (the webhook refuses it), Azure's skip-containers and GCP's
 * include-containers naming the first container.
 */
function withPodAnnotations(cloud: string, n: number, pod: Pod): Pod {
  const first = (pod.spec?.initContainers ?? pod.spec?.containers ?? [])[0]?.name ?? 'none';
  const annotate = (a: Record<string, string>) => {
    pod.metadata!.annotations = { ...pod.metadata!.annotations, ...a };
    return pod;
  };
  if (n % 13 === 6 && cloud === 'aws')
    return annotate({
      'eks.amazonaws.com/region': 'eu-central-1',
      'eks.amazonaws.com/role-session-name': 'pod-session',
    });
  if (n % 13 === 7 && cloud === 'aws') {
    pod.spec!.volumes = [...(pod.spec!.volumes ?? []), { name: 'aws-iam-token', emptyDir: {} }];
    return pod;
  }
  if (n % 13 === 6 && cloud === 'azure') return annotate({ 'azure.workload.identity/skip-containers': first });
  if (n % 13 === 6 && cloud === 'gcp') return annotate({ 'cloud.google.com/include-containers': ` ${first} ,` });
  return pod;
}

function corpusShapes(corpus: readonly CorpusFile[], namespace: string): Pod[] {
  return corpus.find((f) => f.namespace === namespace)!.pods as Pod[];
}

/** The CRD, the policy and its binding as the chart renders them (injection.mode=policy, Kubernetes 1.36). */
export async function chartPolicyMode(): Promise<{ crd: Manifest; policy: Manifest; binding: Manifest }> {
  const { manifests } = await renderChart({ injection: { mode: 'policy' } }, { kubeVersion: '1.36.3' });
  const crd = find(manifests, 'CustomResourceDefinition', `${PARAMETERS_PLURAL}.${PARAMETERS_GROUP}`);
  const policy = find(manifests, 'MutatingAdmissionPolicy');
  const binding = find(manifests, 'MutatingAdmissionPolicyBinding');
  if (!crd || !policy || !binding)
    throw new Error('the chart renders no policy mode objects with injection.mode=policy');
  return { crd, policy, binding };
}

/** The CRD, the policy and its binding, as the chart installs them; waits until the CRD is served. */
export async function installPolicyMode(cp: ControlPlane): Promise<void> {
  const { crd, policy, binding } = await chartPolicyMode();
  await must(cp.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd), 'CRD');
  await until('the parameter resource served', async () => {
    const r = await cp.request('GET', `/apis/${PARAMETERS_GROUP}/${PARAMETERS_VERSION}/${PARAMETERS_PLURAL}`);
    return r.status === 200 || undefined;
  });
  const admission = '/apis/admissionregistration.k8s.io/v1';
  await must(cp.request('POST', `${admission}/mutatingadmissionpolicies`, policy), 'policy');
  await must(cp.request('POST', `${admission}/mutatingadmissionpolicybindings`, binding), 'binding');
}

/** The namespace, its ServiceAccounts' parameters rendered by the core, and the object written. */
export async function writeNamespace(
  cp: ControlPlane,
  providers: readonly PodProvider[],
  ns: PolicyNamespace,
): Promise<ReturnType<typeof renderParameters>> {
  await must(cp.request('POST', '/api/v1/namespaces', { metadata: { name: ns.name } }), `namespace ${ns.name}`);
  const rendered = renderParameters(
    providers,
    ns.name,
    ns.serviceAccounts.map((s) => view(ns.name, s)),
  );
  const path = `/apis/${PARAMETERS_GROUP}/${PARAMETERS_VERSION}/namespaces/${ns.name}/${PARAMETERS_PLURAL}`;
  await must(cp.request('POST', path, parametersObject(ns.name, rendered.spec)), `parameters of ${ns.name}`);
  return rendered;
}

function view(namespace: string, s: ServiceAccountManifest): ServiceAccountView {
  return { namespace, name: s.metadata.name, uid: '', annotations: s.metadata.annotations ?? {} };
}

const SKIP = 'workload-identity-webhook.io/skip';

/** Creates the Pod with dryRun: as stored, or the refusal. `skip`: with the policy's opt-out label, removed again. */
export async function dryRun(cp: ControlPlane, namespace: string, pod: Pod, skip = false): Promise<Stored> {
  const body = structuredClone(pod);
  body.metadata = { ...body.metadata, namespace };
  if (skip) body.metadata.labels = { ...body.metadata.labels, [SKIP]: 'x' };
  const r = await cp.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
    apiVersion: 'v1',
    kind: 'Pod',
    ...body,
  });
  if (r.status !== 201) return { refused: `${r.status} ${r.body.toString().slice(0, 500)}` };
  const stored = JSON.parse(r.body.toString()) as Pod;
  if (skip) {
    delete stored.metadata!.labels![SKIP];
    if (Object.keys(stored.metadata!.labels!).length === 0) delete stored.metadata!.labels;
  }
  return stored;
}

export interface Compared {
  namespace: string;
  pod: Pod;
  policy: Stored;
  preview: Stored;
  differences: Difference[];
  /** The policy's Pod through the policy again (a reinvocation): what changed. */
  reinvoked: Difference[];
  /** Mode `both`: the policy after the webhook (preview's Pod through the policy): what changed. */
  policyAfterWebhook: Difference[];
  /** Mode `both`: the webhook after the policy (preview of the policy's Pod): its patch's paths. */
  webhookAfterPolicy: string[];
}

/**
 * One Pod both ways: through the API server with the policy, and `preview` of the Pod the API
 * server hands admission (its defaults applied), stored by the API server without the policy.
 */
export async function comparePod(
  cp: ControlPlane,
  providers: readonly PodProvider[],
  ns: PolicyNamespace,
  pod: Pod,
): Promise<Compared> {
  const policy = await dryRun(cp, ns.name, pod);
  const defaulted = await dryRun(cp, ns.name, pod, true);
  let preview: Stored = defaulted;
  let policyAfterWebhook: Difference[] = [];
  if (!('refused' in defaulted)) {
    const result = previewOf(providers, ns, defaulted);
    if (result.allowed) {
      const mutated = JSON.parse(result.output) as Pod;
      preview = await dryRun(cp, ns.name, mutated, true);
      policyAfterWebhook = diffPods(await dryRun(cp, ns.name, mutated), preview);
    } else preview = { refused: result.denial.message };
  }
  let reinvoked: Difference[] = [];
  let webhookAfterPolicy: string[] = [];
  if (!('refused' in policy)) {
    reinvoked = diffPods(await dryRun(cp, ns.name, policy), policy);
    const again = previewOf(providers, ns, policy);
    webhookAfterPolicy = again.allowed
      ? again.patch.map((op) => `${op.op} ${op.path}`)
      : [`refused: ${again.denial.message}`];
  }
  const differences = diffPods(policy, preview);
  return { namespace: ns.name, pod, policy, preview, differences, reinvoked, policyAfterWebhook, webhookAfterPolicy };
}

/** `preview` of a Pod in the namespace, its ServiceAccounts the documents beside it. */
export function previewOf(providers: readonly PodProvider[], ns: PolicyNamespace, pod: Pod) {
  const documents = [
    { apiVersion: 'v1', kind: 'Pod', ...pod },
    ...ns.serviceAccounts.map((s) => ({
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { ...s.metadata, namespace: ns.name },
    })),
  ];
  const text = documents.map((d) => stringify(d)).join('---\n');
  return previewPod(providers, { documents: [{ source: `${ns.name}.yaml`, text }] }, 'json');
}

async function must(response: Promise<{ status: number; body: string }>, what: string): Promise<void> {
  const r = await response;
  if (r.status >= 300) throw new Error(`${what}: HTTP ${r.status} ${r.body.toString().slice(0, 2000)}`);
}
