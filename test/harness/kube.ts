// Small helpers over a started control plane: namespaces, ServiceAccounts and their tokens.
import { CoreV1Api } from '@kubernetes/client-node';
import type { V1Namespace, V1ServiceAccount } from '@kubernetes/client-node';
import { createLocalJWKSet, jwtVerify } from 'jose';
import type { JWTPayload } from 'jose';
import type { KubeConfig } from '@kubernetes/client-node';

/** What these helpers use of a started control plane (control-plane.ts re-exports them). */
interface ControlPlane {
  issuer: string;
  kubeConfig(): KubeConfig;
  request(method: string, path: string, body?: unknown): Promise<{ status: number; body: string }>;
}

export function createNamespace(cp: ControlPlane, name: string, labels?: Record<string, string>): Promise<V1Namespace> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  return core.createNamespace({ body: { metadata: { name, labels } } });
}

export function createServiceAccount(
  cp: ControlPlane,
  namespace: string,
  name: string,
  annotations?: Record<string, string>,
): Promise<V1ServiceAccount> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  return core.createNamespacedServiceAccount({ namespace, body: { metadata: { name, annotations } } });
}

/** A ServiceAccount token from the TokenRequest API (not bound to a pod). */
export async function requestToken(
  cp: ControlPlane,
  namespace: string,
  serviceAccount: string,
  audience: string | string[],
  expirationSeconds: number,
): Promise<string> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const res = await core.createNamespacedServiceAccountToken({
    namespace,
    name: serviceAccount,
    body: { spec: { audiences: [audience].flat(), expirationSeconds } },
  });
  if (!res.status?.token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return res.status.token;
}

/**
 * Verifies a ServiceAccount JWT the way an external relying party (e.g. AWS STS) would: keys from
 * the issuer's OIDC discovery, then signature, issuer, audience, subject and expiry.
 * Throws (a jose error) if any check fails; returns the payload otherwise.
 */
export async function verifyServiceAccountToken(
  cp: ControlPlane,
  token: string,
  expected: { audience: string; namespace: string; name: string },
): Promise<JWTPayload> {
  const discovery = JSON.parse((await getOk(cp, '/.well-known/openid-configuration')).body) as {
    issuer: string;
    jwks_uri: string;
  };
  if (discovery.issuer !== cp.issuer) {
    throw new Error(`discovery issuer ${discovery.issuer} is not the configured ${cp.issuer}`);
  }
  // jwks_uri is built from the issuer URL; the API server serves it, so ask it directly.
  const jwks = JSON.parse((await getOk(cp, new URL(discovery.jwks_uri).pathname)).body);
  const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
    issuer: cp.issuer,
    audience: expected.audience,
    subject: `system:serviceaccount:${expected.namespace}:${expected.name}`,
  });
  return payload;
}

async function getOk(cp: ControlPlane, path: string): Promise<{ body: string }> {
  const res = await cp.request('GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.body}`);
  return res;
}
