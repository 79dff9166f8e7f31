// The self-managed certificate Secret, read and planned: what it holds (parseState), what it
// needs now (planFor), and the contents a plan leads to (applyPlan, secretFor). Pure but for the
// certificate generation in applyPlan: the same Secret and clock give the same plan, so replicas
// that read the same Secret agree, and the loser of a write race simply re-plans.
//
// Secret layout (type Opaque, created empty by the chart so the webhook never needs `create`):
//   ca.crt            CAs the API server must trust (the caBundle), PEM, newest last
//   tls.crt, tls.key  the serving pair every replica serves
//   next.crt, next.key  during a rotation: the pair to serve next, signed by a CA already in ca.crt
//   annotation NEXT_SINCE: when the next CA was published to the caBundle

import { X509Certificate, createHash, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';
import type { V1Secret } from '@kubernetes/client-node';
import type { KeyPair } from './reloader.ts';

export const NEXT_SINCE_ANNOTATION = 'workload-identity-webhook.io/next-certificate-since';

interface Pair extends KeyPair {
  x509: X509Certificate;
  notAfter: number;
}

export interface State {
  secret: V1Secret;
  /** Still-valid CAs of ca.crt, in order. */
  bundle: X509Certificate[];
  current?: Pair;
  next?: Pair;
  nextSince?: number;
}

export type Plan =
  | { action: 'none' }
  | { action: 'replace'; why: string }
  | { action: 'start-rotation' }
  | { action: 'promote' }
  | { action: 'drop-next'; why: string };

export interface Timing {
  renewBeforeMs: number;
  propagationMs: number;
}

/** Short SHA-256 fingerprint: enough to tell certificates apart in logs. */
export function fingerprint(cert: X509Certificate): string {
  return createHash('sha256').update(cert.raw).digest('hex').slice(0, 16);
}

export function splitPem(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

export function b64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

export function bundlePem(bundle: readonly X509Certificate[]): string {
  return bundle.map((ca) => `${ca.toString().trim()}\n`).join('');
}

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const b64 = data?.[key];
  return b64 ? Buffer.from(b64, 'base64').toString('utf8') : undefined;
}

function parsePair(cert: string | undefined, key: string | undefined): Pair | undefined {
  if (!cert || !key) return undefined;
  try {
    const x509 = new X509Certificate(cert);
    if (!x509.checkPrivateKey(createPrivateKey(key))) return undefined;
    return { cert, key, x509, notAfter: new Date(x509.validTo).getTime() };
  } catch {
    return undefined;
  }
}

/** Reads the Secret's data; anything unparsable counts as absent. */
export function parseState(secret: V1Secret, now = Date.now()): State {
  const data = secret.data ?? undefined;
  const bundle: X509Certificate[] = [];
  for (const pem of splitPem(decode(data, 'ca.crt') ?? '')) {
    try {
      const ca = new X509Certificate(pem);
      if (new Date(ca.validTo).getTime() > now) bundle.push(ca);
    } catch {
      // an unreadable entry is dropped on the next write
    }
  }
  const since = Date.parse(secret.metadata?.annotations?.[NEXT_SINCE_ANNOTATION] ?? '');
  return {
    secret,
    bundle,
    current: parsePair(decode(data, 'tls.crt'), decode(data, 'tls.key')),
    next: parsePair(decode(data, 'next.crt'), decode(data, 'next.key')),
    nextSince: Number.isNaN(since) ? undefined : since,
  };
}

/** The CA of `bundle` that signed `pair`, if any. */
export function issuerIn(pair: Pair, bundle: readonly X509Certificate[]): X509Certificate | undefined {
  return bundle.find((ca) => pair.x509.checkIssued(ca) && pair.x509.verify(ca.publicKey));
}

function coversHosts(pair: Pair, hosts: readonly string[]): boolean {
  return hosts.every((h) =>
    isIP(h) ? pair.x509.checkIP(h) !== undefined : pair.x509.checkHost(h, { wildcards: false }) !== undefined,
  );
}

/** What the Secret needs now. */
export function planFor(state: State, hosts: readonly string[], timing: Timing, now = Date.now()): Plan {
  const { current, next } = state;
  if (!current) return { action: 'replace', why: 'no serving certificate yet' };
  if (current.notAfter <= now) return { action: 'replace', why: 'the serving certificate has expired' };
  if (!issuerIn(current, state.bundle))
    return { action: 'replace', why: 'the serving certificate is not signed by a CA in ca.crt' };
  if (!coversHosts(current, hosts))
    return { action: 'replace', why: 'the serving certificate does not cover the configured hosts' };
  if (next) {
    if (!issuerIn(next, state.bundle) || !coversHosts(next, hosts) || next.notAfter <= now) {
      return { action: 'drop-next', why: 'the pending certificate is unusable' };
    }
    if (state.nextSince !== undefined && now >= state.nextSince + timing.propagationMs) return { action: 'promote' };
    return { action: 'none' };
  }
  if (now >= current.notAfter - timing.renewBeforeMs) return { action: 'start-rotation' };
  return { action: 'none' };
}

/** What the Secret holds after a plan: the CA bundle, the serving pair and the pending one. */
interface Contents {
  bundle: X509Certificate[];
  current: Pair;
  next?: Pair;
  nextSince?: number;
}

/**
 * The contents after `plan`, generating a CA and pair where it needs one; expired CAs are pruned.
 * `touchNextSince` restarts the propagation clock of a pending CA published only now.
 */
export async function applyPlan(
  state: State,
  plan: Plan,
  certificate: { hosts: readonly string[]; validitySeconds: number },
  now: number,
  touchNextSince?: number,
): Promise<Contents> {
  const bundle = [...state.bundle];
  let { current, next } = state;
  let nextSince = touchNextSince ?? state.nextSince;
  const generate = async (): Promise<Pair> => {
    // Loaded when a certificate is made, not by every replica that adopts one from the Secret.
    const { generateCertificatesValidFor } = await import('./self-signed.ts');
    const set = await generateCertificatesValidFor(certificate.hosts, certificate.validitySeconds);
    bundle.push(new X509Certificate(set.caPem));
    // biome-ignore lint/style/noNonNullAssertion: The pair was generated just now: it parses.
    return parsePair(set.certPem, set.keyPem)!;
  };
  switch (plan.action) {
    case 'replace':
      // Unexpired CAs stay: a replica still serving the old pair keeps working meanwhile.
      current = await generate();
      next = undefined;
      nextSince = undefined;
      break;
    case 'start-rotation':
      next = await generate();
      nextSince = now;
      break;
    case 'promote':
      current = next;
      next = undefined;
      nextSince = undefined;
      break;
    case 'drop-next':
      next = undefined;
      nextSince = undefined;
      break;
    case 'none':
      break;
  }
  // biome-ignore lint/style/noNonNullAssertion: Each plan leaves a current pair: replace makes one, promote is planned only with a next one.
  return { bundle: bundle.filter((ca) => new Date(ca.validTo).getTime() > now), current: current!, next, nextSince };
}

/** The Secret `existing` with `contents`; everything else of it (resourceVersion included) kept. */
export function secretFor(existing: V1Secret, contents: Contents): V1Secret {
  const { bundle, current, next, nextSince } = contents;
  const data: Record<string, string> = {
    'ca.crt': b64(bundlePem(bundle)),
    'tls.crt': b64(current.cert),
    'tls.key': b64(current.key),
  };
  if (next) {
    data['next.crt'] = b64(next.cert);
    data['next.key'] = b64(next.key);
  }
  const annotations = { ...existing.metadata?.annotations };
  if (nextSince === undefined) delete annotations[NEXT_SINCE_ANNOTATION];
  else annotations[NEXT_SINCE_ANNOTATION] = new Date(nextSince).toISOString();
  return { ...existing, metadata: { ...existing.metadata, annotations }, type: existing.type ?? 'Opaque', data };
}
