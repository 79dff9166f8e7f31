// `doctor`: the cluster's side of the handshake, checked as the clouds will check it. Reads the
// API server's discovery document and JWKS, the public issuer URL's copies, and verifies the
// token each identity-carrying ServiceAccount would get against the published keys.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type JWTPayload,
} from 'jose';
import { issuerProblem, type Jwks } from '../issuer/discovery.ts';
import { shellQuote } from '../shell.ts';
import {
  apiServerOf,
  readApiServerDiscovery,
  readApiServerJwks,
  readPublicDiscovery,
  readPublicJwks,
  type ApiServer,
  type Fetched,
} from '../issuer/read.ts';
import type { DiscoveryDocument } from '../issuer/discovery.ts';
import type { SecretCoreOptions } from '../mutate/secret.ts';
import { cloudModule } from '../clouds/index.ts';
import { PROVIDER_NAMES } from '../clouds/registry.ts';
import type { CloudSettings } from '../clouds/settings.ts';
import type { PodProvider } from '../clouds/types.ts';
import { identitiesOfSecrets, identitiesOfServiceAccounts, type TrustIdentity } from '../trust/identities.ts';
import { trustChecks } from '../trust/report.ts';
import { objectsOfCluster } from '../trust/sources.ts';
import type { Check, DoctorReport } from './verdicts.ts';

export interface DoctorOptions {
  kc: KubeConfig;
  providers: readonly PodProvider[];
  secrets: SecretCoreOptions;
  /** PEM of a CA trusted, besides the public roots, for the public issuer URL. */
  issuerCa?: string;
  /** Only this namespace's ServiceAccounts and Secrets. */
  namespace?: string;
  /** Told what doctor waits for before each read (an HTTP read can take seconds): a progress line. */
  progress?: (waitingFor: string) => void;
  /** The webhook's flags: the clouds' limits and configuration `trust` checks (docs/trust.md). */
  settings?: CloudSettings;
}

const BINDING_FIX =
  'kubectl create clusterrolebinding service-account-issuer-discovery-unauthenticated --clusterrole=system:service-account-issuer-discovery --group=system:unauthenticated ' +
  '(and keep --anonymous-auth enabled), or host the documents elsewhere: workload-identity-webhook issuer publish';

/** What the checks have found so far: each step reads it and adds to it. */
interface Doctor {
  options: DoctorOptions;
  api: ApiServer;
  core: CoreV1Api;
  checks: Check[];
  add(c: Check): void;
  /** Tells the person what doctor waits for now (an HTTP read can take seconds). */
  waiting(what: string): void;
  apiDiscovery?: Fetched<DiscoveryDocument>;
  apiJwks?: Fetched<Jwks>;
  identities: TrustIdentity[];
  anyAccount?: { namespace: string; name: string };
  fresh?: { token: string; payload: JWTPayload; alg?: string; kid?: string };
  issuer?: string;
  publicDiscovery?: Fetched<DiscoveryDocument>;
  published?: Fetched<Jwks>;
}

/** A step returns 'stop' when nothing after it can be checked. */
type Step = (d: Doctor) => Promise<'stop' | undefined>;

/** The checks, in order: the API server's documents, the identities, the issuer, the public copies, each identity's token. */
const STEPS: readonly [name: string, step: Step][] = [
  ['api-server discovery', apiServerDocuments],
  ['identities', collectIdentities],
  ['fresh token', freshToken],
  ['issuer', issuerChecks],
  ['public documents', publicDocuments],
  ['identity tokens', identityTokens],
];

export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const checks: Check[] = [];
  // Each check carries the time since the one before: the reads it waited for, and its own work.
  let since = performance.now();
  const d: Doctor = {
    options,
    api: await apiServerOf(options.kc),
    core: options.kc.makeApiClient(CoreV1Api),
    checks,
    add: (c) => {
      const now = performance.now();
      checks.push({ ...c, ms: Math.round(now - since) });
      since = now;
    },
    waiting: (what) => options.progress?.(what),
    identities: [],
  };
  for (const [, step] of STEPS) if ((await step(d)) === 'stop') break;
  return { issuer: d.issuer, checks };
}

async function apiServerDocuments(d: Doctor): Promise<'stop' | undefined> {
  d.waiting(`the API server's discovery document (${d.api.server})`);
  const discovery = await readApiServerDiscovery(d.api);
  d.apiDiscovery = discovery;
  if (!discovery.ok && discovery.status === undefined) {
    d.add({
      id: 'api-server',
      verdict: 'unknown',
      message: `cannot reach the API server at ${d.api.server}: ${discovery.problem}`,
      fix: 'check --kubeconfig and the network path to the API server',
    });
    return 'stop';
  }
  if (discovery.ok) {
    d.add({
      id: 'discovery',
      verdict: 'pass',
      message: `the API server serves its discovery document: issuer ${discovery.value.issuer}, jwks_uri ${discovery.value.jwks_uri}`,
    });
  } else if (discovery.status === 401 || discovery.status === 403) {
    d.add({
      id: 'discovery',
      verdict: 'unknown',
      message: `the API server refuses these credentials the discovery document (${discovery.problem})`,
      fix: 'use a kubeconfig allowed to GET /.well-known/openid-configuration',
    });
  } else {
    d.add({
      id: 'discovery',
      verdict: 'fail',
      message: `the API server serves no discovery document at ${discovery.url} (${discovery.problem}); it serves none when --service-account-issuer is not an https URL`,
      fix: 'start kube-apiserver with --service-account-issuer=https://<host the clouds can reach>',
    });
  }
  d.waiting("the API server's JWKS");
  d.apiJwks = await readApiServerJwks(d.api);
  return undefined;
}

/** The identities the webhook hands out, through the same providers that mutate Pods. */
async function collectIdentities(d: Doctor): Promise<undefined> {
  const { options, add } = d;
  try {
    d.waiting('the ServiceAccounts and labelled Secrets');
    const objects = await objectsOfCluster(options.kc, options.namespace);
    const fromAccounts = identitiesOfServiceAccounts(options.providers, objects.accounts);
    const fromSecrets = identitiesOfSecrets(options.secrets, objects.secrets, objects.accounts);
    d.identities = [...fromAccounts.identities, ...fromSecrets.identities];
    for (const p of [...fromAccounts.problems, ...fromSecrets.problems])
      add({
        id: 'annotations',
        verdict: 'fail',
        message: p,
        fix: 'correct the annotation or config; the webhook refuses it as it stands',
      });
    d.anyAccount = objects.accounts[0];
    // What the clouds would refuse (their limits) and what the configuration disagrees with, as `trust` finds it.
    const issuer = d.apiDiscovery?.ok ? d.apiDiscovery.value.issuer : undefined;
    if (issuer && options.settings)
      for (const f of trustChecks(issuer, d.identities, {
        settings: options.settings,
        accounts: objects.accounts,
        namespace: options.namespace,
      }))
        add({
          id: f.check,
          verdict: f.verdict,
          message: `${f.subject ? `${f.subject}: ` : ''}${f.message}`,
          ...(f.fix && { fix: f.fix }),
        });
    for (const w of objects.warnings ?? [])
      add({
        id: 'identities',
        verdict: 'warn',
        message: w,
        fix: 'use a kubeconfig that may list secrets to check them too',
      });
  } catch (err) {
    add({
      id: 'identities',
      verdict: 'unknown',
      message: `cannot list ServiceAccounts and labelled Secrets: ${kubeError(err)}`,
      fix: 'use a kubeconfig that may list serviceaccounts and secrets',
    });
  }
  return undefined;
}

/** A fresh token, for the first identity (or any ServiceAccount): what the cluster really issues. */
async function freshToken(d: Doctor): Promise<undefined> {
  const probe =
    d.identities[0] ??
    (d.anyAccount && {
      namespace: d.anyAccount.namespace,
      serviceAccount: d.anyAccount.name,
      audience: 'workload-identity-webhook-doctor',
      expirationSeconds: 3600,
    });
  if (!probe) {
    d.add({
      id: 'token-issuer',
      verdict: 'unknown',
      message: 'no ServiceAccount to request a token for',
      fix: 'create a ServiceAccount, or pass --namespace of one that has some',
    });
    return undefined;
  }
  try {
    d.waiting(`a token for ServiceAccount ${probe.namespace}/${probe.serviceAccount}`);
    const token = await requestToken(
      d.core,
      probe.namespace,
      probe.serviceAccount,
      probe.audience,
      probe.expirationSeconds ?? 3600,
    );
    const header = decodeProtectedHeader(token);
    d.fresh = { token, payload: decodeJwt(token), alg: header.alg, kid: header.kid };
  } catch (err) {
    d.add({
      id: 'token-issuer',
      verdict: 'unknown',
      message: `cannot request a token for ServiceAccount ${probe.namespace}/${probe.serviceAccount}: ${kubeError(err)}`,
      fix: 'use a kubeconfig that may create serviceaccounts/token',
    });
  }
  return undefined;
}

/** The issuer's form, the fresh token's iss against it, and jwks_uri. */
async function issuerChecks(d: Doctor): Promise<'stop' | undefined> {
  const { apiDiscovery, fresh, add } = d;
  const iss = typeof fresh?.payload.iss === 'string' ? fresh.payload.iss : undefined;
  const issuer = apiDiscovery?.ok ? apiDiscovery.value.issuer : iss;
  d.issuer = issuer;
  if (issuer === undefined) return 'stop';
  checkIssuerForm(issuer, add);
  if (fresh && apiDiscovery?.ok) {
    add(
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
  if (apiDiscovery?.ok) checkJwksUri(apiDiscovery.value.jwks_uri, issuer, add);
  return undefined;
}

/** The documents as the clouds read them: anonymously, at the issuer URL. */
async function publicDocuments(d: Doctor): Promise<undefined> {
  const issuer = d.issuer!;
  const { options, add, apiDiscovery, apiJwks } = d;
  d.waiting('anonymous discovery at the API server');
  const anonDiscovery = await readApiServerDiscovery(d.api, true);
  if (issuer.startsWith('https://')) {
    d.waiting(`the public discovery document (${issuer})`);
    d.publicDiscovery = await readPublicDiscovery(issuer, options.issuerCa);
  }
  const publicDiscovery = d.publicDiscovery;
  checkAnonymous(anonDiscovery, publicDiscovery, issuer, add);
  if (!publicDiscovery) return undefined;
  if (!publicDiscovery.ok) {
    add(unreadablePublicDiscovery(publicDiscovery));
    return undefined;
  }
  const doc = publicDiscovery.value;
  const same = apiDiscovery?.ok ? sameDiscovery(doc, apiDiscovery.value) : undefined;
  add(
    same === undefined || same.length === 0
      ? {
          id: 'public-discovery',
          verdict: 'pass',
          message: `${publicDiscovery.url} is readable without credentials and names issuer ${doc.issuer}`,
        }
      : {
          id: 'public-discovery',
          verdict: 'fail',
          message: `${publicDiscovery.url} differs from the API server's: ${same.join('; ')}`,
          fix: 'republish the documents (workload-identity-webhook issuer publish) or correct --service-account-issuer / --service-account-jwks-uri',
        },
  );
  d.waiting(`the public JWKS (${doc.jwks_uri})`);
  const published = await readPublicJwks(doc.jwks_uri, options.issuerCa);
  d.published = published;
  if (apiJwks?.ok) await compareKeys(apiJwks.value, published, add);
  else if (published.ok)
    add({
      id: 'public-jwks',
      verdict: 'pass',
      message: `${published.url} holds ${published.value.keys.length} key(s)`,
    });
  else add(unreadablePublicJwks(published));
  return undefined;
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

/** Each identity's token as the webhook would mount it, verified with the keys a cloud would use. */
async function identityTokens(d: Doctor): Promise<undefined> {
  const { identities, fresh, add, options } = d;
  const issuer = d.issuer!;
  // The keys a cloud would verify with: the public copy when readable, else the API server's.
  const keys = d.published?.ok ? d.published : d.apiJwks?.ok ? d.apiJwks : undefined;
  checkAlgorithms(keys?.value, fresh?.alg, identities, add);
  if (fresh && !identities.length) await checkToken('token-signature', undefined, fresh.token, issuer, keys, add);
  // A chained AWS role never sees the token (its source role does): no check of its own.
  const presented = identities.filter((i) => cloudModule(i.cloud).trust.presentsToken?.(i.identity) !== false);
  for (const identity of presented) {
    let token: string;
    try {
      d.waiting(`the token of ${identity.source}`);
      token = await requestToken(
        d.core,
        identity.namespace,
        identity.serviceAccount,
        identity.audience,
        identity.expirationSeconds ?? 3600,
      );
    } catch (err) {
      add({
        id: 'identity',
        subject: identity.source,
        verdict: 'unknown',
        message: `cannot request its token: ${kubeError(err)}`,
      });
      continue;
    }
    await checkToken('identity', identity, token, issuer, keys, add);
  }
  if (identities.length === 0 && d.checks.every((c) => c.id !== 'identities' || c.verdict === 'warn'))
    add({
      id: 'identities',
      verdict: 'warn',
      message: `no ServiceAccount${options.namespace ? ` in ${options.namespace}` : ''} carries an identity annotation yet`,
    });
  return undefined;
}

function checkIssuerForm(issuer: string, add: (c: Check) => void): void {
  const url = URL.parse(issuer);
  if (url?.protocol !== 'https:') {
    add({
      id: 'issuer-https',
      verdict: 'fail',
      message: `the issuer ${JSON.stringify(issuer)} is not an https URL: AWS, Entra and Google fetch discovery over https only, and kube-apiserver serves no discovery for it`,
      fix: issuerFlag(`https://${url?.host}${url && url.pathname !== '/' ? url.pathname : ''}`),
    });
    return;
  }
  add({ id: 'issuer-https', verdict: 'pass', message: `the issuer ${issuer} uses https` });
  if (issuer.endsWith('/')) {
    add({
      id: 'issuer-form',
      verdict: 'fail',
      message: `the issuer ${JSON.stringify(issuer)} ends with "/": tokens carry the slash, AWS names IAM OIDC providers without it (InvalidIdentityToken: No OpenIDConnect provider found), and Entra and Google match iss byte for byte, so every cloud-side setting must carry it too`,
      fix: `${issuerFlag(issuer.replace(/\/+$/, ''))} (then recreate the cloud-side trust with workload-identity-webhook trust)`,
    });
  } else if (url.search || url.hash || issuerProblem(issuer)) {
    add({
      id: 'issuer-form',
      verdict: 'fail',
      message: `the issuer ${JSON.stringify(issuer)} has a query, a fragment or characters a URL path does not need, which OpenID Connect forbids or the clouds' tools mangle`,
      fix: 'use https://host[/path] as --service-account-issuer',
    });
  } else {
    add({ id: 'issuer-form', verdict: 'pass', message: 'the issuer has no trailing slash, query or fragment' });
  }
}

/** The kube-apiserver flag that sets this issuer, quoted; a value not of an issuer's form is not printed. */
function issuerFlag(candidate: string): string {
  if (issuerProblem(candidate)) return '--service-account-issuer=https://<public host>[/path]';
  return shellQuote(`--service-account-issuer=${candidate}`);
}

function checkJwksUri(jwksUri: string, issuer: string, add: (c: Check) => void): void {
  const url = URL.parse(jwksUri);
  if (url?.protocol !== 'https:') {
    add({
      id: 'jwks-uri',
      verdict: 'fail',
      message: `jwks_uri ${JSON.stringify(jwksUri)} is not an https URL`,
      fix: '--service-account-jwks-uri=https://<host>/openid/v1/jwks',
    });
    return;
  }
  const issuerHost = new URL(issuer).host;
  add(
    url.host === issuerHost
      ? { id: 'jwks-uri', verdict: 'pass', message: `jwks_uri ${jwksUri} is https, on the issuer's host` }
      : {
          id: 'jwks-uri',
          verdict: 'warn',
          message: `jwks_uri ${jwksUri} is on ${url.host}, not on the issuer's host ${issuerHost}: the clouds fetch it from there, so it must be public too`,
          fix: 'host discovery and JWKS together: workload-identity-webhook issuer publish, then --service-account-jwks-uri=<issuer>/openid/v1/jwks',
        },
  );
}

function checkAnonymous(
  anon: Fetched<DiscoveryDocument>,
  pub: Fetched<DiscoveryDocument> | undefined,
  issuer: string,
  add: (c: Check) => void,
): void {
  if (anon.ok) {
    add({
      id: 'anonymous-discovery',
      verdict: 'pass',
      message:
        'the API server serves discovery and JWKS without credentials (system:service-account-issuer-discovery is bound to system:unauthenticated)',
    });
  } else if (anon.status === 401 || anon.status === 403) {
    const elsewhere = pub?.ok === true;
    add(
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
    );
  } else if (anon.status !== undefined && anon.status !== 404) {
    add({
      id: 'anonymous-discovery',
      verdict: 'unknown',
      message: `anonymous discovery at the API server answered ${anon.problem}`,
    });
  }
}

function sameDiscovery(pub: DiscoveryDocument, api: DiscoveryDocument): string[] {
  const out: string[] = [];
  if (pub.issuer !== api.issuer) out.push(`issuer ${JSON.stringify(pub.issuer)} is not ${JSON.stringify(api.issuer)}`);
  if (pub.jwks_uri !== api.jwks_uri) out.push(`jwks_uri ${pub.jwks_uri} is not ${api.jwks_uri}`);
  return out;
}

async function compareKeys(api: Jwks, pub: Fetched<Jwks>, add: (c: Check) => void): Promise<void> {
  if (!pub.ok) {
    add(unreadablePublicJwks(pub));
    return;
  }
  const prints = async (jwks: Jwks) =>
    new Map(
      await Promise.all(jwks.keys.map(async (k) => [await calculateJwkThumbprint(k), k.kid ?? '(no kid)'] as const)),
    );
  const [a, p] = await Promise.all([prints(api), prints(pub.value)]);
  const missing = [...a].filter(([t]) => !p.has(t)).map(([, kid]) => kid);
  const extra = [...p].filter(([t]) => !a.has(t)).map(([, kid]) => kid);
  if (missing.length > 0) {
    add({
      id: 'public-jwks',
      verdict: 'fail',
      message: `the public JWKS at ${pub.url} lacks key(s) the API server verifies with: kid ${missing.join(', ')}; tokens they sign are refused by every cloud`,
      fix: 'republish the keys: workload-identity-webhook issuer publish --dir DIR (then upload DIR to the issuer host)',
    });
  } else if (extra.length > 0) {
    add({
      id: 'public-jwks',
      verdict: 'warn',
      message: `the public JWKS at ${pub.url} also holds key(s) the API server no longer has: kid ${extra.join(', ')}`,
      fix: 'drop them once no token they signed is still valid: workload-identity-webhook issuer publish',
    });
  } else {
    add({
      id: 'public-jwks',
      verdict: 'pass',
      message: `the public JWKS at ${pub.url} holds the API server's ${a.size} key(s)`,
    });
  }
}

function checkAlgorithms(
  jwks: Jwks | undefined,
  tokenAlg: string | undefined,
  identities: readonly TrustIdentity[],
  add: (c: Check) => void,
): void {
  const algorithms = new Set([
    ...(jwks?.keys ?? []).map((k) => k.alg).filter((a): a is string => !!a),
    ...(tokenAlg ? [tokenAlg] : []),
  ]);
  if (algorithms.size === 0) return;
  const used = new Set(identities.map((i) => i.cloud));
  const clouds = used.size ? [...used] : PROVIDER_NAMES;
  const refused = clouds.flatMap((cloud) =>
    [...algorithms]
      .filter((a) => !cloudModule(cloud).trust.algorithms.includes(a))
      .map((a) => `${cloudModule(cloud).trust.verifier} does not accept ${a}`),
  );
  add(
    refused.length === 0
      ? {
          id: 'algorithm',
          verdict: 'pass',
          message: `tokens are signed with ${[...algorithms].join(', ')}, which ${clouds.map((c) => cloudModule(c).trust.verifier).join(', ')} accept`,
        }
      : {
          id: 'algorithm',
          verdict: used.size ? 'fail' : 'warn',
          message: refused.join('; '),
          fix: 'sign with an RSA key (RS256): --service-account-signing-key-file=<RSA private key>',
        },
  );
}

async function checkToken(
  id: string,
  identity: TrustIdentity | undefined,
  token: string,
  issuer: string,
  keys: Fetched<Jwks> | undefined,
  add: (c: Check) => void,
): Promise<void> {
  const subject = identity?.source;
  const header = decodeProtectedHeader(token);
  const claims = decodeJwt(token);
  const lifetime =
    typeof claims.exp === 'number' && typeof claims.iat === 'number' ? claims.exp - claims.iat : undefined;
  const what = identity
    ? `${identity.cloud} token (aud ${identity.audience}, expires in ${lifetime ?? '?'} s)`
    : `a fresh token`;
  if (!keys?.ok) {
    add({
      id,
      subject,
      verdict: 'fail',
      message: `${what}: no published JWKS to verify it against`,
      fix: 'serve discovery and JWKS (see the checks above)',
    });
    return;
  }
  if (header.kid && !keys.value.keys.some((k) => k.kid === header.kid)) {
    add({
      id,
      subject,
      verdict: 'fail',
      message: `${what} is signed with key kid ${header.kid}, which the published JWKS (${keys.url}) lacks: a rotated signing key not yet published`,
      fix: 'list the new public key in --service-account-key-file (next to the old one) and republish the JWKS (workload-identity-webhook issuer publish) before signing with it',
    });
    return;
  }
  try {
    await jwtVerify(token, createLocalJWKSet(keys.value), {
      issuer,
      ...(identity && { audience: identity.audience, subject: identity.subject }),
    });
  } catch (err) {
    const claim = err instanceof errors.JWTClaimValidationFailed ? ` (claim ${err.claim})` : '';
    add({
      id,
      subject,
      verdict: 'fail',
      message: `${what} does not verify against ${keys.url}: ${(err as Error).message}${claim}`,
    });
    return;
  }
  if (identity?.expirationSeconds !== undefined && lifetime !== undefined && lifetime < identity.expirationSeconds) {
    add({
      id,
      subject,
      verdict: 'warn',
      message: `${what} verifies, but the API server shortened its lifetime from the ${identity.expirationSeconds} s requested`,
      fix: 'raise --service-account-max-token-expiration, or lower the token-expiration annotation',
    });
    return;
  }
  add({
    id,
    subject,
    verdict: 'pass',
    message: `${what} verifies against ${keys.url} (kid ${header.kid ?? 'none'}, iss, aud and sub as the cloud expects)`,
  });
}

async function requestToken(
  core: CoreV1Api,
  namespace: string,
  name: string,
  audience: string,
  expirationSeconds: number,
): Promise<string> {
  const res = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [audience], expirationSeconds } },
  });
  if (!res.status?.token) throw new Error('the TokenRequest returned no token');
  return res.status.token;
}

function kubeError(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string };
  if (typeof e.code === 'number') {
    const body =
      typeof e.body === 'string' ? safeMessage(e.body) : (e.body as { message?: string } | undefined)?.message;
    return `HTTP ${e.code}${body ? `: ${body}` : ''}`;
  }
  return e.message ?? String(err);
}

function safeMessage(body: string): string | undefined {
  try {
    return (JSON.parse(body) as { message?: string }).message;
  } catch {
    return body.slice(0, 200);
  }
}
