import { denial, type Denial } from '../errors.ts';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import { mergeDenials, type InjectionPolicy } from '../mutate/pod.ts';
import type { SecretDerivation } from '../clouds/secret-config.ts';
import { isEmptyPolicySet, judgePodInjections, judgeSecretIdentity, type PolicySet } from './evaluate.ts';
import type { NamespaceView } from '../kube/types.ts';
import type { ProviderOptions } from '../clouds/index.ts';

/**
 * What admission needs from tenant policy: the policies in force now and the namespace's labels.
 * The only I/O is the namespace lookup (a cache, a direct read on a miss); everything after it is
 * the pure core.
 */
export interface PolicyGate {
  current(): PolicySet;
  options: ProviderOptions;
  namespace(name: string): NamespaceView | Promise<NamespaceView>;
}

/** The hook for one Pod, or undefined when no policy is in force (the namespace is then not read). */
export function podPolicyFor(
  gate: PolicyGate | undefined,
  namespace: string,
): InjectionPolicy | undefined | Promise<InjectionPolicy | undefined> {
  const set = gate?.current();
  if (!gate || !set || isEmptyPolicySet(set)) return undefined;
  const make =
    (ns: NamespaceView): InjectionPolicy =>
    (admission, injections) =>
      judgePodInjections({ set, options: gate.options, namespace: ns }, admission, injections);
  const ns = gate.namespace(namespace);
  // Without the namespace's labels no identity can be judged; a Pod that requests none still can be admitted.
  const unreadable =
    (err: Error): InjectionPolicy =>
    (_admission, injections) =>
      injections.length === 0 ? { injections, denials: [] } : { injections: [], denials: [namespaceDenial(err)] };
  return ns instanceof Promise ? ns.then(make, unreadable) : make(ns);
}

function namespaceDenial(err: Error): Denial {
  return denial('NamespaceUnavailable', `${err.message}; the identity is refused rather than judged without them`);
}

export interface SecretPolicyInput {
  secret: Secret;
  derivation: SecretDerivation;
  /** The ServiceAccount the token is issued for (project label), and its cached view when one was looked up. */
  reference: { namespace: string; name: string } | undefined;
  serviceAccount: ServiceAccountView | undefined;
}

export type SecretPolicy = (input: SecretPolicyInput) => Denial | undefined;

/** The judge for one labelled Secret, or undefined when no policy is in force. */
export function secretPolicyFor(
  gate: PolicyGate | undefined,
  namespace: string,
): SecretPolicy | undefined | Promise<SecretPolicy | undefined> {
  const set = gate?.current();
  if (!gate || !set || isEmptyPolicySet(set)) return undefined;
  const make =
    (ns: NamespaceView): SecretPolicy =>
    ({ secret, derivation, reference, serviceAccount }) => {
      const sa = reference && { ...reference, annotations: serviceAccount?.annotations ?? {} };
      const denials = judgeSecretIdentity(
        set,
        { metadata: secret.metadata, namespace: ns, serviceAccount: sa },
        derivation,
      );
      return denials.length > 0 ? mergeDenials(denials) : undefined;
    };
  const ns = gate.namespace(namespace);
  return ns instanceof Promise
    ? ns.then(
        make,
        (err: Error): SecretPolicy =>
          () =>
            namespaceDenial(err),
      )
    : make(ns);
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
