// A reinvoked admission (reinvocationPolicy IfNeeded, or the policy mode's `both`) sees the Pod as
// the API server serialises it, without empty env values: the webhook's own setup container, one
// of whose variables is empty, is still its own and not a conflict.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fastJsonPatch from 'fast-json-patch';
import { createProviders } from '../../src/clouds/index.ts';
import { loadConfig } from '../../src/config.ts';
import type { Pod } from '../../src/kube/types.ts';
import { mutatePod } from '../../src/mutate/pod.ts';

const providers = createProviders(loadConfig(new Map(), {}));
// pfnet's README email: no project in it, so CLOUDSDK_CORE_PROJECT is "" (as pfnet writes it).
const serviceAccount = {
  namespace: 'ns',
  name: 'app-x',
  uid: '',
  annotations: {
    'cloud.google.com/workload-identity-provider':
      'projects/12345/locations/global/workloadIdentityPools/on-prem-kubernetes/providers/this-cluster',
    'cloud.google.com/service-account-email': 'app-x@project.iam.googleapis.com',
    'cloud.google.com/injection-mode': 'gcloud',
  },
};

test('the gcloud setup container with an empty variable, reinvoked as the API server sends it: nothing to add, no conflict', () => {
  const pod: Pod = { metadata: { name: 'p' }, spec: { serviceAccountName: 'app-x', containers: [{ name: 'app' }] } };
  const first = mutatePod(providers, { pod, namespace: 'ns', serviceAccount });
  assert.ok(first.allowed);
  const mutated = fastJsonPatch.applyPatch(structuredClone(pod), first.patch as fastJsonPatch.Operation[]).newDocument;
  const setup = mutated.spec!.initContainers![0];
  assert.ok(
    setup.env!.some((e) => e.value === ''),
    'the setup container has an empty variable',
  );
  // Go's omitempty: an empty value is not sent.
  const sent = JSON.parse(JSON.stringify(mutated, (k, v) => (k === 'value' && v === '' ? undefined : v))) as Pod;
  const again = mutatePod(providers, { pod: sent, namespace: 'ns', serviceAccount });
  assert.ok(again.allowed, again.allowed ? '' : again.denial.message);
  assert.deepEqual(
    again.patch.filter((op) => !op.path.startsWith('/metadata/annotations')),
    [],
    'nothing but the record',
  );
});
