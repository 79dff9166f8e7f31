// The heap a webhook keeps, as its metrics show it once garbage is collected. A scrape alone may
// hold tens of MiB of garbage not yet collected; throwaway reviews of 1 MiB (garbage as soon as
// they are answered) make V8 run full collections, and what a cache or a memo keeps survives them.
import { httpsRequest } from './https-client.ts';
import type { WebhookProcess } from './webhook.ts';

/** A 1 MiB review of a Pod of `serviceAccount` in `namespace`, answered and forgotten. */
export function throwawayReview(wh: Pick<WebhookProcess, 'url' | 'caPem'>, namespace: string, serviceAccount: string) {
  const body = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'settle',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      namespace,
      operation: 'CREATE',
      object: {
        metadata: { name: 'settle', annotations: { 'example.com/large': 'v'.repeat(2 ** 20) } },
        spec: { serviceAccountName: serviceAccount, containers: [{ name: 'app', image: 'busybox' }] },
      },
    },
  });
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  return () => httpsRequest(`${wh.url}/mutate`, { method: 'POST', ca: wh.caPem, body, headers });
}
