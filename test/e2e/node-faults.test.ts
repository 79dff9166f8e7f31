// Faults on a real node while Pods are created at a steady rate through kube-apiserver (dryRun
// creates, failurePolicy Fail as the chart sets): the chart with 2 replicas and its
// PodDisruptionBudget, then a burst of creates, a rolling update, a node drain, a replica killed
// with SIGKILL and a rotation of the self-managed serving certificate. Each counts the creates
// sent while the fault was under way and asserts none was refused and every one was mutated; the
// kill refuses the few kube-apiserver sends to the dead replica, and the test asserts that those
// are all it refuses (docs/install.md, "Upgrades, drains and failures").
//
// The drain: this node is the only one, so cordoning it would leave the evicted replicas nowhere
// to go and the PodDisruptionBudget would hold the second eviction for ever. It is modelled as
// `kubectl drain` evicts, without the cordon: each webhook Pod evicted through the Eviction API
// (which honours the PodDisruptionBudget), the refused eviction retried until it is allowed.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { after, before, describe, test, type TestContext } from 'node:test';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, DiscoveryV1Api, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, createServiceAccount } from '../harness/control-plane.ts';
import { sh } from '../harness/node-host.ts';
import { startNode, type NodeCluster } from '../harness/node.ts';
import { until } from '../harness/until.ts';
import { CHART, helm, helmUpgradeInstall } from '../support/chart.ts';
import { FULLNAME, RELEASE, ROLE, SYSTEM_NS } from '../support/node-clouds.ts';
import { NEXT_SINCE_ANNOTATION } from '../../src/tls/certificate-state.ts';

const NS = 'faults';
/** Pod creates per second, sent whether or not the earlier ones have been answered. */
const RATE = 20;
const WEBHOOK = 'app.kubernetes.io/component=webhook';
// Self-managed certificates that rotate every 90 s (validity less renew-before), so the rotation
// test meets one within a cycle; the propagation and resync the webhook requires below that.
const CERTIFICATES = { validitySeconds: 600, renewBeforeSeconds: 510, propagationSeconds: 10, resyncSeconds: 10 };

let node: NodeCluster;
let core: CoreV1Api;
let apps: AppsV1Api;

before(async () => {
  node = await startNode({ name: 'node-faults' });
  core = node.cp.kubeConfig().makeApiClient(CoreV1Api);
  apps = node.cp.kubeConfig().makeApiClient(AppsV1Api);
  await createNamespace(node.cp, NS);
  await createServiceAccount(node.cp, NS, 'aws', { 'eks.amazonaws.com/role-arn': ROLE });
  await createNamespace(node.cp, SYSTEM_NS, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  const [repository, tag] = node.images.webhook.split(/:(?=[^:/]+$)/);
  await helmUpgradeInstall(node.cp, RELEASE, SYSTEM_NS, {
    image: { repository, tag, pullPolicy: 'Never' },
    config: { awsDefaultRegion: 'eu-west-1' },
    certificates: { mode: 'selfManaged', selfManaged: CERTIFICATES },
  });
  await settled();
  // The caBundle is patched: a create reaches the webhook and is mutated.
  await until('a Pod create mutated through the webhook', async () => (await create('first')) || undefined, 60_000);
});

after(async () => {
  await node?.stop();
});

const webhookPods = async (): Promise<V1Pod[]> =>
  (await core.listNamespacedPod({ namespace: SYSTEM_NS, labelSelector: WEBHOOK })).items;
const isReady = (p: V1Pod): boolean =>
  !p.metadata?.deletionTimestamp &&
  (p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false);

/** Exactly two webhook Pods, both Ready, none terminating, of the Deployment's current template. */
async function settled(): Promise<V1Pod[]> {
  return until(
    'two Ready webhook replicas and no other',
    async () => {
      const d = await apps.readNamespacedDeployment({ namespace: SYSTEM_NS, name: FULLNAME });
      const pods = await webhookPods();
      const current =
        (d.status?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 1) &&
        d.status?.updatedReplicas === 2 &&
        d.status?.replicas === 2;
      return current && pods.length === 2 && pods.every(isReady) ? pods : undefined;
    },
    240_000,
  );
}

/** One dryRun Pod create; true when admitted and mutated, else throws or returns false. */
async function create(name: string): Promise<boolean> {
  const pod = await core.createNamespacedPod({
    namespace: NS,
    dryRun: 'All',
    body: {
      metadata: { name },
      spec: { serviceAccountName: 'aws', containers: [{ name: 'app', image: node.images.base }] },
    },
  });
  return (pod.spec?.containers[0].env ?? []).some((e) => e.name === 'AWS_ROLE_ARN' && e.value === ROLE);
}

interface Outcome {
  sentAt: number;
  /** Why it failed: refused by kube-apiserver, or admitted unmutated. */
  error?: string;
}

/** Creates at RATE per second, open loop, until stop(); each outcome with when it was sent. */
function startLoad(prefix: string) {
  const outcomes: Outcome[] = [];
  const pending = new Set<Promise<void>>();
  let sent = 0;
  let skipped = 0;
  const timer = setInterval(() => {
    // A bound on creates in flight, so a stalled webhook cannot pile up thousands.
    if (pending.size >= 10 * RATE) return void skipped++;
    const outcome: Outcome = { sentAt: Date.now() };
    const p = create(`${prefix}-${sent++}`).then(
      (mutated) => {
        if (!mutated) outcome.error = 'admitted without the identity';
      },
      (err: Error & { body?: string }) => {
        outcome.error = refusal(err);
      },
    );
    const tracked = p.finally(() => {
      outcomes.push(outcome);
      pending.delete(tracked);
    });
    pending.add(tracked);
  }, 1000 / RATE);
  return {
    /** Creates answered so far (sent after `since`, when given). */
    answered: (since = 0) => outcomes.filter((o) => o.sentAt > since).length,
    async stop(): Promise<{ outcomes: Outcome[]; skipped: number }> {
      clearInterval(timer);
      await Promise.all(pending);
      return { outcomes: outcomes.sort((a, b) => a.sentAt - b.sentAt), skipped };
    },
  };
}

function refusal(err: Error & { body?: string }): string {
  try {
    return (JSON.parse(err.body ?? '') as { message: string }).message;
  } catch {
    return err.message;
  }
}

interface FaultRun {
  /** Creates sent from the fault's start until it was over. */
  during: Outcome[];
  refused: Outcome[];
  all: Outcome[];
}

/**
 * Runs `fault` with creates flowing before it, through it and after it (RATE creates answered
 * before and after); returns the creates sent while it ran and every refusal.
 */
async function underLoad(
  t: TestContext,
  name: string,
  fault: (answered: () => number) => Promise<void>,
): Promise<FaultRun> {
  const load = startLoad(name);
  // What each webhook Pod closed, terminating ones included, sampled as the fault goes on.
  const closed = new Map<string, Record<string, number>>();
  const sampler = setInterval(() => void sampleClosed(closed), 1000);
  // When each webhook Pod changed: Ready, restarts, terminating (what the Service's endpoints follow).
  const changes: string[] = [];
  const states = new Map<string, string>();
  const watcher = setInterval(async () => {
    for (const p of await webhookPods().catch(() => [])) {
      const state = `ready=${isReady(p)} restarts=${p.status?.containerStatuses?.[0]?.restartCount ?? 0}${p.metadata?.deletionTimestamp ? ' terminating' : ''}`;
      if (states.get(p.metadata!.name!) !== state) changes.push(`${clock()} ${p.metadata!.name} ${state}`);
      states.set(p.metadata!.name!, state);
    }
  }, 250);
  let stopped: Awaited<ReturnType<typeof load.stop>> | undefined;
  let from = 0;
  let to = 0;
  try {
    await until('creates flowing', () => load.answered() >= RATE || undefined, 60_000);
    from = Date.now();
    await fault(load.answered);
    to = Date.now();
    // Sent after the fault, not merely answered after it: creates in flight at its end do not count.
    await until('creates after the fault', () => load.answered(to) >= RATE || undefined, 60_000);
  } finally {
    stopped = await load.stop();
    clearInterval(sampler);
    clearInterval(watcher);
  }
  const all = stopped.outcomes;
  const during = all.filter((o) => o.sentAt >= from && o.sentAt <= to);
  const refused = all.filter((o) => o.error);
  t.diagnostic(
    `${name}: ${all.length} creates, ${during.length} during the fault (${((to - from) / 1000).toFixed(1)} s), ` +
      `${refused.length} refused, ${stopped.skipped} ticks skipped at the in-flight bound`,
  );
  for (const r of refused) t.diagnostic(`  refused at +${r.sentAt - from} ms (${clock(r.sentAt)}): ${r.error}`);
  t.diagnostic(`  webhook Pods, the fault from ${clock(from)}:\n${changes.join('\n')}`);
  await sampleClosed(closed);
  for (const [pod, reasons] of closed) t.diagnostic(`  connections ${pod} closed: ${JSON.stringify(reasons)}`);
  return { during, refused, all };
}

/** Adds what each webhook Pod has closed so far, by reason (wiw_connections_closed_total), to `into`. */
async function sampleClosed(into: Map<string, Record<string, number>>): Promise<void> {
  const pods = await webhookPods().catch(() => []);
  for (const pod of pods.filter((p) => p.status?.podIP)) {
    const body = await fetch(`http://${pod.status!.podIP}:9090/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    const reasons: Record<string, number> = {};
    for (const [, reason, value] of body.matchAll(/^wiw_connections_closed_total\{reason="([a-z_]+)"\} (\d+)/gm))
      reasons[reason] = Number(value);
    if (body) into.set(pod.metadata!.name!, reasons);
  }
}

/** Connections the webhook Pods have closed so far, all reasons. */
async function closedTotal(): Promise<number> {
  const closed = new Map<string, Record<string, number>>();
  await sampleClosed(closed);
  return [...closed.values()].flatMap((r) => Object.values(r)).reduce((a, b) => a + b, 0);
}

/** The container's process on the host (containerd's task of the Pod's webhook container). */
async function containerPid(pod: V1Pod): Promise<number> {
  const id = pod.status!.containerStatuses![0].containerID!.replace(/^containerd:\/\//, '');
  const tasks = await sh('ctr', ['--address', node.containerdSocket, '-n', 'k8s.io', 'tasks', 'ls']);
  const line = tasks.split('\n').find((l) => l.startsWith(`${id} `));
  assert.ok(line, `task ${id} in\n${tasks}`);
  return Number(line.split(/\s+/)[1]);
}

/** kube-apiserver's established connections to each webhook Pod's HTTPS port. */
async function apiserverConnections(pods: V1Pod[]): Promise<Map<string, number>> {
  const out = await sh('ss', ['-Htnp', 'state', 'established']);
  const mine = out.split('\n').filter((l) => l.includes(`pid=${node.cp.pids.kubeApiserver},`));
  return new Map(
    pods.map((p) => [p.metadata!.name!, mine.filter((l) => l.includes(` ${p.status!.podIP}:8443 `)).length]),
  );
}

/** The certificate a webhook Pod presents now, by fingerprint. */
function servedCertificate(pod: V1Pod): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: pod.status!.podIP!, port: 8443, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.destroy();
    });
    socket.once('error', reject);
  });
}

/** Whether the webhook Service's EndpointSlices list `ip` as ready. */
async function endpointReady(ip: string): Promise<boolean> {
  const slices = await node.cp
    .kubeConfig()
    .makeApiClient(DiscoveryV1Api)
    .listNamespacedEndpointSlice({ namespace: SYSTEM_NS, labelSelector: `kubernetes.io/service-name=${FULLNAME}` });
  return slices.items.some((s) =>
    (s.endpoints ?? []).some((e) => e.addresses.includes(ip) && (e.conditions?.ready ?? true)),
  );
}

/** Wall-clock time of day, to the millisecond, for the diagnostics. */
const clock = (ms = Date.now()) => new Date(ms).toISOString().slice(11, 23);

const certSecret = () => core.readNamespacedSecret({ namespace: SYSTEM_NS, name: `${FULLNAME}-certs` });
const pem = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');

describe('faults while Pods are created at a steady rate through kube-apiserver', () => {
  test('after a burst, kube-apiserver keeps connections it dialled but did not use: the webhook closes none of them', async (t) => {
    await settled();
    const before = await closedTotal();
    // 100 creates at once: kube-apiserver dials a connection for each one waiting, and keeps those
    // whose review another connection took first idle in its pool, unused, for later reviews.
    const burst = await Promise.allSettled(Array.from({ length: 100 }, (_, i) => create(`burst-${i}`)));
    assert.deepEqual(
      burst.filter((r) => r.status === 'rejected').map((r) => refusal((r as PromiseRejectedResult).reason)),
      [],
    );
    const pods = await settled();
    const held = [...(await apiserverConnections(pods)).values()].reduce((a, b) => a + b, 0);
    // Then a steady stream for longer than the webhook once gave a silent connection (5 s).
    const run = await underLoad(t, 'after-burst', async (answered) => {
      const from = answered();
      await until('7 s of creates', () => answered() >= from + 7 * RATE || undefined, 60_000);
    });
    const closed = (await closedTotal()) - before;
    t.diagnostic(`kube-apiserver held ${held} connections after the burst; the webhook closed ${closed}`);
    assert.equal(closed, 0, 'the webhook closed connections kube-apiserver holds');
    assert.deepEqual(run.refused, []);
  });

  test('a rolling update (helm upgrade changing a value): no create refused', async (t) => {
    const before = new Set((await webhookPods()).map((p) => p.metadata!.name!));
    const run = await underLoad(t, 'rollout', async () => {
      await helm(
        [
          'upgrade',
          RELEASE,
          CHART,
          '--namespace',
          SYSTEM_NS,
          '--reuse-values',
          '--set-string',
          'podAnnotations.faults/revision=2',
        ],
        { kubeconfig: node.cp.kubeconfigPath },
      );
      const pods = await settled();
      assert.ok(
        pods.every((p) => !before.has(p.metadata!.name!)),
        'both replicas replaced',
      );
    });
    assert.deepEqual(run.refused, []);
    assert.ok(run.during.length >= 2 * RATE, `${run.during.length} creates during the rollout`);
  });

  test('a node drain (each webhook Pod evicted through the Eviction API): the PodDisruptionBudget holds, no create refused', async (t) => {
    const victims = (await webhookPods()).map((p) => p.metadata!.name!);
    let heldByBudget = 0;
    const evict = (name: string) =>
      until(
        `the eviction of ${name}`,
        async () => {
          try {
            await core.createNamespacedPodEviction({
              name,
              namespace: SYSTEM_NS,
              body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: SYSTEM_NS } },
            });
            return true;
          } catch (err) {
            // 429: the PodDisruptionBudget allows no disruption now; kubectl drain retries.
            if ((err as { code?: number }).code !== 429) throw err;
            heldByBudget++;
            return undefined;
          }
        },
        240_000,
      );
    const run = await underLoad(t, 'drain', async () => {
      // As kubectl drain: every Pod at once, each retried while the budget refuses.
      await Promise.all(victims.map(evict));
      const pods = await settled();
      assert.ok(
        pods.every((p) => !victims.includes(p.metadata!.name!)),
        'both replicas replaced',
      );
    });
    assert.ok(heldByBudget > 0, 'the PodDisruptionBudget refused an eviction until a replacement was Ready');
    assert.deepEqual(run.refused, []);
    assert.ok(run.during.length >= 2 * RATE, `${run.during.length} creates during the drain`);
  });

  test('a replica killed with SIGKILL: only the creates kube-apiserver sent to its address before its endpoint left are refused', async (t) => {
    const pods = await settled();
    // The replica kube-apiserver holds connections to, so the kill cuts them.
    const held = await until('kube-apiserver connected to a webhook Pod', async () => {
      await create('connect');
      const connections = await apiserverConnections(pods);
      const [name, count] = [...connections].sort((a, b) => b[1] - a[1])[0];
      return count > 0 ? { name, connections } : undefined;
    });
    t.diagnostic(`kube-apiserver's connections: ${JSON.stringify([...held.connections])}`);
    const victim = pods.find((p) => p.metadata!.name === held.name)!;
    const address = `${victim.status!.podIP}:8443`;
    const restarts = victim.status!.containerStatuses![0].restartCount;
    let killedAt = 0;
    let endpointGoneAt = 0;
    const run = await underLoad(t, 'sigkill', async () => {
      const pid = await containerPid(victim);
      killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      // What kube-apiserver picks an address from: the Service's EndpointSlice, ready endpoints.
      await until(
        "the killed replica's endpoint not ready",
        async () => ((await endpointReady(victim.status!.podIP!)) ? undefined : true),
        60_000,
      );
      endpointGoneAt = Date.now();
      await until(
        'the killed replica restarted and Ready again',
        async () => {
          const p = await core.readNamespacedPod({ namespace: SYSTEM_NS, name: held.name });
          return p.status!.containerStatuses![0].restartCount > restarts && isReady(p) ? p : undefined;
        },
        120_000,
      );
      // The fault lasts past the grace the refusals are allowed below, so the creates underLoad
      // sends after it (RATE of them) all fall after that grace, however fast the restart was.
      await until('the grace after the endpoint left is over', () => Date.now() > endpointGoneAt + 2000 || undefined);
    });
    t.diagnostic(`the endpoint left ${endpointGoneAt - killedAt} ms after the kill`);
    // kube-apiserver v1.34 retries no webhook call that failed on its connection (docs/install.md,
    // "Upgrades, drains and failures"): a review in flight to the killed process, or a connection
    // dialled to its address before the endpoint left, refuses that create. Nothing else may.
    for (const r of run.refused) {
      // Go names the address on a reset or refused connection; a clean close is a bare EOF, or
      // Go's own word for a connection closed under a request it had written.
      const cut = new RegExp(
        `${address.replaceAll('.', '\\.')}: .*(connection reset by peer|connection refused|broken pipe)|: (unexpected )?EOF$|server closed idle connection`,
      );
      assert.match(r.error!, cut);
      // Seen here when the API answers with the EndpointSlice; kube-apiserver's informer may lag.
      assert.ok(r.sentAt <= endpointGoneAt + 2000, `refused ${r.sentAt - endpointGoneAt} ms after the endpoint left`);
    }
    const later = run.all.filter((o) => o.sentAt > endpointGoneAt + 2000);
    assert.ok(later.length >= RATE, `${later.length} creates after the endpoint left`);
    assert.ok(run.during.length >= RATE, `${run.during.length} creates while the replica was down`);
  });

  test('a rotation of the self-managed serving certificate: no create refused', async (t) => {
    const rotating = async () => (await certSecret()).metadata?.annotations?.[NEXT_SINCE_ANNOTATION];
    // Not in the middle of one: this test sees a rotation from its start.
    await until('no rotation under way', async () => ((await rotating()) ? undefined : true), 60_000);
    const servedBefore = pem((await certSecret()).data!['tls.crt']);
    const run = await underLoad(t, 'rotation', async () => {
      const next = await until(
        'a rotation to start (the next CA published)',
        async () => ((await rotating()) ? pem((await certSecret()).data!['next.crt']) : undefined),
        4 * 60_000,
      );
      t.diagnostic(`rotation started (next CA published) by ${clock()}`);
      await until('the next certificate promoted', async () => ((await rotating()) ? undefined : true), 60_000);
      t.diagnostic(`next certificate promoted by ${clock()}`);
      const promoted = pem((await certSecret()).data!['tls.crt']);
      assert.equal(promoted, next);
      assert.notEqual(promoted, servedBefore);
      const fingerprint = new X509Certificate(promoted).fingerprint256;
      await until(
        'both replicas serving the new certificate',
        async () => {
          const served = await Promise.all((await webhookPods()).filter(isReady).map(servedCertificate));
          return served.length === 2 && served.every((f) => f === fingerprint) ? true : undefined;
        },
        60_000,
      );
    });
    const admission = node.cp.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const config = await admission.readMutatingWebhookConfiguration({ name: FULLNAME });
    const bundle = pem(config.webhooks![0].clientConfig.caBundle!);
    const issuer = new X509Certificate(pem((await certSecret()).data!['tls.crt']));
    assert.ok(
      bundle
        .match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)!
        .some((ca) => issuer.checkIssued(new X509Certificate(ca))),
      'the caBundle holds the CA of the certificate now served',
    );
    assert.deepEqual(run.refused, []);
    assert.ok(run.during.length >= RATE, `${run.during.length} creates during the rotation`);
  });
});
