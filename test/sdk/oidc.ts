// The cluster as an external relying party sees it: its OIDC discovery document and JWKS, fetched
// once from the API server, and a verifier the cloud stand-ins share. Each stand-in judges the
// audience and subject by its own cloud's rules; this checks only what every cloud checks alike.
import { createHash } from 'node:crypto';
import { createLocalJWKSet, decodeJwt, errors, jwtVerify, type JWTPayload } from 'jose';
import type { ControlPlane } from '../harness/control-plane.ts';

export interface ClusterIssuer {
  /** The `iss` the cluster signs into its tokens, as its discovery document states it. */
  issuer: string;
  /**
   * Verifies signature (against the discovery document's JWKS) and time validity at `now`.
   * Issuer, audience and subject are the caller's to judge: each cloud words those errors its own way.
   */
  verify(token: string, now: Date): Promise<VerifiedToken | TokenRejection>;
}

export interface VerifiedToken {
  ok: true;
  payload: JWTPayload & { iss: string; sub: string; exp: number; iat: number };
  audiences: string[];
}

export interface TokenRejection {
  ok: false;
  reason: 'malformed' | 'unknown-issuer' | 'signature' | 'expired' | 'not-yet-valid';
  detail: string;
  /** Claims read without verification, for error messages that quote them. */
  claims?: JWTPayload;
}

export async function loadClusterIssuer(cp: ControlPlane): Promise<ClusterIssuer> {
  const discovery = JSON.parse(await get(cp, '/.well-known/openid-configuration')) as {
    issuer: string;
    jwks_uri: string;
  };
  if (discovery.issuer !== cp.issuer)
    throw new Error(`discovery issuer ${discovery.issuer} is not the configured ${cp.issuer}`);
  // jwks_uri is built from the issuer; the API server serves it, so ask it directly (as admin:
  // a bare API server grants discovery to ServiceAccounts only).
  const jwks = createLocalJWKSet(JSON.parse(await get(cp, new URL(discovery.jwks_uri).pathname)));
  const issuer = discovery.issuer;

  return {
    issuer,
    async verify(token, now) {
      let claims: JWTPayload;
      try {
        claims = decodeJwt(token);
      } catch (err) {
        return { ok: false, reason: 'malformed', detail: (err as Error).message };
      }
      if (claims.iss !== issuer) return { ok: false, reason: 'unknown-issuer', detail: `issuer ${claims.iss}`, claims };
      try {
        const { payload } = await jwtVerify(token, jwks, { issuer, currentDate: now, algorithms: ['RS256', 'ES256'] });
        if (typeof payload.sub !== 'string' || typeof payload.exp !== 'number' || typeof payload.iat !== 'number') {
          return { ok: false, reason: 'malformed', detail: 'sub, exp or iat missing', claims };
        }
        const audiences = [payload.aud ?? []].flat();
        return { ok: true, payload: payload as VerifiedToken['payload'], audiences };
      } catch (err) {
        if (err instanceof errors.JWTExpired) return { ok: false, reason: 'expired', detail: err.message, claims };
        if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'nbf') {
          return { ok: false, reason: 'not-yet-valid', detail: err.message, claims };
        }
        return { ok: false, reason: 'signature', detail: (err as Error).message, claims };
      }
    },
  };
}

/** Stand-ins record tokens by digest: enough to tell which token a request carried. */
export function tokenDigest(token: string): string {
  return createHash('sha256').update(token.trim()).digest('hex').slice(0, 16);
}

async function get(cp: ControlPlane, path: string): Promise<string> {
  const res = await cp.request('GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.body}`);
  return res.body;
}
