import { denial, type Denial, errorMessage, mergeDenials } from '../errors.ts';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import type { PodAdmission } from '../mutate/pod.ts';
import type { Injection } from '../clouds/types.ts';
import type { SecretDerivation } from '../clouds/secret-config.ts';
import { isEmptyPolicySet, judgePodInjections, judgeSecretIdentity, type PolicySet } from './evaluate.ts';
import type { NamespaceView } from '../kube/types.ts';
import type { ProviderOptions } from '../clouds/index.ts';

/**
 * The judge step of a Pod's admission: tenant policy on the identities the clouds resolved. It
 * may resolve an identity again with its defaults; pure, like the core: compiled policies are data.
 */
export type InjectionPolicy = (admission: PodAdmission, injections: Injection[]) => Injection[] | Denial;

/**
 * What admission needs from tenant policy: the policies in force now and the namespace's labels.
 * The only I/O is the namespace lookup (a cache, a direct read on a miss); everything after it is
 * the pure core.
 */
export interface PolicyGate {
  current(): PolicySet;
  options: ProviderOptions;
  /** The namespace cache's lookup: a hit answers at once, a miss later; awaited either way. */
  namespace(name: string): NamespaceView | Promise<NamespaceView>;
}

/** The hook for one Pod, or undefined when no policy is in force (the namespace is then not read). */
async function podPolicyFor(gate: PolicyGate | undefined, namespace: string): Promise<InjectionPolicy | undefined> {
  if (!gate || isEmptyPolicySet(gate.current())) return undefined;
  let ns: NamespaceView;
  try {
    ns = await gate.namespace(namespace);
  } catch (err) {
    // Without the namespace's labels no identity can be judged; a Pod that requests none still can be admitted.
    return (_admission, injections) => (injections.length === 0 ? injections : namespaceDenial(err));
  }
  return podPolicy(gate, ns);
}

/** The hook for one Pod once its namespace is read; undefined when no policy is in force. Pure. */
export function podPolicy(gate: PolicyGate | undefined, ns: NamespaceView): InjectionPolicy | undefined {
  const set = gate?.current();
  if (!gate || !set || isEmptyPolicySet(set)) return undefined;
  return (admission, injections) =>
    judgePodInjections({ set, options: gate.options, namespace: ns }, admission, injections);
}

function namespaceDenial(err: unknown): Denial {
  return denial(
    'NamespaceUnavailable',
    `${errorMessage(err)}; the identity is refused rather than judged without them`,
  );
}

interface SecretPolicyInput {
  secret: Secret;
  derivation: SecretDerivation;
  /** The ServiceAccount the token is issued for (project label), and its cached view when one was looked up. */
  reference: { namespace: string; name: string } | undefined;
  serviceAccount: ServiceAccountView | undefined;
}

export type SecretPolicy = (input: SecretPolicyInput) => Denial | undefined;

/** The judge for one labelled Secret, or undefined when no policy is in force. */
async function secretPolicyFor(gate: PolicyGate | undefined, namespace: string): Promise<SecretPolicy | undefined> {
  const set = gate?.current();
  if (!gate || !set || isEmptyPolicySet(set)) return undefined;
  let ns: NamespaceView;
  try {
    ns = await gate.namespace(namespace);
  } catch (err) {
    return () => namespaceDenial(err);
  }
  return ({ secret, derivation, reference, serviceAccount }) => {
    const sa = reference && { ...reference, annotations: serviceAccount?.annotations ?? {} };
    const denials = judgeSecretIdentity(
      set,
      { metadata: secret.metadata, namespace: ns, serviceAccount: sa },
      derivation,
    );
    return denials.length > 0 ? mergeDenials(denials) : undefined;
  };
}

/**
 * Tenant policy as admission asks for it, per namespace. Admission names only this type: the
 * evaluator and CEL are loaded with tenant policy (policy/runtime.ts), not with the server.
 */
export interface TenantJudges {
  pod(namespace: string): Promise<InjectionPolicy | undefined>;
  secret(namespace: string): Promise<SecretPolicy | undefined>;
}

export function judgesOf(gate: PolicyGate): TenantJudges {
  return { pod: (ns) => podPolicyFor(gate, ns), secret: (ns) => secretPolicyFor(gate, ns) };
}

/** A gate over fixed policies and namespaces: preview, tests and the benchmark. */
export function staticPolicyGate(
  set: PolicySet,
  options: ProviderOptions,
  namespaces: readonly NamespaceView[] = [],
): PolicyGate {
  const byName = new Map(namespaces.map((n) => [n.name, n]));
  return { current: () => set, options, namespace: (name) => byName.get(name) ?? { name, labels: {} } };
}
