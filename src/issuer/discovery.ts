// The two documents a relying party reads (OpenID Connect Discovery 1.0, as Kubernetes serves
// them for ServiceAccount tokens): the discovery document and the JWKS at its jwks_uri.
import type { JWK } from 'jose';
import { errorMessage, WebhookError } from '../errors.ts';
import { isObject } from '../model.ts';

export interface DiscoveryDocument {
  issuer: string;
  jwks_uri: string;
  response_types_supported: string[];
  subject_types_supported: string[];
  id_token_signing_alg_values_supported: string[];
}

export interface Jwks {
  keys: (JWK & { kid?: string })[];
}

export const DISCOVERY_PATH = '/.well-known/openid-configuration';
/** Where kube-apiserver serves its JWKS, and where `issuer publish` puts it. */
export const JWKS_PATH = '/openid/v1/jwks';

/**
 * The form of an issuer URL that may be printed into a command: https, a host name, a path of
 * unreserved characters (a trailing slash is allowed here; callers warn about it). Anything else
 * (a query, quotes, `$(`, spaces) is refused before it reaches a shell.
 */
const ISSUER_FORM = /^https:\/\/[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:\/[A-Za-z0-9._~%/-]*)?$/;

export function issuerProblem(issuer: string): string | undefined {
  if (ISSUER_FORM.test(issuer)) return undefined;
  return `${JSON.stringify(issuer)} is not an issuer URL of the form https://host[:port][/path] (letters, digits and . _ ~ % - / only)`;
}

/** Discovery URL of an issuer: a trailing slash is dropped before appending (OIDC Discovery §4). */
export function discoveryUrl(issuer: string): string {
  return issuer.replace(/\/$/, '') + DISCOVERY_PATH;
}

/** The document as kube-apiserver builds it (pkg/serviceaccount/openidmetadata.go). */
export function discoveryDocument(issuer: string, jwksUri: string, jwks: Jwks): DiscoveryDocument {
  const algorithms = [...new Set(jwks.keys.map((k) => k.alg).filter((a): a is string => typeof a === 'string'))].sort();
  return {
    issuer,
    jwks_uri: jwksUri,
    response_types_supported: ['id_token'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: algorithms,
  };
}

export function parseDiscovery(text: string, source: string): DiscoveryDocument {
  const value = parseJson(text, source);
  const doc = value as Partial<DiscoveryDocument>;
  if (typeof doc.issuer !== 'string' || doc.issuer === '') throw bad(source, 'has no "issuer"');
  if (typeof doc.jwks_uri !== 'string' || doc.jwks_uri === '') throw bad(source, 'has no "jwks_uri"');
  return {
    issuer: doc.issuer,
    jwks_uri: doc.jwks_uri,
    response_types_supported: stringList(doc.response_types_supported),
    subject_types_supported: stringList(doc.subject_types_supported),
    id_token_signing_alg_values_supported: stringList(doc.id_token_signing_alg_values_supported),
  };
}

export function parseJwks(text: string, source: string): Jwks {
  const value = parseJson(text, source) as { keys?: unknown };
  if (!Array.isArray(value.keys)) throw bad(source, 'has no "keys" array');
  for (const [i, key] of value.keys.entries()) {
    if (typeof key !== 'object' || key === null || typeof (key as JWK).kty !== 'string')
      throw bad(source, `keys[${i}] is not a JWK`);
  }
  return { keys: value.keys as Jwks['keys'] };
}

function parseJson(text: string, source: string): object {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw bad(source, `is not JSON (${errorMessage(err)})`);
  }
  if (!isObject(value)) throw bad(source, 'is not a JSON object');
  return value;
}

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function bad(source: string, what: string): WebhookError {
  return new WebhookError('WIW_ISSUER_DOCUMENT', `${source} ${what}`);
}
