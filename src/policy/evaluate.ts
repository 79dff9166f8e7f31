// Tenant policy at admission: pure and synchronous. Compiled policies, the namespace's labels and
// the providers' options are plain data handed in; the result is the injections to plan (with
// defaults applied) or the denials.
import { cloudModule, providerWithOverrides, type ProviderOptions } from '../clouds/index.ts';
import { CLOUDS, cloudFacts, type ProviderName } from '../clouds/registry.ts';
import { denial, type Denial, isDenial, mergeDenials } from '../errors.ts';
import type { NamespaceView, ObjectMeta, ServiceAccountView } from '../kube/types.ts';
import type { PodAdmission } from '../mutate/pod.ts';
import { isWindowsPod } from '../model.ts';
import type { SecretDerivation } from '../clouds/secret-config.ts';
import type { Injection, PolicyDefaults, PolicyOverrides, SettledRequest } from '../clouds/types.ts';
import { activation, type Activation, type IdentityVariable } from './cel.ts';
import { admissionVariables, identityOf, identityOfInjection, identityOfSecret } from './inputs.ts';
import type { CompiledPolicy, DefaultField, IdentityProviderSpec } from './model.ts';
import { overridesFor } from './provider-options.ts';
import { evaluateDefault, evaluateValidation } from './rules.ts';

/** The policies in force for one admission: a snapshot, never changed once built. */
export interface PolicySet {
  /** Ordered by name: the first default to give a value wins. */
  policies: readonly CompiledPolicy[];
  /** Broken policies that refuse every identity until fixed (--policy-failure-mode=deny). */
  unavailable: readonly { name: string; message: string }[];
  /** Every declared identity provider, in policy order. */
  identityProviders: readonly DeclaredProvider[];
}

type DeclaredProvider = IdentityProviderSpec & { policy: string };

export function policySet(policies: readonly CompiledPolicy[], unavailable: PolicySet['unavailable'] = []): PolicySet {
  const sorted = [...policies].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    policies: sorted,
    unavailable,
    identityProviders: sorted.flatMap((p) => p.identityProviders.map((ip) => ({ ...ip, policy: p.name }))),
  };
}

export const EMPTY_POLICY_SET: PolicySet = policySet([]);

/** Nothing to judge: no policy in force and none broken. */
export function isEmptyPolicySet(set: PolicySet): boolean {
  return set.policies.length === 0 && set.unavailable.length === 0;
}

interface PodPolicyContext {
  set: PolicySet;
  options: ProviderOptions;
  namespace: NamespaceView;
}

/**
 * Judges each identity a Pod requests: defaults (CEL, then the matched identity provider's), the
 * identity provider match, then every validation. Denials of several identities are all reported.
 */
export function judgePodInjections(
  ctx: PodPolicyContext,
  admission: PodAdmission,
  injections: Injection[],
): Injection[] | Denial {
  if (injections.length === 0 || isEmptyPolicySet(ctx.set)) return injections;
  const unavailable = unavailableDenial(ctx.set);
  if (unavailable) return unavailable;
  const out: Injection[] = [];
  const denials: Denial[] = [];
  for (const injection of injections) {
    const judged = judgeInjection(ctx, admission, injection);
    if (Array.isArray(judged)) denials.push(...judged);
    else out.push(judged);
  }
  return denials.length > 0 ? mergeDenials(denials) : out;
}

/** One injection: its request settled, matched, resolved again with the overrides, then validated. */
function judgeInjection(ctx: PodPolicyContext, admission: PodAdmission, injection: Injection): Injection | Denial[] {
  const { pod, serviceAccount } = admission;
  const settled = settleRequest(ctx, admission, injection);
  if (isDenial(settled)) return [settled];
  const declared = matchIdentityProvider(ctx.set, settled.identity);
  if (ctx.set.identityProviders.length > 0 && !declared) return [untrusted(ctx.set, settled.identity)];

  const final = resolveWithOverrides(ctx, admission, injection, overridesFor(settled.defaults, declared));
  if (isDenial(final)) return [final];
  const identity = identityOfInjection(final);
  identity.identityProvider = declared?.name ?? '';
  const refused = validate(
    ctx.set,
    activation(admissionVariables('Pod', pod.metadata, ctx.namespace, serviceAccount, identity)),
  );
  // The cloud's further identities in this Pod (AWS profiles, Azure client ids per container,
  // GCP providers) share the defaults above and are each matched and validated.
  for (const raw of final.additionalIdentities ?? []) {
    refused.push(...judgeAdditional(ctx, admission, identityOf(injection.provider, raw)));
  }
  return refused.length > 0 ? refused : final;
}

/** What the Pod requests and the defaults that apply to it: the cloud's own `settle`, or the identity as claimed. */
function settleRequest(
  ctx: PodPolicyContext,
  { pod, serviceAccount }: PodAdmission,
  injection: Injection,
): SettledRequest<IdentityVariable> | Denial {
  const cloud = injection.provider;
  const defaults = (identity: IdentityVariable) =>
    computeDefaults(
      ctx.set,
      cloud,
      activation(admissionVariables('Pod', pod.metadata, ctx.namespace, serviceAccount, identity)),
    );
  const identity = identityOfInjection(injection);
  const { settle } = cloudModule(cloud).policy;
  if (settle)
    return settle({
      identity,
      serviceAccount,
      options: ctx.options[cloud],
      declared: ctx.set.identityProviders.filter((p) => p.provider === cloud),
      defaults,
    });
  const computed = defaults(identity);
  return isDenial(computed) ? computed : { identity, defaults: computed };
}

/** The injection the overrides give: the Pod resolved again by a provider built from them, when they change anything. */
function resolveWithOverrides(
  ctx: PodPolicyContext,
  { pod, namespace, serviceAccount }: PodAdmission,
  injection: Injection,
  overrides: PolicyOverrides<object>,
): Injection | Denial {
  const provider = providerWithOverrides(ctx.options, injection.provider, overrides);
  if (!provider) return injection;
  const again = provider.resolvePod({ pod, namespace, serviceAccount, windows: isWindowsPod(pod) });
  return again ?? injection;
}

/** One further identity of an injection: the identity provider match, then every validation. */
function judgeAdditional(ctx: PodPolicyContext, { pod, serviceAccount }: PodAdmission, identity: IdentityVariable) {
  const declared = matchIdentityProvider(ctx.set, identity);
  if (ctx.set.identityProviders.length > 0 && !declared) return [untrusted(ctx.set, identity)];
  identity.identityProvider = declared?.name ?? '';
  return validate(
    ctx.set,
    activation(admissionVariables('Pod', pod.metadata, ctx.namespace, serviceAccount, identity)),
  );
}

interface SecretSubject {
  metadata: ObjectMeta | undefined;
  namespace: NamespaceView;
  /** The ServiceAccount the token is issued for, when the Secret names one. */
  serviceAccount: Pick<ServiceAccountView, 'name' | 'namespace' | 'annotations'> | undefined;
}

/**
 * A labelled Secret's identity: the identity provider match and the validations. Its config names
 * every value explicitly, so defaults do not apply.
 */
export function judgeSecretIdentity(
  set: PolicySet,
  input: SecretSubject,
  derivation: Pick<SecretDerivation, 'provider' | 'identity'>,
): Denial[] {
  if (isEmptyPolicySet(set)) return [];
  const unavailable = unavailableDenial(set);
  if (unavailable) return [unavailable];
  const identity = identityOfSecret(derivation);
  const declared = matchIdentityProvider(set, identity);
  if (set.identityProviders.length > 0 && !declared) return [untrusted(set, identity)];
  identity.identityProvider = declared?.name ?? '';
  return validate(
    set,
    activation(admissionVariables('Secret', input.metadata, input.namespace, input.serviceAccount, identity)),
  );
}

function unavailableDenial(set: PolicySet): Denial | undefined {
  if (set.unavailable.length === 0) return undefined;
  const list = set.unavailable.map((u) => `WorkloadIdentityPolicy "${u.name}": ${u.message}`).join('; ');
  return denial(
    'PolicyUnavailable',
    `cloud identities are refused until the broken tenant policy is fixed (--policy-failure-mode=deny): ${list}`,
  );
}

/** The declared identity provider of this identity; an exact match (AWS: naming the account) wins over a wide one (a whole partition). */
function matchIdentityProvider(set: PolicySet, id: IdentityVariable): DeclaredProvider | undefined {
  let wide: DeclaredProvider | undefined;
  for (const p of set.identityProviders) {
    if (p.provider !== id.provider) continue;
    const match = cloudModule(p.provider).policy.match(p, id);
    if (match === 'exact') return p;
    if (match === 'wide') wide ??= p;
  }
  return wide;
}

function untrusted(set: PolicySet, id: IdentityVariable): Denial {
  // Only the identity of an injection or a Secret's derivation gets here: its provider is a cloud's.
  const cloud = id.provider as ProviderName;
  const title = CLOUDS[cloud].title;
  const what = cloudModule(cloud).policy.describeIdentity(id);
  const same = set.identityProviders.filter((p) => p.provider === cloud);
  const trusted =
    same.length === 0
      ? `no ${title} identity provider is declared`
      : `the ${title} identity providers declared are ${same.map(describeProvider).join(', ')}`;
  return denial('UntrustedIdentityProvider', `${what} is not an identity provider this cluster trusts: ${trusted}`);
}

function describeProvider(p: DeclaredProvider): string {
  return `"${p.displayName}" (${cloudModule(p.provider).policy.describeDeclared(p)})`;
}

/** The first value each default field gets, by policy name then rule order; or the denial of a failing default. */
function computeDefaults(set: PolicySet, cloud: ProviderName, vars: Activation): PolicyDefaults | Denial {
  const computed: PolicyDefaults = {};
  for (const policy of set.policies) {
    for (const rule of policy.defaults) {
      if (!rule.providers.has(cloud) || computed[rule.field] !== undefined) continue;
      const outcome = evaluateDefault(rule, vars);
      const where = `default "${rule.name}" of WorkloadIdentityPolicy "${policy.name}"`;
      if ('error' in outcome) return denial('PolicyError', `${where} could not be evaluated: ${outcome.error}`);
      if (outcome.value === undefined) continue;
      const bad = invalidDefault(rule.field, cloud, outcome.value);
      if (bad)
        return denial('PolicyError', `${where} gave ${rule.field} ${JSON.stringify(outcome.value)}, which ${bad}`);
      (computed as Record<DefaultField, string | number>)[rule.field] = outcome.value;
    }
  }
  return computed;
}

function invalidDefault(field: DefaultField, cloud: ProviderName, value: string | number): string | undefined {
  switch (field) {
    case 'region': {
      // biome-ignore lint/style/noNonNullAssertion: DEFAULT_FIELDS offers region only to clouds that have one.
      const region = cloudFacts(cloud).region!;
      return region.pattern.test(String(value)) ? undefined : `is not ${region.what} (for example ${region.example})`;
    }
    case 'tenant': {
      // biome-ignore lint/style/noNonNullAssertion: parse.ts offers tenant only to clouds that name one.
      const tenant = cloudFacts(cloud).tenant!;
      return tenant.pattern.test(String(value)) ? undefined : `is not ${tenant.what}`;
    }
    case 'audience':
      return /^\S+$/.test(String(value)) ? undefined : 'is not an audience (no spaces)';
    case 'tokenExpirationSeconds': {
      const n = Number(value);
      // The same bounds as a static default in the policy (parse.ts) and as the flags.
      const { min, max } = CLOUDS[cloud].tokenBounds;
      return n >= min && n <= max ? undefined : `is outside ${min} to ${max} seconds for ${CLOUDS[cloud].title}`;
    }
  }
}

function validate(set: PolicySet, vars: Activation): Denial[] {
  const denials: Denial[] = [];
  for (const policy of set.policies) {
    for (const rule of policy.validations) {
      const outcome = evaluateValidation(rule, vars);
      const where = `WorkloadIdentityPolicy "${policy.name}", validation "${rule.name}"`;
      if ('error' in outcome)
        denials.push(
          denial('PolicyError', `${where} could not be evaluated, so the identity is refused: ${outcome.error}`),
        );
      else if (!outcome.allowed) denials.push(denial('PolicyDenied', `${outcome.message} (${where})`));
    }
  }
  return denials;
}
