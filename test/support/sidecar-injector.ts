// A second mutating webhook standing in for a service mesh: it appends a sidecar container,
// which the workload-identity webhook must complete when it is reinvoked.
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { generateCertificates } from '../../src/tls/self-signed.ts';

export async function startSidecarInjector(sidecarName = 'mesh-proxy') {
  const certs = await generateCertificates(['127.0.0.1']);
  const seen: Record<string, unknown>[] = [];
  const app = Fastify({ https: { cert: certs.certPem, key: certs.keyPem } });
  app.post('/mutate', async (req) => {
    const review = req.body as { request: { uid: string; object: { metadata?: { name?: string }; spec: { containers: { name: string }[] } } } };
    const pod = review.request.object;
    seen.push({ msg: 'admission', name: pod.metadata?.name });
    const patch = pod.spec.containers.some((c) => c.name === sidecarName)
      ? []
      : [{ op: 'add', path: '/spec/containers/-', value: { name: sidecarName, image: 'mesh/proxy:1' } }];
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: {
        uid: review.request.uid,
        allowed: true,
        ...(patch.length ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') } : {}),
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
