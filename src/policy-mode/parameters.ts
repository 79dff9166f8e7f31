// A namespace's parameters for the MutatingAdmissionPolicy mode: what each of its ServiceAccounts
// gives a Pod, computed by the same core as the webhook (resolve, then tenant policy's judgement)
// on a canonical Pod, so the policy's CEL (./policy.ts) only places the pieces into the Pod's
// containers. Pure: ServiceAccounts in, the parameter object's spec out.
import { describeOversize } from '../annotation-bounds.ts';
import { isDenial } from '../errors.ts';
import type { Injection, PodProvider, PodSelection } from '../clouds/types.ts';
import type { Container, EnvVar, Pod, ServiceAccountView, Volume, VolumeMount } from '../kube/types.ts';
import { resolve } from '../mutate/pod.ts';
import type { InjectionPolicy } from '../policy/gate.ts';

/** The parameter object's JSON may hold this many bytes; a ServiceAccount beyond it is left out. */
export const MAX_PARAMETERS_BYTES = 1_000_000;

/** One provider's part of a ServiceAccount's injection, as data the CEL reads. */
interface PolicyInjection {
  provider: string;
  requireLabel?: { key: string; value: string };
  skipLabel?: string;
  skipAnnotation: string;
  includeAnnotation: string;
  separator: string;
  /** The container configures the identity itself when it sets a name of each list. */
  configuredBy?: string[][];
  mounts: VolumeMount[];
  envGroups: EnvVar[][];
  containerEnvGroups?: Record<string, EnvVar[][]>;
  envGuards?: Record<string, string[]>;
  volumes: Volume[];
  /** Init containers added before the Pod's own (a setup container first), and after them. */
  initFirst: Container[];
  initLast: Container[];
  containersFirst: Container[];
  containersLast: Container[];
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

/** A ServiceAccount's injections for Linux Pods, and for Windows Pods where they differ. */
interface ServiceAccountParameters {
  linux: PolicyInjection[];
  windows?: PolicyInjection[];
}

interface ParametersSpec {
  /** How many ServiceAccounts are listed; never absent, so the object is never empty (an apply stores `{}` as null). */
  listed: number;
  /**
   * What a Pod gets when its ServiceAccount is not listed: the webhook's reading of a ServiceAccount
   * without annotations, or of one that does not exist (the Azure label alone injects the token).
   * A ServiceAccount whose parameters equal it is not listed, so plain ones cost no budget.
   */
  fallback?: ServiceAccountParameters;
  serviceAccounts: Record<string, ServiceAccountParameters>;
}

/** A ServiceAccount the parameters do not carry, and why (the admission's refusal, or the budget). */
export interface LeftOut {
  serviceAccount: string;
  reason: string;
}

interface RenderedParameters {
  spec: ParametersSpec;
  leftOut: LeftOut[];
  bytes: number;
}

/** No ServiceAccount is named so (a DNS subdomain starts with a letter or digit): the fallback's Pod. */
const NO_SERVICE_ACCOUNT = '-';

/** The canonical Pod: one container, every provider's opt-in label, nothing of its own. */
function canonicalPod(providers: readonly PodProvider[], namespace: string, sa: string, windows: boolean): Pod {
  const labels: Record<string, string> = {};
  for (const p of providers)
    if (p.podSelection.requireLabel) labels[p.podSelection.requireLabel.key] = p.podSelection.requireLabel.value;
  return {
    metadata: { namespace, labels },
    spec: {
      serviceAccountName: sa,
      containers: [{ name: 'canonical' }],
      ...(windows ? { os: { name: 'windows' } } : {}),
    },
  } as Pod;
}

/** Resolve and judge, as admission does; a refusal is the reason the ServiceAccount is left out. */
function injectionsFor(
  providers: readonly PodProvider[],
  namespace: string,
  serviceAccount: ServiceAccountView | undefined,
  judge: InjectionPolicy | undefined,
  windows: boolean,
): Injection[] | string {
  const pod = canonicalPod(providers, namespace, serviceAccount?.name ?? NO_SERVICE_ACCOUNT, windows);
  const admission = { pod, namespace, serviceAccount };
  const resolved = resolve(providers, admission);
  if (isDenial(resolved)) return resolved.message;
  const judged = judge ? judge(admission, resolved) : resolved;
  return isDenial(judged) ? judged.message : judged;
}

function toPolicyInjection(injection: Injection, selection: PodSelection): PolicyInjection {
  const added = (list: 'initContainers' | 'containers', at: 'first' | 'last') =>
    (injection.addedContainers ?? []).filter((a) => a.list === list && a.at === at).map((a) => a.container);
  const mounts: VolumeMount[] = [
    ...[injection.mountPath, ...(injection.extraMountPaths ?? [])].map((mountPath) => ({
      name: injection.volume.name,
      mountPath,
      readOnly: true,
    })),
    ...(injection.extraVolumes ?? []).map((e) => e.mount),
  ];
  return {
    provider: injection.provider,
    ...(selection.requireLabel && { requireLabel: { ...selection.requireLabel } }),
    ...(selection.skipLabel && { skipLabel: selection.skipLabel }),
    skipAnnotation: selection.containers.skip,
    includeAnnotation: selection.containers.include,
    separator: selection.containers.separator,
    ...(injection.configuredBy && { configuredBy: injection.configuredBy.map((names) => [...names]) }),
    mounts,
    envGroups: injection.envGroups,
    ...(injection.containerEnvGroups?.size && {
      containerEnvGroups: Object.fromEntries(injection.containerEnvGroups),
    }),
    ...(injection.envGuards && {
      envGuards: Object.fromEntries(Object.entries(injection.envGuards).map(([k, v]) => [k, [...v]])),
    }),
    volumes: [injection.volume, ...(injection.extraVolumes ?? []).map((e) => e.volume)],
    initFirst: [...(injection.initContainer ? [injection.initContainer] : []), ...added('initContainers', 'first')],
    initLast: added('initContainers', 'last'),
    containersFirst: added('containers', 'first'),
    containersLast: added('containers', 'last'),
    annotations: { ...injection.annotations },
    labels: { ...injection.labels },
  };
}

/**
 * One ServiceAccount's parameters (undefined: one that does not exist), or why it has none
 * (undefined: nothing to inject).
 */
function renderServiceAccount(
  providers: readonly PodProvider[],
  namespace: string,
  serviceAccount: ServiceAccountView | undefined,
  judge?: InjectionPolicy,
): ServiceAccountParameters | string | undefined {
  if (serviceAccount?.oversize)
    return describeOversize(
      `ServiceAccount ${serviceAccount.namespace}/${serviceAccount.name}`,
      serviceAccount.oversize,
    );
  const selection = new Map(providers.map((p) => [p.name as string, p.podSelection]));
  const render = (windows: boolean) => {
    const injections = injectionsFor(providers, namespace, serviceAccount, judge, windows);
    if (typeof injections === 'string') return injections;
    // biome-ignore lint/style/noNonNullAssertion: Every injection is of one of `providers`, each of which has its selection in the map.
    return injections.map((i) => toPolicyInjection(i, selection.get(i.provider)!));
  };
  const linux = render(false);
  if (typeof linux === 'string') return linux;
  const windows = render(true);
  if (typeof windows === 'string') return windows;
  if (linux.length === 0 && windows.length === 0) return undefined;
  const same = JSON.stringify(linux) === JSON.stringify(windows);
  return same ? { linux } : { linux, windows };
}

/**
 * A namespace's parameters from its ServiceAccounts, in name order, within the budget: a
 * ServiceAccount that would take the object over it is left out (its Pods get no identity from
 * the policy), and so is one whose Pods admission would refuse.
 */
export function renderParameters(
  providers: readonly PodProvider[],
  namespace: string,
  serviceAccounts: readonly ServiceAccountView[],
  judge?: InjectionPolicy,
  budget = MAX_PARAMETERS_BYTES,
): RenderedParameters {
  const spec: ParametersSpec = { listed: 0, serviceAccounts: {} };
  const leftOut: LeftOut[] = [];
  const fallback = renderServiceAccount(providers, namespace, undefined, judge);
  if (typeof fallback === 'object') spec.fallback = fallback;
  const fallbackJson = JSON.stringify(spec.fallback);
  let bytes = Buffer.byteLength(JSON.stringify(spec));
  for (const sa of [...serviceAccounts].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const rendered = renderServiceAccount(providers, namespace, sa, judge);
    if (JSON.stringify(rendered) === fallbackJson) continue;
    if (typeof rendered === 'string') {
      leftOut.push({ serviceAccount: sa.name, reason: rendered });
      continue;
    }
    // Nothing to inject where the fallback would: listed empty, so the fallback does not apply.
    const entry = rendered ?? { linux: [] };
    // The entry's bytes, and a comma after the first.
    const listed = Object.keys(spec.serviceAccounts).length;
    const size = Buffer.byteLength(JSON.stringify({ [sa.name]: entry })) - 2 + (listed > 0 ? 1 : 0);
    // The count's digits are reserved: its final value takes up to six more than the 0 counted.
    if (bytes + size + 6 > budget) {
      leftOut.push({
        serviceAccount: sa.name,
        reason: `its parameters (${size} bytes) would take the namespace's parameter object over its budget of ${budget} bytes`,
      });
      continue;
    }
    spec.serviceAccounts[sa.name] = entry;
    bytes += size;
  }
  spec.listed = Object.keys(spec.serviceAccounts).length;
  // The count's digits beyond the 0 counted at the start.
  bytes += String(spec.listed).length - 1;
  return { spec, leftOut, bytes };
}
