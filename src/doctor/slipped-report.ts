// doctor's part for the Pods that slipped past (slipped.ts): one FAIL line per Pod for the first
// few, with its owner, why it slipped where the cluster tells, and what restarts it; a count of
// the rest; and with --fix, each restartable owner restarted once (kubectl rollout restart) after
// the caller's confirmation.
import { serviceAccountAnnotations } from '../clouds/index.ts';
import type { PodProvider } from '../clouds/types.ts';
import { type KubeApi, apiPath } from '../kube/api.ts';
import { slimServiceAccount } from '../kube/serviceaccount-cache.ts';
import type { Pod, ServiceAccountView } from '../kube/types.ts';
import { serviceAccountNameOf } from '../model.ts';
import { shellQuote } from '../shell.ts';
import { type Owner, OwnerResolver, ownerKey, restartOwner } from './owners.ts';
import { type Missing, scanPods } from './slipped.ts';
import { SlipReasons } from './slipped-why.ts';
import type { Check } from './verdicts.ts';
import { errorMessage } from '../errors.ts';

/** Pods listed one by one; the rest are counted (a cluster may have 100,000 Pods). */
const MAX_LISTED_PODS = 20;
/** Owners listed in a confirmation or as restarted; the rest are counted. */
export const MAX_LISTED_OWNERS = 50;

interface SlippedOptions {
  api: KubeApi;
  providers: readonly PodProvider[];
  namespace?: string;
  /** --fix: restart the owners; `confirm` (a terminal's question) may decline, absent means --yes. */
  fix?: { confirm?: (owners: readonly Owner[]) => Promise<boolean> };
  waiting?: (what: string) => void;
  now?: () => Date;
}

interface Finding {
  pod: Pod;
  missing: Missing;
  owner: Owner;
  reason: string;
}

const DOCTOR_RBAC_DOC = 'docs/trust.md#pods-that-slipped-past';

/** The ServiceAccounts the Pods name, each read once, kept as the webhook's cache keeps them. */
function accountReader(api: KubeApi, providers: readonly PodProvider[]) {
  const bounds = serviceAccountAnnotations(providers);
  const read = new Map<string, Promise<ServiceAccountView | undefined>>();
  return (namespace: string, name: string) => {
    const key = `${namespace}/${name}`;
    let found = read.get(key);
    if (!found) {
      found = api.request('GET', apiPath('api', 'v1', 'namespaces', namespace, 'serviceaccounts', name)).then(
        (raw) => slimServiceAccount(raw as Parameters<typeof slimServiceAccount>[0], bounds),
        (err: { code?: number }) => {
          if (err.code === 404) return undefined;
          throw err;
        },
      );
      read.set(key, found);
    }
    return found;
  };
}

export async function slippedChecks(o: SlippedOptions): Promise<Check[]> {
  const owners = new Map<string, { owner: Owner; pods: number }>();
  const listed: Finding[] = [];
  let read: number;
  try {
    o.waiting?.('the Pods, page by page');
    const resolver = new OwnerResolver(o.api);
    const reasons = await SlipReasons.load(o.api);
    read = await scanPods({
      api: o.api,
      providers: o.providers,
      namespace: o.namespace,
      lookup: accountReader(o.api, o.providers),
      onSlipped: async (pod, missing) => {
        const owner = refusedOwner(await resolver.ownerOf(pod), missing);
        const key = ownerKey(owner);
        const seen = owners.get(key);
        if (seen) seen.pods++;
        else owners.set(key, { owner, pods: 1 });
        if (listed.length < MAX_LISTED_PODS) listed.push({ pod, missing, owner, reason: await reasons.why(pod) });
      },
    });
  } catch (err) {
    return [
      {
        id: 'slipped-pods',
        verdict: 'unknown',
        message: `cannot list the Pods and their ServiceAccounts: ${errorMessage(err)}`,
        fix: `use a kubeconfig that may list pods and get serviceaccounts, replicasets and jobs (${DOCTOR_RBAC_DOC})`,
      },
    ];
  }
  const total = [...owners.values()].reduce((n, x) => n + x.pods, 0);
  if (total === 0)
    return [
      {
        id: 'slipped-pods',
        verdict: 'pass',
        message: `no running Pod lacks the identity its ServiceAccount carries (${read} Pods read)`,
      },
    ];
  const restarted = o.fix
    ? await fix(
        o,
        [...owners.values()].map((x) => x.owner),
      )
    : undefined;
  return [
    ...listed.map((f) => podCheck(f, restarted?.done.has(ownerKey(f.owner)) === true)),
    summary(total, read, owners, restarted?.done),
    ...(restarted?.checks ?? []),
  ];
}

/** An owner whose Pods the webhook would refuse is not restarted: the new Pods would not be created. */
function refusedOwner(owner: Owner, missing: Missing): Owner {
  if (missing.refused === undefined || !owner.restartable) return owner;
  return {
    ...owner,
    restartable: false,
    instead:
      'correct the ServiceAccount (or the Pod template) first: restarted now, its new Pods would be refused; then restart it',
  };
}

function podCheck({ pod, missing, owner, reason }: Finding, restarted: boolean): Check {
  const sa = serviceAccountNameOf(pod);
  if (missing.refused !== undefined)
    return {
      id: 'slipped-pod',
      subject: `Pod ${pod.metadata?.namespace}/${pod.metadata?.name}`,
      verdict: 'fail',
      message: `runs without the webhook, which would refuse it now (${missing.refused}): ${reason}; owner ${ownerKey(owner)}`,
      fix: owner.instead,
    };
  return {
    id: 'slipped-pod',
    subject: `Pod ${pod.metadata?.namespace}/${pod.metadata?.name}`,
    verdict: restarted ? 'warn' : 'fail',
    message: `ServiceAccount ${sa} carries an identity (${missing.providers.join(', ')}) that its container(s) ${missing.containers.join(', ')} lack: ${reason}; owner ${ownerKey(owner)}${restarted ? ', restarted now' : ''}`,
    fix: owner.restartable
      ? `workload-identity-webhook doctor --fix, or: kubectl rollout restart -n ${shellQuote(owner.namespace)} ${shellQuote(`${owner.kind.toLowerCase()}/${owner.name}`)}`
      : owner.instead,
  };
}

function summary(
  total: number,
  read: number,
  owners: Map<string, { owner: Owner; pods: number }>,
  done: ReadonlySet<string> | undefined,
): Check {
  const restartable = [...owners.values()].filter((x) => x.owner.restartable).length;
  const unfixed = [...owners.keys()].filter((k) => !done?.has(k)).length;
  const more = total > MAX_LISTED_PODS ? `, ${total - MAX_LISTED_PODS} more than listed above` : '';
  return {
    id: 'slipped-pods',
    verdict: unfixed > 0 ? 'fail' : 'warn',
    message: `${total} of ${read} running Pods lack the identity their ServiceAccount carries${more}; ${owners.size} owner(s), ${restartable} of them restartable (Deployment, StatefulSet, DaemonSet)${done ? `, ${done.size} restarted now` : ''}`,
    fix:
      unfixed > 0
        ? 'workload-identity-webhook doctor --fix restarts the Deployments, StatefulSets and DaemonSets (asking first, or with --yes); the other owners say what to do instead'
        : 'the restarted workloads replace their Pods at their own pace',
  };
}

/** Restarts each restartable owner once, after confirmation; a line per owner (the first few) and per failure. */
async function fix(o: SlippedOptions, owners: readonly Owner[]): Promise<{ done: Set<string>; checks: Check[] }> {
  const done = new Set<string>();
  const checks: Check[] = [];
  const restartable = owners.filter((x) => x.restartable);
  if (restartable.length === 0) return { done, checks };
  if (o.fix?.confirm && !(await o.fix.confirm(restartable))) {
    checks.push({ id: 'restart', verdict: 'warn', message: 'not confirmed: nothing was restarted' });
    return { done, checks };
  }
  const now = (o.now ?? (() => new Date()))();
  for (const owner of restartable) {
    const key = ownerKey(owner);
    o.waiting?.(`a restart of ${key}`);
    try {
      await restartOwner(o.api, owner, now);
      done.add(key);
      if (done.size <= MAX_LISTED_OWNERS)
        checks.push({
          id: 'restart',
          subject: key,
          verdict: 'pass',
          message: 'restarted (as kubectl rollout restart)',
        });
    } catch (err) {
      checks.push({
        id: 'restart',
        subject: key,
        verdict: 'fail',
        message: `cannot restart it: ${errorMessage(err)}`,
        fix: `grant patch on deployments, statefulsets and daemonsets (${DOCTOR_RBAC_DOC})`,
      });
    }
  }
  if (done.size > MAX_LISTED_OWNERS)
    checks.push({ id: 'restart', verdict: 'pass', message: `and ${done.size - MAX_LISTED_OWNERS} more restarted` });
  return { done, checks };
}
