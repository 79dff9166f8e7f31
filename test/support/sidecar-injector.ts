// A second mutating webhook standing in for a service mesh: it appends a sidecar container
// (and, if asked, moves the Pod to another ServiceAccount), which the workload-identity webhook
// must take into account when it is reinvoked.
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { generateCertificates } from '../../src/tls/self-signed.ts';

export async function startSidecarInjector(
  sidecarName = 'mesh-proxy',
  options: { serviceAccountName?: string; extraPatch?: object[]; noSidecar?: boolean } = {},
) {
  const certs = await generateCertificates(['127.0.0.1']);
  const seen: Record<string, unknown>[] = [];
  const app = Fastify({ https: { cert: certs.certPem, key: certs.keyPem } });
  app.post('/mutate', async (req) => {
    const review = req.body as {
      request: {
        uid: string;
        object: { metadata?: { name?: string }; spec: { serviceAccountName?: string; containers: { name: string }[] } };
      };
    };
    const pod = review.request.object;
    seen.push({ msg: 'admission', name: pod.metadata?.name });
    const patch: object[] =
      options.noSidecar || pod.spec.containers.some((c) => c.name === sidecarName)
        ? []
        : [{ op: 'add', path: '/spec/containers/-', value: { name: sidecarName, image: 'mesh/proxy:1' } }];
    // Other work of an earlier webhook (a proxy, a CA bundle).
    if (options.extraPatch) patch.push(...options.extraPatch);
    if (options.serviceAccountName && pod.spec.serviceAccountName !== options.serviceAccountName) {
      patch.push({ op: 'replace', path: '/spec/serviceAccountName', value: options.serviceAccountName });
    }
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: {
        uid: review.request.uid,
        allowed: true,
        ...(patch.length
          ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') }
          : {}),
      },
    };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    caPem: certs.caPem,
    logs: () => seen,
    stop: () => app.close(),
  };
}
