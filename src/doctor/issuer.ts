// doctor's issuer steps: a fresh token, which shows what the cluster really issues, then the
// issuer's form, the token's iss against it, and jwks_uri, as the clouds will read them.
import { decodeJwt, decodeProtectedHeader, type JWTPayload } from 'jose';
import { type DiscoveryDocument, issuerProblem } from '../issuer/discovery.ts';
import { shellQuote } from '../shell.ts';
import type { DoctorContext } from './context.ts';
import type { Identities } from './identities.ts';
import { kubeError, requestToken } from './token-request.ts';
import type { Check } from './verdicts.ts';

export interface FreshToken {
  token: string;
  payload: JWTPayload;
  alg?: string;
  kid?: string;
}

/** A fresh token, for the first identity (or any ServiceAccount): what the cluster really issues. */
export async function freshToken(
  ctx: DoctorContext,
  { identities, anyAccount }: Identities,
): Promise<{ findings: Check[]; fresh?: FreshToken }> {
  const probe =
    identities[0] ??
    (anyAccount && {
      namespace: anyAccount.namespace,
      serviceAccount: anyAccount.name,
      audience: 'workload-identity-webhook-doctor',
      expirationSeconds: 3600,
    });
  if (!probe) {
    const none: Check = {
      id: 'token-issuer',
      verdict: 'unknown',
      message: 'no ServiceAccount to request a token for',
      fix: 'create a ServiceAccount, or pass --namespace of one that has some',
    };
    return { findings: [none] };
  }
  try {
    ctx.waiting(`a token for ServiceAccount ${probe.namespace}/${probe.serviceAccount}`);
    const expiration = probe.expirationSeconds ?? 3600;
    const token = await requestToken(ctx.core, probe.namespace, probe.serviceAccount, probe.audience, expiration);
    const header = decodeProtectedHeader(token);
    return { findings: [], fresh: { token, payload: decodeJwt(token), alg: header.alg, kid: header.kid } };
  } catch (err) {
    const refused: Check = {
      id: 'token-issuer',
      verdict: 'unknown',
      message: `cannot request a token for ServiceAccount ${probe.namespace}/${probe.serviceAccount}: ${kubeError(err)}`,
      fix: 'use a kubeconfig that may create serviceaccounts/token',
    };
    return { findings: [refused] };
  }
}

/**
 * The issuer's form, the fresh token's iss against it, and jwks_uri. The issuer is the discovery
 * document's, else the fresh token's; without either there is nothing more to check.
 */
export function issuerChecks(
  discovery: DiscoveryDocument | undefined,
  fresh: FreshToken | undefined,
): { findings: Check[]; issuer: string | undefined } {
  const iss = typeof fresh?.payload.iss === 'string' ? fresh.payload.iss : undefined;
  const issuer = discovery ? discovery.issuer : iss;
  if (issuer === undefined) return { findings: [], issuer };
  const findings = issuerForm(issuer);
  if (fresh && discovery) {
    findings.push(
      iss === issuer
        ? {
            id: 'token-issuer',
            verdict: 'pass',
            message: `a fresh token's iss equals the discovery issuer byte for byte (${JSON.stringify(iss)})`,
          }
        : {
            id: 'token-issuer',
            verdict: 'fail',
            message: `a fresh token's iss ${JSON.stringify(iss)} differs from the discovery issuer ${JSON.stringify(issuer)}: clouds refuse the token`,
            fix: 'list the URL the clouds trust first in --service-account-issuer (the first one signs tokens)',
          },
    );
  }
  if (discovery) findings.push(jwksUriCheck(discovery.jwks_uri, issuer));
  return { findings, issuer };
}

function issuerForm(issuer: string): Check[] {
  const url = URL.parse(issuer);
  if (url?.protocol !== 'https:') {
    return [
      {
        id: 'issuer-https',
        verdict: 'fail',
        message: `the issuer ${JSON.stringify(issuer)} is not an https URL: AWS, Entra and Google fetch discovery over https only, and kube-apiserver serves no discovery for it`,
        fix: issuerFlag(`https://${url?.host}${url && url.pathname !== '/' ? url.pathname : ''}`),
      },
    ];
  }
  const https: Check = { id: 'issuer-https', verdict: 'pass', message: `the issuer ${issuer} uses https` };
  if (issuer.endsWith('/')) {
    return [
      https,
      {
        id: 'issuer-form',
        verdict: 'fail',
        message: `the issuer ${JSON.stringify(issuer)} ends with "/": tokens carry the slash, AWS names IAM OIDC providers without it (InvalidIdentityToken: No OpenIDConnect provider found), and Entra and Google match iss byte for byte, so every cloud-side setting must carry it too`,
        fix: `${issuerFlag(issuer.replace(/\/+$/, ''))} (then recreate the cloud-side trust with workload-identity-webhook trust)`,
      },
    ];
  }
  if (url.search || url.hash || issuerProblem(issuer)) {
    return [
      https,
      {
        id: 'issuer-form',
        verdict: 'fail',
        message: `the issuer ${JSON.stringify(issuer)} has a query, a fragment or characters a URL path does not need, which OpenID Connect forbids or the clouds' tools mangle`,
        fix: 'use https://host[/path] as --service-account-issuer',
      },
    ];
  }
  return [
    https,
    { id: 'issuer-form', verdict: 'pass', message: 'the issuer has no trailing slash, query or fragment' },
  ];
}

/** The kube-apiserver flag that sets this issuer, quoted; a value not of an issuer's form is not printed. */
function issuerFlag(candidate: string): string {
  if (issuerProblem(candidate)) return '--service-account-issuer=https://<public host>[/path]';
  return shellQuote(`--service-account-issuer=${candidate}`);
}

function jwksUriCheck(jwksUri: string, issuer: string): Check {
  const url = URL.parse(jwksUri);
  if (url?.protocol !== 'https:') {
    return {
      id: 'jwks-uri',
      verdict: 'fail',
      message: `jwks_uri ${JSON.stringify(jwksUri)} is not an https URL`,
      fix: '--service-account-jwks-uri=https://<host>/openid/v1/jwks',
    };
  }
  const issuerHost = new URL(issuer).host;
  return url.host === issuerHost
    ? { id: 'jwks-uri', verdict: 'pass', message: `jwks_uri ${jwksUri} is https, on the issuer's host` }
    : {
        id: 'jwks-uri',
        verdict: 'warn',
        message: `jwks_uri ${jwksUri} is on ${url.host}, not on the issuer's host ${issuerHost}: the clouds fetch it from there, so it must be public too`,
        fix: 'host discovery and JWKS together: workload-identity-webhook issuer publish, then --service-account-jwks-uri=<issuer>/openid/v1/jwks',
      };
}
