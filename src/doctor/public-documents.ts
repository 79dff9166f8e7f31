// doctor's public-document steps: discovery and JWKS as the clouds read them, anonymously at the
// issuer URL, compared with the API server's own.
import { calculateJwkThumbprint } from 'jose';
import type { DiscoveryDocument, Jwks } from '../issuer/discovery.ts';
import { type Fetched, readApiServerDiscovery, readPublicDiscovery, readPublicJwks } from '../issuer/read.ts';
import type { DoctorContext } from './context.ts';
import type { Check } from './verdicts.ts';

const BINDING_FIX =
  'kubectl create clusterrolebinding service-account-issuer-discovery-unauthenticated --clusterrole=system:service-account-issuer-discovery --group=system:unauthenticated ' +
  '(and keep --anonymous-auth enabled), or host the documents elsewhere: workload-identity-webhook issuer publish';

/**
 * Anonymous discovery at the API server, then the public discovery document at an https issuer.
 * `document`: the public one, when readable (its jwks_uri is the next step's).
 */
export async function publicDiscovery(
  ctx: DoctorContext,
  issuer: string,
  apiDiscovery: DiscoveryDocument | undefined,
): Promise<{ findings: Check[]; document?: DiscoveryDocument }> {
  ctx.waiting('anonymous discovery at the API server');
  const anon = await readApiServerDiscovery(ctx.api, true);
  let pub: Fetched<DiscoveryDocument> | undefined;
  if (issuer.startsWith('https://')) {
    ctx.waiting(`the public discovery document (${issuer})`);
    pub = await readPublicDiscovery(issuer, ctx.options.issuerCa);
  }
  const findings = anonymousCheck(anon, pub, issuer);
  if (!pub) return { findings };
  if (!pub.ok) return { findings: [...findings, unreadablePublicDiscovery(pub)] };
  const doc = pub.value;
  const differs = apiDiscovery ? differences(doc, apiDiscovery) : [];
  findings.push(
    differs.length === 0
      ? {
          id: 'public-discovery',
          verdict: 'pass',
          message: `${pub.url} is readable without credentials and names issuer ${doc.issuer}`,
        }
      : {
          id: 'public-discovery',
          verdict: 'fail',
          message: `${pub.url} differs from the API server's: ${differs.join('; ')}`,
          fix: 'republish the documents (workload-identity-webhook issuer publish) or correct --service-account-issuer / --service-account-jwks-uri',
        },
  );
  return { findings, document: doc };
}

/** The public JWKS at the public document's jwks_uri, against the API server's keys when it served them. */
export async function publicJwks(
  ctx: DoctorContext,
  document: DiscoveryDocument,
  apiJwks: Fetched<Jwks>,
): Promise<{ findings: Check[]; published: Fetched<Jwks> }> {
  ctx.waiting(`the public JWKS (${document.jwks_uri})`);
  const published = await readPublicJwks(document.jwks_uri, ctx.options.issuerCa);
  let finding: Check;
  if (apiJwks.ok) finding = await compareKeys(apiJwks.value, published);
  else if (published.ok)
    finding = {
      id: 'public-jwks',
      verdict: 'pass',
      message: `${published.url} holds ${published.value.keys.length} key(s)`,
    };
  else finding = unreadablePublicJwks(published);
  return { findings: [finding], published };
}

function unreadablePublicJwks(pub: Fetched<Jwks> & { ok: false }): Check {
  return {
    id: 'public-jwks',
    verdict: pub.status ? 'fail' : 'unknown',
    message: `cannot read the public JWKS at ${pub.url}: ${pub.problem}`,
    fix: 'serve the JWKS at jwks_uri without credentials',
  };
}

function unreadablePublicDiscovery(publicDiscovery: Fetched<DiscoveryDocument> & { ok: false }): Check {
  const refused = publicDiscovery.status === 401 || publicDiscovery.status === 403;
  const unreachable = publicDiscovery.status === undefined;
  return {
    id: 'public-discovery',
    verdict: unreachable ? 'unknown' : 'fail',
    message: unreachable
      ? `cannot reach ${publicDiscovery.url} from here (${publicDiscovery.problem}); the clouds must reach it from the internet`
      : `${publicDiscovery.url} answers ${publicDiscovery.problem}${refused ? ': discovery is not readable without credentials' : ''}`,
    fix: unreachable
      ? 'run doctor where the issuer URL resolves (pass --issuer-ca FILE for a private CA), or check it from outside'
      : refused
        ? BINDING_FIX
        : 'serve the discovery document at the issuer URL: workload-identity-webhook issuer publish',
  };
}

function anonymousCheck(
  anon: Fetched<DiscoveryDocument>,
  pub: Fetched<DiscoveryDocument> | undefined,
  issuer: string,
): Check[] {
  if (anon.ok) {
    return [
      {
        id: 'anonymous-discovery',
        verdict: 'pass',
        message:
          'the API server serves discovery and JWKS without credentials (system:service-account-issuer-discovery is bound to system:unauthenticated)',
      },
    ];
  }
  if (anon.status === 401 || anon.status === 403) {
    const elsewhere = pub?.ok === true;
    return [
      elsewhere
        ? {
            id: 'anonymous-discovery',
            verdict: 'pass',
            message: `the API server refuses anonymous discovery, which is fine: the issuer ${issuer} is served elsewhere`,
          }
        : {
            id: 'anonymous-discovery',
            verdict: 'fail',
            message: `the API server refuses discovery without credentials (${anon.problem}): the clouds read it anonymously`,
            fix: BINDING_FIX,
          },
    ];
  }
  if (anon.status !== undefined && anon.status !== 404) {
    return [
      {
        id: 'anonymous-discovery',
        verdict: 'unknown',
        message: `anonymous discovery at the API server answered ${anon.problem}`,
      },
    ];
  }
  return [];
}

/** Where the public discovery document differs from the API server's, one phrase each. */
function differences(pub: DiscoveryDocument, api: DiscoveryDocument): string[] {
  const out: string[] = [];
  if (pub.issuer !== api.issuer) out.push(`issuer ${JSON.stringify(pub.issuer)} is not ${JSON.stringify(api.issuer)}`);
  if (pub.jwks_uri !== api.jwks_uri) out.push(`jwks_uri ${pub.jwks_uri} is not ${api.jwks_uri}`);
  return out;
}

async function compareKeys(api: Jwks, pub: Fetched<Jwks>): Promise<Check> {
  if (!pub.ok) return unreadablePublicJwks(pub);
  const prints = async (jwks: Jwks) =>
    new Map(
      await Promise.all(jwks.keys.map(async (k) => [await calculateJwkThumbprint(k), k.kid ?? '(no kid)'] as const)),
    );
  const [a, p] = await Promise.all([prints(api), prints(pub.value)]);
  const missing = [...a].filter(([t]) => !p.has(t)).map(([, kid]) => kid);
  const extra = [...p].filter(([t]) => !a.has(t)).map(([, kid]) => kid);
  if (missing.length > 0)
    return {
      id: 'public-jwks',
      verdict: 'fail',
      message: `the public JWKS at ${pub.url} lacks key(s) the API server verifies with: kid ${missing.join(', ')}; tokens they sign are refused by every cloud`,
      fix: 'republish the keys: workload-identity-webhook issuer publish --dir DIR (then upload DIR to the issuer host)',
    };
  if (extra.length > 0)
    return {
      id: 'public-jwks',
      verdict: 'warn',
      message: `the public JWKS at ${pub.url} also holds key(s) the API server no longer has: kid ${extra.join(', ')}`,
      fix: 'drop them once no token they signed is still valid: workload-identity-webhook issuer publish',
    };
  return {
    id: 'public-jwks',
    verdict: 'pass',
    message: `the public JWKS at ${pub.url} holds the API server's ${a.size} key(s)`,
  };
}
