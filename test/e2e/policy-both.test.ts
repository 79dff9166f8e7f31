// Mode `both` with a live `serve` (issue 32 item 4): the chart's MutatingAdmissionPolicy and the
// webhook registered as the chart registers it, on the newest kube-apiserver, over the corpus's
// Pod shapes and generated ServiceAccounts of the three clouds. kube-apiserver runs them in two
// orders: the policy, then the webhook (admission plugin order), and, both `reinvocationPolicy:
// IfNeeded`, the policy again after the webhook changed the Pod; here also the webhook first on a
// Pod the policy has not seen (its binding removed) and that Pod through both again. In every
// order no env name, volume or mount appears twice in a container, and a refused Pod is one
// `preview` refuses too.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import type { Pod } from '../../src/kube/types.ts';
import { loadCorpus } from '../support/peer-diff.ts';
import { find, renderChart } from '../support/chart.ts';
import type { Stored } from '../support/peer-diff-compare.ts';
import {
  chartPolicyMode,
  dryRun,
  installPolicyMode,
  policyNamespaces,
  previewOf,
  writeNamespace,
  type PolicyNamespace,
} from '../support/policy-mode.ts';
import { registerWebhook, startWebhook, type WebhookProcess } from '../support/webhook.ts';
import { roleArn } from '../support/identities.ts';

const TENANT = '11111111-2222-4333-8444-555555555555';
const providers = createProviders(loadConfig(new Map([['azure-tenant-id', TENANT]]), {}));
const namespaces = policyNamespaces(loadCorpus(), 12);
/** A namespace the webhook is not registered for: its Pods show whether the policy is bound. */
const PROBE: PolicyNamespace = {
  name: 'policy-probe',
  cloud: 'aws',
  serviceAccounts: [{ metadata: { name: 'app', annotations: { 'eks.amazonaws.com/role-arn': roleArn('a') } } }],
  pods: [],
};
const BINDINGS = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings';

/** What appears twice: volume names, and each container's env names, mounts and mount paths. */
function duplicates(pod: Pod): string[] {
  const twice = (what: string, names: string[]) =>
    names.filter((n, i) => names.indexOf(n) !== i).map((n) => `${what} ${n}`);
  const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  return [
    ...twice(
      'volume',
      (pod.spec?.volumes ?? []).map((v) => v.name),
    ),
    ...containers.flatMap((c) => [
      ...twice(
        `${c.name} env`,
        (c.env ?? []).map((e) => e.name),
      ),
      // One Azure token volume is mounted at two paths by design (azure-token-both-layouts).
      ...twice(
        `${c.name} mount`,
        (c.volumeMounts ?? []).map((m) => `${m.name}@${m.mountPath}`),
      ),
      ...twice(
        `${c.name} mountPath`,
        (c.volumeMounts ?? []).map((m) => m.mountPath),
      ),
    ]),
  ];
}

interface Run {
  pod: Pod;
  ns: PolicyNamespace;
  stored: Stored;
}

/** Every corpus Pod through the API server (dryRun), a few at a time; `input` maps a Pod first. */
async function throughAll(cp: ControlPlane, input: (r: Run) => Pod | undefined, runs: Run[]): Promise<Run[]> {
  const out: Run[] = [];
  for (let i = 0; i < runs.length; i += 8) {
    const batch = runs.slice(i, i + 8).map((r) => ({ r, pod: input(r) }));
    const stored = await Promise.all(
      batch.map(({ r, pod }) => (pod ? dryRun(cp, r.ns.name, pod) : Promise.resolve(r.stored))),
    );
    out.push(...batch.map(({ r }, k) => ({ ...r, stored: stored[k] })));
  }
  return out;
}

/**
 * The names the webhook's decision lines hold so far (but the barrier's). The lines go out in
 * batches, up to 250 ms after a create was answered, and in order: once a barrier Pod's line is
 * out, every earlier one is. `through` went through the webhook (admitted); sent again, renamed.
 */
async function decidedSoFar(cp: ControlPlane, wh: WebhookProcess, through: Run): Promise<Set<unknown>> {
  const name = `barrier-${Date.now()}`;
  await dryRun(cp, through.ns.name, {
    ...through.pod,
    metadata: { ...through.pod.metadata, name, generateName: undefined },
  });
  const decided = () => wh.logs().filter((l) => l.msg === 'admission');
  await until("the barrier Pod's decision line", () => decided().some((l) => l.name === name) || undefined);
  return new Set(decided().flatMap((l) => (l.name === name ? [] : [l.name])));
}

/** Each Pod with a duplicate, or refused where `preview` admits it. */
function faults(runs: Run[]): string[] {
  return runs.flatMap(({ ns, pod, stored }) => {
    const name = `${ns.name}/${pod.metadata?.name}`;
    if ('refused' in stored) {
      const p = previewOf(providers, ns, pod);
      return p.allowed ? [`${name}: refused, preview admits it: ${stored.refused}`] : [];
    }
    const twice = duplicates(stored);
    return twice.length ? [`${name}: ${twice.join(', ')}`] : [];
  });
}

/** Until a Pod in the probe namespace (no webhook there) is injected, or not: the binding's state in force. */
async function untilBound(cp: ControlPlane, bound: boolean): Promise<void> {
  const pod: Pod = {
    metadata: { name: 'probe' },
    spec: { serviceAccountName: 'app', containers: [{ name: 'c', image: 'i' }] },
  };
  await until(`the policy ${bound ? 'bound' : 'unbound'}`, async () => {
    const stored = await dryRun(cp, PROBE.name, pod);
    if ('refused' in stored) throw new Error(String(stored.refused));
    const injected = (stored.spec?.volumes ?? []).some((v) => v.name === 'aws-iam-token');
    return injected === bound || undefined;
  });
}

describe('mode both with a live webhook: nothing added twice, in either order', () => {
  let cp: ControlPlane;
  let wh: WebhookProcess;
  let runs: Run[];

  before(async () => {
    cp = await startControlPlane({ name: 'policy-both', version: 'newest' });
    await installPolicyMode(cp);
    for (const ns of [...namespaces, PROBE]) {
      await writeNamespace(cp, providers, ns);
      for (const sa of ns.serviceAccounts)
        await cp.request('POST', `/api/v1/namespaces/${ns.name}/serviceaccounts`, sa);
    }
    await untilBound(cp, true);
    wh = await startWebhook(cp, ['--azure-tenant-id', TENANT]);
    const chart = await renderChart({ injection: { mode: 'both' } }, { kubeVersion: '1.36.3' });
    const pods = (
      find(chart.manifests, 'MutatingWebhookConfiguration') as unknown as { webhooks: Record<string, unknown>[] }
    ).webhooks.find((w) => JSON.stringify(w.rules).includes('"pods"'))!;
    await registerWebhook(
      cp,
      wh,
      'wiw-both',
      [
        {
          reinvocationPolicy: pods.reinvocationPolicy as string,
          failurePolicy: pods.failurePolicy as string,
          namespaceSelector: {
            matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [PROBE.name] }],
          },
        },
      ],
      namespaces[0].name,
    );
    runs = namespaces.flatMap((ns) => ns.pods.map((pod) => ({ ns, pod, stored: { refused: 'not yet' } })));
  });
  after(async () => {
    await wh?.stop();
    await cp?.stop();
  });

  test("the chart has both reinvoked (IfNeeded): kube-apiserver runs the policy after the webhook's change", async () => {
    const { policy } = await chartPolicyMode();
    assert.equal((policy as unknown as { spec: { reinvocationPolicy: string } }).spec.reinvocationPolicy, 'IfNeeded');
    const chart = await renderChart({ injection: { mode: 'both' } }, { kubeVersion: '1.36.3' });
    const webhooks = (
      find(chart.manifests, 'MutatingWebhookConfiguration') as unknown as { webhooks: { reinvocationPolicy: string }[] }
    ).webhooks;
    assert.ok(webhooks.length > 0 && webhooks.every((w) => w.reinvocationPolicy === 'IfNeeded'));
  });

  test('the policy first, the webhook after (and the policy reinvoked): nothing twice', async () => {
    const both = await throughAll(cp, (r) => r.pod, runs);
    const admitted = both.filter((r) => !('refused' in r.stored));
    const seen = await decidedSoFar(cp, wh, admitted[0]);
    console.log(
      `mode both, policy first: ${both.length} Pods, ${admitted.length} admitted, ${seen.size} seen by the webhook`,
    );
    assert.ok(seen.size >= 100, `the webhook answered for ${seen.size} Pods`);
    assert.ok(admitted.length >= 150, `${admitted.length} admitted`);
    assert.deepEqual(faults(both), []);
  });

  test('the webhook first on a Pod the policy has not seen, then through both: nothing twice', async () => {
    const { binding } = await chartPolicyMode();
    const name = (binding as unknown as { metadata: { name: string } }).metadata.name;
    assert.equal((await cp.request('DELETE', `${BINDINGS}/${name}`)).status, 200);
    await untilBound(cp, false);
    const webhookOnly = await throughAll(cp, (r) => r.pod, runs);
    const changed = webhookOnly.filter((r) => !('refused' in r.stored) && (r.stored.spec?.volumes?.length ?? 0) > 0);
    assert.ok(changed.length >= 100, `${changed.length} Pods injected by the webhook alone`);
    assert.equal((await cp.request('POST', BINDINGS, binding)).status, 201);
    await untilBound(cp, true);
    const again = await throughAll(cp, (r) => ('refused' in r.stored ? undefined : r.stored), webhookOnly);
    console.log(
      `mode both, webhook first: ${again.filter((r) => !('refused' in r.stored)).length} Pods through both again`,
    );
    assert.deepEqual(faults(again), []);
  });
});
