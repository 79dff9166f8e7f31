import { isIP } from 'node:net';
import selfsigned from 'selfsigned';

interface CertificateSet {
  caPem: string;
  caKeyPem: string;
  certPem: string;
  keyPem: string;
}

/**
 * A CA and a serving certificate it signs, for development and self-managed installs. SHA-256
 * explicitly: selfsigned defaults to SHA-1, which kube-apiserver refuses.
 */
export async function generateCertificates(hosts: readonly string[], validDays = 365): Promise<CertificateSet> {
  return generateCertificatesValidFor(hosts, validDays * 86_400);
}

/** The same, valid for `validSeconds` from now (self-managed rotation; tests rotate in seconds). */
export async function generateCertificatesValidFor(
  hosts: readonly string[],
  validSeconds: number,
): Promise<CertificateSet> {
  // Backdated a minute: a replica or API server whose clock runs slightly behind still accepts it.
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + validSeconds * 1000);
  const ca = await selfsigned.generate([{ name: 'commonName', value: 'workload-identity-webhook-ca' }], {
    algorithm: 'sha256',
    keySize: 2048,
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const altNames = hosts.map((h) => (isIP(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h }));
  const serving = await selfsigned.generate([{ name: 'commonName', value: hosts[0] ?? 'workload-identity-webhook' }], {
    algorithm: 'sha256',
    keySize: 2048,
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  return { caPem: ca.cert, caKeyPem: ca.private, certPem: serving.cert, keyPem: serving.private };
}
