// doctor's second step: the identities the webhook hands out, found through the same providers
// that mutate Pods, with what the clouds would refuse of them (their limits) and what the
// configuration disagrees with, as `trust` finds it.
import type { TrustIdentity } from '../clouds/types.ts';
import { identitiesOfSecrets, identitiesOfServiceAccounts } from '../trust/identities.ts';
import { trustChecks } from '../trust/report.ts';
import { objectsOfCluster, type Objects } from '../trust/sources.ts';
import type { CloudSettings } from '../clouds/settings.ts';
import type { DoctorContext } from './context.ts';
import { kubeError } from './token-request.ts';
import type { Check } from './verdicts.ts';

export interface Identities {
  findings: Check[];
  identities: TrustIdentity[];
  /** Any ServiceAccount, to ask a token of when none carries an identity. */
  anyAccount: { namespace: string; name: string } | undefined;
  /** False when the ServiceAccounts and Secrets could not be listed (a finding says why). */
  listed: boolean;
}

/** `issuer`: the API server's discovery issuer, which the clouds' trust is written for. */
export async function collectIdentities(ctx: DoctorContext, issuer: string | undefined): Promise<Identities> {
  const { options } = ctx;
  const findings: Check[] = [];
  let identities: TrustIdentity[] = [];
  let anyAccount: Identities['anyAccount'];
  try {
    ctx.waiting('the ServiceAccounts and labelled Secrets');
    const objects = await objectsOfCluster(options.kc, options.namespace);
    const fromAccounts = identitiesOfServiceAccounts(options.providers, objects.accounts);
    const fromSecrets = identitiesOfSecrets(options.secrets, objects.secrets, objects.accounts);
    identities = [...fromAccounts.identities, ...fromSecrets.identities];
    for (const p of [...fromAccounts.problems, ...fromSecrets.problems])
      findings.push({
        id: 'annotations',
        verdict: 'fail',
        message: p,
        fix: 'correct the annotation or config; the webhook refuses it as it stands',
      });
    anyAccount = objects.accounts[0];
    if (issuer && options.settings)
      findings.push(...trustFindings(issuer, identities, objects, options.settings, options.namespace));
    for (const w of objects.warnings ?? [])
      findings.push({
        id: 'identities',
        verdict: 'warn',
        message: w,
        fix: 'use a kubeconfig that may list secrets to check them too',
      });
  } catch (err) {
    findings.push({
      id: 'identities',
      verdict: 'unknown',
      message: `cannot list ServiceAccounts and labelled Secrets: ${kubeError(err)}`,
      fix: 'use a kubeconfig that may list serviceaccounts and secrets',
    });
    return { findings, identities, anyAccount, listed: false };
  }
  return { findings, identities, anyAccount, listed: true };
}

function trustFindings(
  issuer: string,
  identities: readonly TrustIdentity[],
  objects: Objects,
  settings: CloudSettings,
  namespace: string | undefined,
): Check[] {
  return trustChecks(issuer, identities, { settings, accounts: objects.accounts, namespace }).map((f) => ({
    id: f.check,
    verdict: f.verdict,
    message: `${f.subject ? `${f.subject}: ` : ''}${f.message}`,
    ...(f.fix && { fix: f.fix }),
  }));
}
