// The policy mode against `preview` (issue 32 item 3): the MutatingAdmissionPolicy alone (no webhook)
// on the newest kube-apiserver, its parameters rendered by the core from at least 200
// ServiceAccounts of the three clouds, the corpus's Pod shapes (init containers, native sidecars,
// Windows, containers that set the variables themselves) created with dryRun, each compared with
// `preview`'s Pod: every difference is a row of docs/compatibility.md's policy mode section.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { until } from '../harness/until.ts';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import type { Pod } from '../../src/kube/types.ts';
import { loadCorpus } from '../support/peer-diff.ts';
import {
  comparePod,
  dryRun,
  installPolicyMode,
  policyNamespaces,
  writeNamespace,
  type Compared,
  type PolicyNamespace,
} from '../support/policy-mode.ts';
import { POLICY_ROWS } from '../support/policy-mode-rows.ts';

const ROOT = join(import.meta.dirname, '../..');
const TENANT = '11111111-2222-4333-8444-555555555555';
const providers = createProviders(loadConfig(new Map([['azure-tenant-id', TENANT]]), {}));
const namespaces = policyNamespaces(loadCorpus(), 70);

/** The policy's section of docs/compatibility.md. */
function policySection(): string {
  const doc = readFileSync(join(ROOT, 'docs/compatibility.md'), 'utf8');
  const start = doc.indexOf('## The policy mode');
  assert.ok(start >= 0, 'docs/compatibility.md has a section "## The policy mode"');
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

/** Its rows' ids. */
function documentedRows(): string[] {
  return [...policySection().matchAll(/^\| `([a-z0-9.-]+)` \|/gm)].map((m) => m[1]);
}

interface Unexplained {
  pod: string;
  path: string;
  ours: unknown;
  theirs: unknown;
}

describe('the policy mode beside preview, on the newest kube-apiserver', () => {
  let cp: ControlPlane;
  const compared: Compared[] = [];

  before(async () => {
    cp = await startControlPlane({ name: 'policy-mode', version: 'newest' });
    await installPolicyMode(cp);
    for (const ns of namespaces) await writeNamespace(cp, providers, ns);
    await untilPolicyServes(cp, namespaces);
    for (const ns of namespaces) {
      // A few at a time: the machine is shared.
      for (let i = 0; i < ns.pods.length; i += 8)
        compared.push(...(await Promise.all(ns.pods.slice(i, i + 8).map((p) => comparePod(cp, providers, ns, p)))));
    }
  });
  after(() => cp?.stop());

  test('at least 200 ServiceAccounts over the three clouds, and the corpus shapes under them', () => {
    const accounts = namespaces.flatMap((n) => n.serviceAccounts.map(() => n.cloud));
    assert.ok(accounts.length >= 200, `${accounts.length} ServiceAccounts`);
    for (const cloud of ['aws', 'azure', 'gcp']) assert.ok(accounts.filter((c) => c === cloud).length >= 60, cloud);
    const pods = compared.map((c) => c.pod);
    assert.ok(
      pods.some((p) => p.spec?.initContainers?.some((c) => c.restartPolicy === 'Always')),
      'a native sidecar',
    );
    assert.ok(
      pods.some((p) => p.spec?.nodeSelector?.['kubernetes.io/os'] === 'windows'),
      'a Windows Pod',
    );
  });

  test('every difference from preview is a row of docs/compatibility.md, and every row is met', () => {
    const met = new Set<string>();
    const unexplained: Unexplained[] = [];
    for (const c of compared)
      for (const d of c.differences) {
        const serviceAccount = accountOf(c);
        const row = POLICY_ROWS.find((r) => r.explains(d, { pod: c.pod, serviceAccount }));
        if (row) met.add(row.id);
        else unexplained.push({ pod: `${c.namespace}/${c.pod.metadata?.name}`, ...d });
      }
    const pods = compared.length;
    const identical = compared.filter((c) => c.differences.length === 0).length;
    const unlisted = new Set(unexplained.map((u) => u.pod)).size;
    const figures = `${pods} Pods: ${identical} identical, ${pods - identical - unlisted} only listed rows, ${unlisted} unlisted`;
    console.log(`policy mode: ${figures}; rows met: ${[...met].sort().join(', ')}`);
    assert.deepEqual(unexplained, [], unexplained.map((u) => `${u.pod} ${u.path}`).join('\n'));
    assert.deepEqual([...met].sort(), POLICY_ROWS.map((r) => r.id).sort(), 'every row is met by a Pod');
    assert.deepEqual(documentedRows().sort(), POLICY_ROWS.map((r) => r.id).sort(), "docs/compatibility.md's rows");
    assert.ok(policySection().includes(figures), `docs/compatibility.md's policy mode section says "${figures}"`);
  });

  test('idempotent: the policy run again on its own Pod adds nothing', () => {
    const changed = compared.filter((c) => c.reinvoked.length > 0);
    assert.deepEqual(
      changed.map((c) => `${c.namespace}/${c.pod.metadata?.name}: ${c.reinvoked.map((d) => d.path).join(', ')}`),
      [],
    );
    assert.ok(compared.filter((c) => !('refused' in c.policy)).length >= 400);
  });

  test('mode both: neither adds what the other added (the webhook adds only its record)', () => {
    const policyAdded = compared.filter((c) => c.policyAfterWebhook.length > 0);
    assert.deepEqual(
      policyAdded.map(
        (c) => `${c.namespace}/${c.pod.metadata?.name}: ${c.policyAfterWebhook.map((d) => d.path).join(', ')}`,
      ),
      [],
    );
    // Rows other than the record are Pod-level reads the policy does not make: the webhook,
    // second, still completes those Pods (a proxy sidecar, a container's own identity).
    const others = new Set(['policy-no-injection-record']);
    for (const c of compared) {
      if ('refused' in c.policy) continue;
      const onlyRecord = c.differences.every((d) =>
        POLICY_ROWS.some((r) => others.has(r.id) && r.explains(d, { pod: c.pod, serviceAccount: accountOf(c) })),
      );
      if (!onlyRecord) continue;
      const ops = c.webhookAfterPolicy.filter(
        (op) =>
          op !== 'add /metadata/annotations/workload-identity-webhook.io~1injected' &&
          op !== 'add /metadata/annotations',
      );
      assert.deepEqual(ops, [], `${c.namespace}/${c.pod.metadata?.name}`);
    }
  });
});

function accountOf(c: Compared): Record<string, string> {
  const name = c.pod.spec?.serviceAccountName || c.pod.spec?.serviceAccount || 'default';
  const ns = namespaces.find((n) => n.name === c.namespace)!;
  return ns.serviceAccounts.find((s) => s.metadata.name === name)?.metadata.annotations ?? {};
}

/** The policy and the parameters reach admission through informers: a Pod of an identity gets it. */
async function untilPolicyServes(cp: ControlPlane, all: PolicyNamespace[]): Promise<void> {
  for (const ns of all) {
    const sa = ns.serviceAccounts.find((s) => s.metadata.name.startsWith(`${ns.cloud}-sa-`));
    if (!sa) continue;
    const probe: Pod = {
      metadata: { name: 'probe', labels: { 'azure.workload.identity/use': 'true' } },
      spec: { serviceAccountName: sa.metadata.name, containers: [{ name: 'c', image: 'i' }] },
    };
    await until(`the policy injects in ${ns.name}`, async () => {
      const stored = await dryRun(cp, ns.name, probe);
      return ('refused' in stored ? undefined : stored.spec?.volumes?.length) || undefined;
    });
  }
}
