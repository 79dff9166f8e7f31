// node bench/slipped.ts: what finding the Pods that slipped past costs (doctor, and serve's
// --slipped-pods-interval-seconds). Two figures: the decision alone over synthetic Pods in memory
// (Pods judged per second), and the paginated scan of a real kube-apiserver holding --pods Pods
// (Pods read and judged per second, and the heap kept after it: nothing grows with the count).
import { parseArgs } from 'node:util';
import { serviceAccountAnnotations } from '../src/clouds/index.ts';
import { scanPods } from '../src/doctor/slipped.ts';
import { missingInjection } from '../src/doctor/slipped.ts';
import { connectKube } from '../src/kube/connect.ts';
import { slimServiceAccount } from '../src/kube/serviceaccount-cache.ts';
import { createNamespace, createServiceAccount, startControlPlane } from '../test/harness/control-plane.ts';
import { pod, providers, sa } from '../test/support/builders.ts';
import { ROLE_ARN } from '../test/support/identities.ts';

const { values: opts } = parseArgs({
  options: {
    decisions: { type: 'string', default: '100000' },
    pods: { type: 'string', default: '2000' },
  },
});
const P = providers();
const account = sa({ 'eks.amazonaws.com/role-arn': ROLE_ARN });

function decisions(count: number): void {
  const pods = Array.from({ length: 1000 }, (_, i) =>
    pod({ spec: { containers: [{ name: `app-${i % 7}` }, { name: 'sidecar' }] } }),
  );
  const start = performance.now();
  let slipped = 0;
  for (let i = 0; i < count; i++) if (missingInjection(P, pods[i % pods.length], account)) slipped++;
  const seconds = (performance.now() - start) / 1000;
  console.log(
    `decision: ${count} Pods in ${seconds.toFixed(2)} s, ${Math.round(count / seconds)} Pods/s (${slipped} slipped)`,
  );
}

async function scan(count: number): Promise<void> {
  const cp = await startControlPlane({ name: 'bench-slipped' });
  try {
    await createNamespace(cp, 'apps');
    await createServiceAccount(cp, 'apps', 'reader', { 'eks.amazonaws.com/role-arn': ROLE_ARN });
    for (let i = 0; i < count; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, count - i) }, (_, j) =>
          cp.request('POST', '/api/v1/namespaces/apps/pods', {
            metadata: { name: `p${i + j}` },
            spec: { serviceAccountName: 'reader', containers: [{ name: 'app', image: 'busybox' }] },
          }),
        ),
      );
    const api = await connectKube(cp.kubeconfigPath);
    const bounds = serviceAccountAnnotations(P);
    // Each ServiceAccount read once, as doctor reads them (serve looks them up in its cache).
    const read = new Map<string, Promise<ReturnType<typeof slimServiceAccount>>>();
    const lookup = (ns: string, name: string) => {
      const key = `${ns}/${name}`;
      if (!read.has(key))
        read.set(
          key,
          api
            .request('GET', `/api/v1/namespaces/${ns}/serviceaccounts/${name}`)
            .then((raw) => slimServiceAccount(raw as never, bounds)),
        );
      return read.get(key)!;
    };
    for (const pageSize of [100, 500]) {
      globalThis.gc?.();
      const heap = process.memoryUsage().heapUsed;
      let slipped = 0;
      const start = performance.now();
      const pods = await scanPods({
        api,
        providers: P,
        lookup,
        pageSize,
        onSlipped: () => {
          slipped++;
        },
      });
      const seconds = (performance.now() - start) / 1000;
      globalThis.gc?.();
      const kept = process.memoryUsage().heapUsed - heap;
      console.log(
        `scan, ${pageSize} a page: ${pods} Pods in ${seconds.toFixed(2)} s, ${Math.round(pods / seconds)} Pods/s, ${slipped} slipped, heap kept after it ${(kept / 2 ** 20).toFixed(1)} MiB`,
      );
    }
    api.close();
  } finally {
    await cp.stop();
  }
}

decisions(Number(opts.decisions));
await scan(Number(opts.pods));
