// The benchmarks' review stream: Pods of realistic size and shape (1 to 10 containers, 5 to 40 KB
// each, environment variables, probes, volumes), the same every run (a seeded generator).

/** What each Pod of the stream names: its namespace, ServiceAccount and labels. */
export interface PodPlace {
  namespace: string;
  serviceAccount: string;
  labels?: Record<string, string>;
}

/** Deterministic pseudo-random numbers, so every run sends the same mix. */
export function rng(seed: number): () => number {
  return () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

/** The Pod of an AdmissionReview, as a Deployment's ReplicaSet creates it. */
export function benchPod(i: number, place: PodPlace, rand: () => number): Record<string, unknown> {
  const containers = 1 + Math.floor(rand() * 10);
  const targetBytes = 5_000 + Math.floor(rand() * 35_000);
  const perContainer = Math.max(0, Math.floor(targetBytes / containers) - 600);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `app-${i}-`,
      namespace: place.namespace,
      labels: { app: `app-${i}`, 'pod-template-hash': '5d8f7c9b4', ...place.labels },
      annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-01T00:00:00Z' },
    },
    spec: {
      serviceAccountName: place.serviceAccount,
      containers: Array.from({ length: containers }, (_, c) => ({
        name: `c${c}`,
        image: `registry.example.com/team/app-${c}:1.2.3`,
        args: ['--config=/etc/app/config.yaml', '--verbose'],
        ports: [{ containerPort: 8080 + c, protocol: 'TCP' }],
        resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
        env: Array.from({ length: Math.max(1, Math.floor(perContainer / 60)) }, (_, e) => ({
          name: `SETTING_${e}`,
          value: `value-${e}-${'x'.repeat(30)}`,
        })),
        volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
        readinessProbe: { httpGet: { path: '/ready', port: 8080 + c } },
      })),
      volumes: [{ name: 'config', configMap: { name: 'app-config' } }],
    },
  };
}

/** A CREATE AdmissionReview (admission.k8s.io/v1) of `pod`, serialised. */
export function podReview(pod: Record<string, unknown>, namespace: string, uid: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid,
        kind: { group: '', version: 'v1', kind: 'Pod' },
        resource: { group: '', version: 'v1', resource: 'pods' },
        requestKind: { group: '', version: 'v1', kind: 'Pod' },
        requestResource: { group: '', version: 'v1', resource: 'pods' },
        namespace,
        operation: 'CREATE',
        userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
        object: pod,
        oldObject: null,
        dryRun: false,
        options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
      },
    }),
  );
}

/** `count` reviews; `place(i)` says where Pod i lives and which ServiceAccount it runs as. */
export function makeReviews(count: number, place: (i: number) => PodPlace): Buffer[] {
  const rand = rng(42);
  return Array.from({ length: count }, (_, i) => {
    const p = place(i);
    return podReview(benchPod(i, p, rand), p.namespace, `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`);
  });
}
