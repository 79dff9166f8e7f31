// Reading the issuer's documents from both sides: the API server (with the kubeconfig's
// credentials, or with none, as an anonymous cloud would) and the public issuer URL.
import type { RequestOptions } from 'node:https';
import { rootCertificates } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { errorMessage, WebhookError } from '../errors.ts';
import { describeNetworkError, httpGet, type HttpAnswer, type TlsMaterial } from './http.ts';
import {
  discoveryUrl,
  DISCOVERY_PATH,
  parseDiscovery,
  parseJwks,
  type DiscoveryDocument,
  type Jwks,
} from './discovery.ts';

export interface ApiServer {
  server: string;
  /** GET a path of the API server; `anonymous` sends no credentials (but trusts the kubeconfig's CA). */
  get(path: string, anonymous?: boolean): Promise<HttpAnswer>;
}

export async function apiServerOf(kc: KubeConfig): Promise<ApiServer> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new WebhookError('WIW_INVALID_CONFIG', 'the kubeconfig names no current cluster');
  const opts: RequestOptions & { headers: Record<string, string> } = { headers: {} };
  await kc.applyToHTTPSOptions(opts);
  const full: TlsMaterial = {
    ca: opts.ca as TlsMaterial['ca'],
    cert: opts.cert as TlsMaterial['cert'],
    key: opts.key as TlsMaterial['key'],
    servername: opts.servername as string | undefined,
    rejectUnauthorized: opts.rejectUnauthorized as boolean | undefined,
    headers: opts.headers,
    auth: opts.auth as string | undefined,
  };
  const anonymous: TlsMaterial = {
    ca: full.ca,
    servername: full.servername,
    rejectUnauthorized: full.rejectUnauthorized,
  };
  const server = cluster.server.replace(/\/$/, '');
  return { server, get: (path, anon = false) => httpGet(server + path, anon ? anonymous : full) };
}

/** A document read, or why not: an HTTP status with the start of the body, or a network error. */
export type Fetched<T> =
  | { ok: true; url: string; value: T; text: string }
  | { ok: false; url: string; status?: number; problem: string };

async function fetched<T>(
  url: string,
  get: () => Promise<HttpAnswer>,
  parse: (text: string, source: string) => T,
): Promise<Fetched<T>> {
  let answer: HttpAnswer;
  try {
    answer = await get();
  } catch (err) {
    return { ok: false, url, problem: describeNetworkError(err) };
  }
  if (answer.status !== 200) {
    return {
      ok: false,
      url,
      status: answer.status,
      problem: `HTTP ${answer.status}${answer.body ? `: ${answer.body.trim().slice(0, 200)}` : ''}`,
    };
  }
  try {
    return { ok: true, url, value: parse(answer.body, url), text: answer.body };
  } catch (err) {
    return { ok: false, url, status: answer.status, problem: errorMessage(err) };
  }
}

export function readApiServerDiscovery(api: ApiServer, anonymous = false): Promise<Fetched<DiscoveryDocument>> {
  return fetched(api.server + DISCOVERY_PATH, () => api.get(DISCOVERY_PATH, anonymous), parseDiscovery);
}

/**
 * The API server's own JWKS. jwks_uri may name another host (--service-account-jwks-uri), but
 * the API server always serves its keys at the path of its default jwks_uri.
 */
export function readApiServerJwks(api: ApiServer, anonymous = false): Promise<Fetched<Jwks>> {
  const path = '/openid/v1/jwks';
  return fetched(api.server + path, () => api.get(path, anonymous), parseJwks);
}

/** As a cloud reads it: no credentials; `ca` adds trust for a private CA (tests, internal issuers). */
export function readPublicDiscovery(issuer: string, ca?: string): Promise<Fetched<DiscoveryDocument>> {
  const url = discoveryUrl(issuer);
  return fetched(url, () => httpGet(url, publicTrust(ca)), parseDiscovery);
}

export function readPublicJwks(jwksUri: string, ca?: string): Promise<Fetched<Jwks>> {
  return fetched(jwksUri, () => httpGet(jwksUri, publicTrust(ca)), parseJwks);
}

/** The public roots, plus `ca` if given (in addition, not instead). */
function publicTrust(ca: string | undefined): TlsMaterial {
  return ca ? { ca: [...rootCertificates, ca] } : {};
}
