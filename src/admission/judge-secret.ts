// The one pass over a labelled Secret that admission and the token requestor share: the plan
// says what to read (the referenced ServiceAccount in another namespace, for its grant), the
// caller's reads supply it and tenant policy, then the pure core decides. One function, so the
// requestor never issues a token for a Secret the webhook would refuse.
import { describeOversize } from '../annotation-bounds.ts';
import { denial, type Denial, isDenial, WebhookError } from '../errors.ts';
import type { ServiceAccountView, Secret } from '../kube/types.ts';
import { decideSecret, type SecretCoreOptions, type SecretMutation, type SecretPlan } from '../mutate/secret.ts';
import type { SecretPolicy } from '../policy/gate.ts';

interface SecretReads {
  /**
   * The ServiceAccount a cross-namespace reference names; undefined when it does not exist.
   * Rejects with WIW_SERVICEACCOUNT_UNAVAILABLE when it cannot be read now; a Denial when this
   * reader refuses to look (the token requestor outside the namespaces it serves).
   */
  serviceAccount(namespace: string, name: string): Promise<ServiceAccountView | undefined | Denial>;
  /** Tenant policy's judge for the Secret's namespace; absent or undefined: none in force. */
  policy?(namespace: string): Promise<SecretPolicy | undefined>;
}

/**
 * The decision for a planned Secret (`planSecret`). A reference that cannot be checked, or that
 * the reader refuses, is refused on its own: that answer does not depend on the rest.
 */
export async function judgeSecret(
  core: SecretCoreOptions,
  plan: SecretPlan | Denial,
  reads: SecretReads,
  oldSecret?: Secret,
): Promise<SecretMutation> {
  if (isDenial(plan) || plan.selection === undefined) return decideSecret(core, plan, {});
  let target: ServiceAccountView | undefined | Denial;
  let policy: SecretPolicy | undefined;
  // Both reads at once; most Secrets need neither (same-namespace reference, no tenant policy).
  if (plan.read || reads.policy) {
    try {
      const reading = plan.read && reads.serviceAccount(plan.read.namespace, plan.read.name);
      [target, policy] = reads.policy ? await Promise.all([reading, reads.policy(plan.namespace)]) : [await reading];
    } catch (err) {
      // A grant that cannot be checked is no grant: refused whatever the failure policy.
      if (!(err instanceof WebhookError) || err.code !== 'WIW_SERVICEACCOUNT_UNAVAILABLE') throw err;
      return {
        allowed: false,
        denial: denial(
          'ServiceAccountUnavailable',
          `${err.message}; it is needed to check the reference: retry shortly`,
        ),
      };
    }
  }
  if (isDenial(target)) return { allowed: false, denial: target };
  // A grant over its bound is kept as a marker: refused with why, not as "not granted".
  if (target?.oversize)
    return {
      allowed: false,
      denial: denial(
        'TooLarge',
        describeOversize(`ServiceAccount ${target.namespace}/${target.name}`, target.oversize),
      ),
    };
  const result = decideSecret(core, plan, { oldSecret, referencedServiceAccount: target });
  if (!result.allowed || !result.selected || !policy) return result;
  const refused = policy({
    secret: plan.secret,
    derivation: result.derivation,
    reference: result.reference,
    serviceAccount: target,
  });
  return refused ? { allowed: false, denial: refused } : result;
}
