// The JWKS kube-apiserver publishes, computed from the same files it reads
// (--service-account-key-file): same key ids, same algorithms, so a static copy matches.
import { createHash, createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { JWK } from 'jose';
import { errorMessage, ioProblem, WebhookError } from '../errors.ts';
import type { Jwks } from './discovery.ts';

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]+?-----END \1-----/g;

/** Every public key of PEM files: public keys (PKIX, PKCS#1), private keys (their public half), certificates. */
export function jwksFromKeyFiles(files: readonly string[]): Jwks {
  const keys: Jwks['keys'] = [];
  const seen = new Set<string>();
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new WebhookError('WIW_BAD_INPUT', `cannot read key file ${file}: ${ioProblem(err)}`);
    }
    const blocks = [...text.matchAll(PEM_BLOCK)];
    if (blocks.length === 0) throw new WebhookError('WIW_BAD_INPUT', `key file ${file} holds no PEM block`);
    for (const [pem, label] of blocks) {
      const jwk = publicJwk(publicKeyOf(pem, label, file), file);
      if (seen.has(jwk.kid)) continue;
      seen.add(jwk.kid);
      keys.push(jwk);
    }
  }
  return { keys };
}

function publicKeyOf(pem: string, label: string, file: string): KeyObject {
  try {
    if (label === 'CERTIFICATE') return new X509Certificate(pem).publicKey;
    return createPublicKey(pem);
  } catch (err) {
    throw new WebhookError('WIW_BAD_INPUT', `key file ${file}: the ${label} block is not a key: ${errorMessage(err)}`);
  }
}

/** Kubernetes' key id: base64url(SHA-256(PKIX DER of the public key)), as keyIDFromPublicKey computes it. */
function kubernetesKeyId(key: KeyObject): string {
  return createHash('sha256')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest('base64url');
}

const EC_ALGORITHMS: Record<string, string> = { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512' };

function publicJwk(key: KeyObject, file: string): JWK & { kid: string } {
  const exported = key.export({ format: 'jwk' }) as JWK;
  const kid = kubernetesKeyId(key);
  if (exported.kty === 'RSA') return { use: 'sig', kty: 'RSA', kid, alg: 'RS256', n: exported.n, e: exported.e };
  const alg = exported.kty === 'EC' ? EC_ALGORITHMS[exported.crv ?? ''] : undefined;
  if (!alg)
    throw new WebhookError(
      'WIW_BAD_INPUT',
      `key file ${file}: a ${exported.kty} ${exported.crv ?? ''} key cannot sign ServiceAccount tokens (RSA or EC P-256/384/521)`,
    );
  return { use: 'sig', kty: 'EC', kid, crv: exported.crv, alg, x: exported.x, y: exported.y };
}
