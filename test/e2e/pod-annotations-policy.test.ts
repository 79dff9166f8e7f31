// The annotations the webhook writes onto a Pod (its credential files, projected by downward-API
// volumes, and its injection record) cannot change after admission (issue 28, finding 7): the
// chart's ValidatingAdmissionPolicy, installed as helm renders it on a real kube-apiserver,
// refuses a tenant's PATCH of each one (modified, removed, added where absent), on the Pod and on
// its status subresource, while the kubelet's status updates and ordinary label and annotation
// changes pass. Its list of annotations is the code's: every key the webhook writes, for every
// cloud and mode, and nothing else.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';
import { PROVIDER_NAMES } from '../../src/clouds/registry.ts';
import { apply, providers, sa } from '../support/builders.ts';
import { createNamespace, createServiceAccount, startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { renderChart, type Manifest } from '../support/chart.ts';
import { registerWebhook, startWebhook, until, type WebhookProcess } from '../support/webhook.ts';
import {
  BILLING_PROVIDER,
  CLIENT,
  GCP_EMAIL,
  ROLE_ARN,
  roleArn,
  TENANT,
  WIF_PROVIDER,
} from '../support/identities.ts';

// --- the policy's list against what the code writes -----------------------------------------

interface Owned {
  keys: string[];
  prefixes: string[];
}

/** The policy and binding the chart renders with its defaults (none at all is a finding). */
async function chartPolicies(): Promise<Manifest[]> {
  const { manifests } = await renderChart({});
  return manifests.filter((m) => m.kind.startsWith('ValidatingAdmissionPolicy') && /pod-annotations/.test(m.metadata.name));
}

/** The owned keys and prefixes, read off the policy's `keys` and `prefixes` variables. */
function ownedOf(policy: Manifest | undefined): Owned {
  const variable = (name: string) =>
    JSON.parse(
      (policy?.spec.variables as { name: string; expression: string }[] | undefined)?.find((v) => v.name === name)
        ?.expression ?? (name === 'keys' ? '{}' : '[]'),
    );
  return { keys: Object.keys(variable('keys')).sort(), prefixes: variable('prefixes') };
}

const ownedBy = (owned: Owned, key: string) => owned.keys.includes(key) || owned.prefixes.some((p) => key.startsWith(p));

const podIdentityFile = (() => {
  const file = join(mkdtempSync(join(tmpdir(), 'wiw-vap-pod-identity-')), 'associations.json');
  writeFileSync(file, JSON.stringify({ identities: [{ namespace: 'team-a', serviceAccount: 'pod-identity' }] }));
  return file;
})();

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
    annotations: { 'gcp.auth.fluxcd.io/workload-identity-provider': WIF_PROVIDER, 'cloud.google.com/injection-mode': 'gcloud' },
  },
  {
    name: 'GCP pfnet dialect, gcloud mode',
    cloud: 'gcp',
    annotations: { 'cloud.google.com/workload-identity-provider': WIF_PROVIDER, 'cloud.google.com/service-account-email': GCP_EMAIL },
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

describe("the policy's annotations are the ones the webhook writes", () => {
  test('every cloud has a scenario, and each scenario is injected', () => {
    assert.deepEqual([...new Set(SCENARIOS.map((s) => s.cloud))].sort(), [...PROVIDER_NAMES].sort());
    for (const s of SCENARIOS) assert.ok(written(s).written.includes('workload-identity-webhook.io/injected'), s.name);
  });

  test('every annotation written or projected is in the policy; every key and prefix of the policy is written', async () => {
    const [policy] = await chartPolicies();
    const owned = ownedOf(policy);
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
});
