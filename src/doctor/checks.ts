// `doctor`: the cluster's side of the handshake, checked as the clouds will check it. Reads the
// API server's discovery document and JWKS, the public issuer URL's copies, and verifies the
// token each identity-carrying ServiceAccount would get against the published keys.
// Each step returns its findings and what later steps need; this file runs them in order and
// hands each its inputs, so what a step reads is in its signature.
import { CoreV1Api } from '@kubernetes/client-node';
import { apiServerOf, readApiServerJwks } from '../issuer/read.ts';
import { apiServerDiscovery } from './api-server.ts';
import type { DoctorContext, DoctorOptions } from './context.ts';
import { collectIdentities } from './identities.ts';
import { freshToken, issuerChecks } from './issuer.ts';
import { publicDiscovery, publicJwks } from './public-documents.ts';
import { identityTokens } from './tokens.ts';
import type { Check, DoctorReport } from './verdicts.ts';

export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const checks: Check[] = [];
  // Each check carries the time since the one before: the reads it waited for, and its own work.
  let since = performance.now();
  const record = (found: readonly Check[]) => {
    for (const c of found) {
      const now = performance.now();
      checks.push({ ...c, ms: Math.round(now - since) });
      since = now;
    }
  };
  const ctx: DoctorContext = {
    options,
    api: await apiServerOf(options.kc),
    core: options.kc.makeApiClient(CoreV1Api),
    waiting: (what) => options.progress?.(what),
  };
  const issuer = await runSteps(ctx, record);
  return { issuer, checks };
}

/**
 * The checks, in order: the API server's documents, the identities, a fresh token, the issuer,
 * the public copies, each identity's token. Returns the issuer, when one was found.
 */
async function runSteps(ctx: DoctorContext, record: (found: readonly Check[]) => void): Promise<string | undefined> {
  const server = await apiServerDiscovery(ctx);
  record(server.findings);
  if (!server.reached) return undefined;
  ctx.waiting("the API server's JWKS");
  const apiJwks = await readApiServerJwks(ctx.api);
  const collected = await collectIdentities(ctx, server.discovery?.issuer);
  record(collected.findings);
  const { fresh, ...token } = await freshToken(ctx, collected);
  record(token.findings);
  const { issuer, findings } = issuerChecks(server.discovery, fresh);
  record(findings);
  // Neither a discovery document nor a token names an issuer: nothing after this can be checked.
  if (issuer === undefined) return undefined;
  const pub = await publicDiscovery(ctx, issuer, server.discovery);
  record(pub.findings);
  const jwks = pub.document && (await publicJwks(ctx, pub.document, apiJwks));
  if (jwks) record(jwks.findings);
  const keys = jwks?.published.ok ? jwks.published : apiJwks.ok ? apiJwks : undefined;
  for await (const c of identityTokens(ctx, { issuer, keys, fresh, collected })) record([c]);
  return issuer;
}
