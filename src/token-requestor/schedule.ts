import { createHash } from 'node:crypto';
import { isObject } from '../model.ts';

/**
 * When a Secret's token needs renewing. Pure: claims, the expected subject and audience, and the
 * clock in; "now" or a time out. The claims are read without verifying the signature: they only
 * decide when to ask the API server for a new token, and a token that does not look like one
 * this requestor would issue is replaced.
 */
export interface TokenClaims {
  sub?: string;
  aud?: string | string[];
  iat?: number;
  exp?: number;
}

/** The payload of a JWT, or undefined when the value is not one. Never logs or keeps the token. */
export function readTokenClaims(token: string | undefined): TokenClaims | undefined {
  if (!token) return undefined;
  const parts = token.trim().split('.');
  if (parts.length !== 3) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as unknown;
    if (!isObject(payload)) return undefined;
    const { sub, aud, iat, exp } = payload as Record<string, unknown>;
    return {
      sub: typeof sub === 'string' ? sub : undefined,
      aud:
        typeof aud === 'string' || (Array.isArray(aud) && aud.every((a) => typeof a === 'string'))
          ? (aud as string | string[])
          : undefined,
      iat: typeof iat === 'number' ? iat : undefined,
      exp: typeof exp === 'number' ? exp : undefined,
    };
  } catch {
    return undefined;
  }
}

export interface RenewalInput {
  claims: TokenClaims | undefined;
  /** `system:serviceaccount:<namespace>:<name>` */
  subject: string;
  audience: string;
  /** The lifetime this requestor asks for; a longer-lived token is not one of ours. */
  expirationSeconds: number;
  /** Seconds since the epoch. */
  now: number;
  /** Spreads renewals of Secrets written at the same moment (the Secret's uid). */
  jitterSeed: string;
  /** The renew annotation is set. */
  forced: boolean;
}

export type RenewalReason = 'forced' | 'missing' | 'unreadable' | 'subject' | 'audience' | 'lifetime' | 'due';
export type Renewal = { now: true; reason: RenewalReason } | { now: false; at: number };

/** Renewal at about half the token's lifetime: 45 % to 55 %, the same spot for the same token. */
export const RENEW_FRACTION = 0.5;
export const RENEW_JITTER = 0.05;
/** Clock skew tolerated on a token's iat. */
const SKEW_SECONDS = 60;

export function renewalFraction(seed: string, iat: number): number {
  const hash = createHash('sha256').update(`${seed}/${iat}`).digest();
  const unit = hash.readUInt32BE(0) / 0x1_0000_0000; // [0, 1)
  return RENEW_FRACTION - RENEW_JITTER + unit * 2 * RENEW_JITTER;
}

export function renewal(input: RenewalInput): Renewal {
  const { claims } = input;
  if (input.forced) return { now: true, reason: 'forced' };
  if (claims === undefined) return { now: true, reason: 'missing' };
  if (claims.iat === undefined || claims.exp === undefined || claims.exp <= claims.iat)
    return { now: true, reason: 'unreadable' };
  if (claims.sub !== input.subject) return { now: true, reason: 'subject' };
  const audiences = claims.aud === undefined ? [] : [claims.aud].flat();
  if (!audiences.includes(input.audience)) return { now: true, reason: 'audience' };
  const lifetime = claims.exp - claims.iat;
  if (lifetime > input.expirationSeconds + SKEW_SECONDS || claims.iat > input.now + SKEW_SECONDS)
    return { now: true, reason: 'lifetime' };
  const at = claims.iat + lifetime * renewalFraction(input.jitterSeed, claims.iat);
  if (at <= input.now) return { now: true, reason: 'due' };
  return { now: false, at };
}
