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
import type { Injection } from '../clouds/types.ts';
import { activation, type Activation, type IdentityVariable } from './cel.ts';
import { admissionVariables, identityOf, identityOfInjection, identityOfSecret } from './inputs.ts';
import type { CompiledPolicy, DefaultField, IdentityProviderSpec } from './model.ts';
import type { Overrides } from '../clouds/types.ts';
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

export type DeclaredProvider = IdentityProviderSpec & { policy: string };

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

export interface PodPolicyContext {
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
  const { pod, serviceAccount } = admission;
  const out: Injection[] = [];
  const denials: Denial[] = [];
  for (const injection of injections) {
    const cloud = injection.provider;
    const policy = cloudModule(cloud).policy;
    const requested = identityOfInjection(injection);
    policy.request?.(requested, serviceAccount);
    const vars = activation(admissionVariables('Pod', pod.metadata, ctx.namespace, serviceAccount, requested));

    const computed = computeDefaults(ctx.set, cloud, vars);
    if (isDenial(computed)) {
      denials.push(computed);
      continue;
    }
    policy.settle?.(
      requested,
      computed,
      ctx.set.identityProviders.filter((p) => p.provider === cloud),
      ctx.options[cloud],
    );

    const declared = matchIdentityProvider(ctx.set, requested);
    if (ctx.set.identityProviders.length > 0 && !declared) {
      denials.push(untrusted(ctx.set, requested));
      continue;
    }

    let final = injection;
    // undefined: the overrides change nothing and the Pod's first resolution stands.
    const provider = providerWithOverrides(ctx.options, cloud, overridesFor(computed, declared));
    if (provider) {
      const again = provider.resolvePod({
        pod,
        namespace: admission.namespace,
        serviceAccount,
        windows: isWindowsPod(pod),
      });
      if (again !== undefined && isDenial(again)) {
        denials.push(again);
        continue;
      }
      if (again) final = again;
    }
    if (declared && policy.finish) final = policy.finish(final, declared);

    const identity = identityOfInjection(final);
    identity.identityProvider = declared?.name ?? '';
    const refused = validate(
      ctx.set,
      activation(admissionVariables('Pod', pod.metadata, ctx.namespace, serviceAccount, identity)),
    );
    // The cloud's further identities in this Pod (AWS profiles, Azure client ids per container,
    // GCP providers) share the defaults above and are each matched and validated.
    for (const raw of final.additionalIdentities ?? []) {
      refused.push(...judgeAdditional(ctx, admission, identityOf(cloud, raw)));
    }
    if (refused.length > 0) denials.push(...refused);
    else out.push(final);
  }
  return denials.length > 0 ? mergeDenials(denials) : out;
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

export interface SecretSubject {
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
function computeDefaults(set: PolicySet, cloud: ProviderName, vars: Activation): Overrides | Denial {
  const computed: Overrides = {};
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
      // DEFAULT_FIELDS offers region only to clouds that have one.
      const region = cloudFacts(cloud).region!;
      return region.pattern.test(String(value)) ? undefined : `is not ${region.what} (for example ${region.example})`;
    }
    case 'tenant':
      // parse.ts offers tenant only to clouds that check it.
      return cloudModule(cloud).policy.tenantProblem!(String(value));
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
