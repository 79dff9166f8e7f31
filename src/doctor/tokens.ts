// doctor's last step: each identity's token as the webhook would mount it, verified with the keys
// a cloud would use, and the signing algorithms against what each cloud accepts.
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify } from 'jose';
import type { Jwks } from '../issuer/discovery.ts';
import type { Fetched } from '../issuer/read.ts';
import { cloudModule } from '../clouds/index.ts';
import { PROVIDER_NAMES } from '../clouds/registry.ts';
import type { TrustIdentity } from '../clouds/types.ts';
import type { DoctorContext } from './context.ts';
import type { Identities } from './identities.ts';
import type { FreshToken } from './issuer.ts';
import { kubeError, requestToken } from './token-request.ts';
import type { Check } from './verdicts.ts';
import { errorMessage } from '../errors.ts';

/** What the token checks read from the steps before. */
interface TokenInputs {
  issuer: string;
  /** The keys a cloud would verify with: the public copy when readable, else the API server's. */
  keys: (Fetched<Jwks> & { ok: true }) | undefined;
  fresh: FreshToken | undefined;
  collected: Identities;
}

/**
 * The findings one at a time, as each token is requested and verified (each carries the time it
 * took: src/doctor/checks.ts stamps it when it arrives).
 */
export async function* identityTokens(ctx: DoctorContext, inputs: TokenInputs): AsyncGenerator<Check> {
  const { issuer, keys, fresh } = inputs;
  const { identities, listed } = inputs.collected;
  yield* algorithmCheck(keys?.value, fresh?.alg, identities);
  if (fresh && !identities.length) yield await checkToken('token-signature', undefined, fresh.token, issuer, keys);
  // A chained AWS role never sees the token (its source role does): no check of its own.
  const presented = identities.filter((i) => cloudModule(i.cloud).trust.presentsToken?.(i.identity) !== false);
  for (const identity of presented) yield await identityToken(ctx, identity, issuer, keys);
  if (identities.length === 0 && listed)
    yield {
      id: 'identities',
      verdict: 'warn',
      message: `no ServiceAccount${ctx.options.namespace ? ` in ${ctx.options.namespace}` : ''} carries an identity annotation yet`,
    };
}

async function identityToken(
  ctx: DoctorContext,
  identity: TrustIdentity,
  issuer: string,
  keys: TokenInputs['keys'],
): Promise<Check> {
  let token: string;
  try {
    ctx.waiting(`the token of ${identity.source}`);
    const { namespace, serviceAccount, audience } = identity;
    token = await requestToken(ctx.core, namespace, serviceAccount, audience, identity.expirationSeconds ?? 3600);
  } catch (err) {
    return {
      id: 'identity',
      subject: identity.source,
      verdict: 'unknown',
      message: `cannot request its token: ${kubeError(err)}`,
    };
  }
  return checkToken('identity', identity, token, issuer, keys);
}

function algorithmCheck(
  jwks: Jwks | undefined,
  tokenAlg: string | undefined,
  identities: readonly TrustIdentity[],
): Check[] {
  const algorithms = new Set([
    ...(jwks?.keys ?? []).map((k) => k.alg).filter((a): a is string => !!a),
    ...(tokenAlg ? [tokenAlg] : []),
  ]);
  if (algorithms.size === 0) return [];
  const used = new Set(identities.map((i) => i.cloud));
  const clouds = used.size ? [...used] : PROVIDER_NAMES;
  const refused = clouds.flatMap((cloud) =>
    [...algorithms]
      .filter((a) => !cloudModule(cloud).trust.algorithms.includes(a))
      .map((a) => `${cloudModule(cloud).trust.verifier} does not accept ${a}`),
  );
  if (refused.length === 0)
    return [
      {
        id: 'algorithm',
        verdict: 'pass',
        message: `tokens are signed with ${[...algorithms].join(', ')}, which ${clouds.map((c) => cloudModule(c).trust.verifier).join(', ')} accept`,
      },
    ];
  return [
    {
      id: 'algorithm',
      verdict: used.size ? 'fail' : 'warn',
      message: refused.join('; '),
      fix: 'sign with an RSA key (RS256): --service-account-signing-key-file=<RSA private key>',
    },
  ];
}

/** One token against the keys: signed by a published key, iss (and aud and sub for an identity), lifetime. */
async function checkToken(
  id: string,
  identity: TrustIdentity | undefined,
  token: string,
  issuer: string,
  keys: TokenInputs['keys'],
): Promise<Check> {
  const subject = identity?.source;
  const kid = decodeProtectedHeader(token).kid;
  const claims = decodeJwt(token);
  const lifetime =
    typeof claims.exp === 'number' && typeof claims.iat === 'number' ? claims.exp - claims.iat : undefined;
  const what = identity
    ? `${identity.cloud} token (aud ${identity.audience}, expires in ${lifetime ?? '?'} s)`
    : `a fresh token`;
  if (!keys)
    return {
      id,
      subject,
      verdict: 'fail',
      message: `${what}: no published JWKS to verify it against`,
      fix: 'serve discovery and JWKS (see the checks above)',
    };
  const refused = await refusal(token, kid, issuer, identity, keys);
  if (refused) return { id, subject, verdict: 'fail', ...refused, message: `${what} ${refused.message}` };
  if (identity?.expirationSeconds !== undefined && lifetime !== undefined && lifetime < identity.expirationSeconds)
    return {
      id,
      subject,
      verdict: 'warn',
      message: `${what} verifies, but the API server shortened its lifetime from the ${identity.expirationSeconds} s requested`,
      fix: 'raise --service-account-max-token-expiration, or lower the token-expiration annotation',
    };
  return {
    id,
    subject,
    verdict: 'pass',
    message: `${what} verifies against ${keys.url} (kid ${kid ?? 'none'}, iss, aud and sub as the cloud expects)`,
  };
}

/** Why a cloud would refuse the token (a key it cannot find, a signature or claim that fails), if it would. */
async function refusal(
  token: string,
  kid: string | undefined,
  issuer: string,
  identity: TrustIdentity | undefined,
  keys: NonNullable<TokenInputs['keys']>,
): Promise<Pick<Check, 'message' | 'fix'> | undefined> {
  if (kid && !keys.value.keys.some((k) => k.kid === kid))
    return {
      message: `is signed with key kid ${kid}, which the published JWKS (${keys.url}) lacks: a rotated signing key not yet published`,
      fix: 'list the new public key in --service-account-key-file (next to the old one) and republish the JWKS (workload-identity-webhook issuer publish) before signing with it',
    };
  try {
    await jwtVerify(token, createLocalJWKSet(keys.value), {
      issuer,
      ...(identity && { audience: identity.audience, subject: identity.subject }),
    });
  } catch (err) {
    const claim = err instanceof errors.JWTClaimValidationFailed ? ` (claim ${err.claim})` : '';
    return { message: `does not verify against ${keys.url}: ${errorMessage(err)}${claim}` };
  }
  return undefined;
}
