// The two corpora bench:peers sends, each to every server, for each cloud:
// - `bench`: generated Pods of 1 to 10 containers and 5 to 40 KB (mean 26 KB), hundreds of
//   environment variables each (reviews.ts), two of three running as a ServiceAccount with the
//   cloud's identity. Large Pods: what decoding the review costs weighs most.
// - `charts`: the Pods of real charts the differential harness renders (test/fixtures/peer-diff,
//   external-dns, cert-manager, velero, ...; mean 2 KB), as their own ServiceAccounts. Typical
//   Pods: what a server costs per review whatever its size weighs most.
// A Go server's JSON decoding costs several times Node's per byte and its fixed cost per review
// is lower, so the peers' ratio to serve differs between the two by a factor of three: each is
// reported, named, never one alone (docs/figures.md explains it).
import { loadCorpus } from '../../test/support/peer-diff.ts';
import { TENANT as AZURE_TENANT } from '../../test/support/identities.ts';
import { makeReviews, podReview, type PodPlace } from './reviews.ts';

export type Cloud = 'aws' | 'azure';
export type Corpus = 'bench' | 'charts';
export const CORPORA: Corpus[] = ['bench', 'charts'];

export interface StreamReviews {
  reviews: Buffer[];
  /**
   * Whether review i's ServiceAccount carries the cloud's identity. For `bench` its Pod must be
   * mutated; the charts include edge cases (a malformed role ARN, a Pod that sets its own
   * variables) the servers answer differently (docs/compatibility.md), so there only some must be.
   */
  mutated: boolean[];
}

// ------------------------------------------------------------------ bench: generated Pods

export const NAMESPACES = 200;
const ROLE = { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::111122223333:role/bench' };
const AZURE = {
  'azure.workload.identity/client-id': '8f3b2c1a-7d4e-4f5a-9b6c-0d1e2f3a4b5c',
  'azure.workload.identity/tenant-id': AZURE_TENANT,
};
export const PROBE_IDENTITY = { ...ROLE, ...AZURE };

/** ServiceAccount i: a third for AWS, a third for Azure, a third without identity; all applied by kubectl. */
export function serviceAccount(i: number) {
  const name = `sa-${i}`;
  const namespace = `team-${i % NAMESPACES}`;
  const identity = [ROLE, AZURE, {}][i % 3];
  const applied = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { annotations: identity, name, namespace, labels: { 'app.kubernetes.io/part-of': 'bench' } },
  });
  return {
    namespace,
    body: {
      metadata: {
        name,
        labels: { 'app.kubernetes.io/part-of': 'bench' },
        annotations: { ...identity, 'kubectl.kubernetes.io/last-applied-configuration': applied },
      },
    },
  };
}

/**
 * Pods of the first ServiceAccounts, two of three with the cloud's identity, the third running as
 * a ServiceAccount without one. Azure's Pods carry the label its peer's objectSelector asks for
 * (the API server sends it no other Pod).
 */
function benchPlace(cloud: Cloud, serviceAccounts: number, i: number): PodPlace {
  const group = i % Math.max(1, Math.floor(Math.min(serviceAccounts, 1800) / 3));
  const index = 3 * group + (i % 3 === 2 ? 2 : cloud === 'aws' ? 0 : 1);
  return {
    namespace: `team-${index % NAMESPACES}`,
    serviceAccount: `sa-${index}`,
    labels: cloud === 'azure' ? { 'azure.workload.identity/use': 'true' } : undefined,
  };
}

// ------------------------------------------------------------------ charts: real charts' Pods

const IDENTITY_KEY: Record<Cloud, string> = {
  aws: 'eks.amazonaws.com/role-arn',
  azure: 'azure.workload.identity/client-id',
};

const chartFiles = (cloud: Cloud) => loadCorpus().filter((c) => c.cloud === cloud);

/** The namespaces and ServiceAccounts the charts' Pods run as, to create (POST bodies). */
export function chartObjects(clouds: Cloud[]): { path: string; body: unknown }[][] {
  const files = clouds.flatMap(chartFiles);
  return [
    files.map((c) => ({ path: '/api/v1/namespaces', body: { metadata: { name: c.namespace } } })),
    files.flatMap((c) =>
      c.serviceAccounts.map((sa) => ({ path: `/api/v1/namespaces/${c.namespace}/serviceaccounts`, body: sa })),
    ),
  ];
}

/** The namespaces' ServiceAccounts as the core sees them (for its lookups and the policy's parameters). */
export function chartAccounts(clouds: Cloud[]) {
  return clouds.flatMap(chartFiles).flatMap((c) =>
    c.serviceAccounts.map((sa) => ({
      namespace: c.namespace,
      name: sa.metadata.name,
      uid: '',
      annotations: sa.metadata.annotations ?? {},
    })),
  );
}

/**
 * The charts' Pods for a cloud's stream (Azure: only those its objectSelector's label sends) with
 * their namespace, and whether their ServiceAccount carries the cloud's identity.
 */
export function chartPods(cloud: Cloud): { namespace: string; pod: Record<string, unknown>; mutated: boolean }[] {
  return chartFiles(cloud).flatMap((file) =>
    file.pods
      .filter((pod) => cloud !== 'azure' || pod.metadata?.labels?.['azure.workload.identity/use'] === 'true')
      .map((pod) => {
        const sa = file.serviceAccounts.find((s) => s.metadata.name === pod.spec?.serviceAccountName);
        const mutated = sa?.metadata.annotations?.[IDENTITY_KEY[cloud]] !== undefined;
        return { namespace: file.namespace, pod: pod as unknown as Record<string, unknown>, mutated };
      }),
  );
}

function chartReviews(cloud: Cloud): StreamReviews {
  const reviews: Buffer[] = [];
  const mutated: boolean[] = [];
  for (const file of chartFiles(cloud))
    for (const pod of file.pods) {
      // The API server sends the Azure peer only the Pods its objectSelector names.
      if (cloud === 'azure' && pod.metadata?.labels?.['azure.workload.identity/use'] !== 'true') continue;
      const sa = file.serviceAccounts.find((s) => s.metadata.name === pod.spec?.serviceAccountName);
      mutated.push(sa?.metadata.annotations?.[IDENTITY_KEY[cloud]] !== undefined);
      const uid = `00000000-0000-0000-0001-${String(reviews.length).padStart(12, '0')}`;
      reviews.push(podReview(pod as unknown as Record<string, unknown>, file.namespace, uid));
    }
  return { reviews, mutated };
}

// ------------------------------------------------------------------ both

export function streamReviews(cloud: Cloud, corpus: Corpus, serviceAccounts: number): StreamReviews {
  if (corpus === 'charts') return chartReviews(cloud);
  const reviews = makeReviews(300, (i) => benchPlace(cloud, serviceAccounts, i));
  return { reviews, mutated: reviews.map((_, i) => i % 3 !== 2) };
}

/** "26 KB mean (5 to 40), 300 Pods" for the header. */
export function describeCorpus(corpus: Corpus, s: StreamReviews): string {
  const kb = s.reviews.map((r) => r.length / 1000).sort((a, b) => a - b);
  const mean = kb.reduce((a, b) => a + b, 0) / kb.length;
  const what =
    corpus === 'bench'
      ? 'generated Pods (bench/support/reviews.ts), a third as a ServiceAccount without identity'
      : `Pods of real charts (test/fixtures/peer-diff/corpus), ${s.mutated.filter(Boolean).length} with identity`;
  return `${corpus}: ${s.reviews.length} ${what}; reviews of ${kb[0].toFixed(1)} to ${kb.at(-1)?.toFixed(1)} KB, mean ${mean.toFixed(1)}, median ${kb[kb.length >> 1].toFixed(1)}`;
}
