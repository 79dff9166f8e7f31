// Certificates for a throwaway control plane. EC P-256 keys: generating them is instant,
// where 2048-bit RSA costs ~100 ms each. SHA-256 signatures (kube-apiserver rejects SHA-1).
import { generate } from 'selfsigned';

export interface KeyPair {
  cert: string;
  key: string;
}

const opts = { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' } as const;

export async function createCa(commonName: string): Promise<KeyPair> {
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    ...opts,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** A serving certificate for the given DNS names and IP addresses, signed by `ca`. */
export async function createServingCert(
  ca: KeyPair,
  commonName: string,
  hosts: { dns?: string[]; ips?: string[] },
): Promise<KeyPair> {
  const altNames = [
    ...(hosts.dns ?? []).map((value) => ({ type: 2 as const, value })),
    ...(hosts.ips ?? []).map((ip) => ({ type: 7 as const, ip })),
  ];
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    ...opts,
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** A client certificate: Kubernetes maps CN to the user name and each O to a group. */
export async function createClientCert(ca: KeyPair, user: string, groups: string[] = []): Promise<KeyPair> {
  const pems = await generate(
    [{ name: 'commonName', value: user }, ...groups.map((value) => ({ name: 'organizationName', value }))],
    {
      ...opts,
      ca,
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        { name: 'extKeyUsage', clientAuth: true },
      ],
    },
  );
  return { cert: pems.cert, key: pems.private };
}
