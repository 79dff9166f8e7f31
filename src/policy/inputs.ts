import { cloudModule } from '../clouds/index.ts';
import type { NamespaceView, ObjectMeta, ServiceAccountView } from '../kube/types.ts';
import type { SecretDerivation } from '../clouds/secret-config.ts';
import type { ProviderName } from '../clouds/registry.ts';
import type { Injection } from '../clouds/types.ts';
import { IDENTITY_FIELDS, type IdentityVariable, type PolicyVariables } from './cel.ts';
import type { ExampleInput } from './model.ts';

function emptyIdentity(): IdentityVariable {
  return Object.fromEntries(IDENTITY_FIELDS.map((f) => [f, ''])) as IdentityVariable;
}

/** The identity a Pod injection claims, from the provider's `identity` record. */
export function identityOfInjection(injection: Pick<Injection, 'provider' | 'identity'>): IdentityVariable {
  return identityOf(injection.provider, injection.identity);
}

/** The identity a labelled Secret's config claims. */
export function identityOfSecret(derivation: Pick<SecretDerivation, 'provider' | 'identity'>): IdentityVariable {
  return identityOf(derivation.provider, derivation.identity);
}

/** The identity of one record a cloud's provider gives (an injection's `identity` or one of its `additionalIdentities`). */
export function identityOf(provider: ProviderName, raw: Readonly<Record<string, string>>): IdentityVariable {
  return {
    ...emptyIdentity(),
    ...cloudModule(provider).policy.identity(raw),
    provider,
    audience: raw.audience ?? '',
  };
}

function meta(m: ObjectMeta | undefined, namespace: string) {
  return {
    name: m?.name ?? '',
    generateName: m?.generateName ?? '',
    namespace: m?.namespace || namespace,
    labels: { ...m?.labels },
    annotations: { ...m?.annotations },
  };
}

/** The variables for one admitted object and one of the identities it requests. */
export function admissionVariables(
  kind: 'Pod' | 'Secret',
  metadata: ObjectMeta | undefined,
  namespace: NamespaceView,
  serviceAccount: Pick<ServiceAccountView, 'name' | 'namespace' | 'annotations'> | undefined,
  identity: IdentityVariable,
): PolicyVariables {
  return {
    namespaceObject: { metadata: { name: namespace.name, labels: namespace.labels as Record<string, string> } },
    serviceAccount: {
      metadata: {
        name: serviceAccount?.name ?? '',
        namespace: serviceAccount?.namespace ?? '',
        annotations: (serviceAccount?.annotations ?? {}) as Record<string, string>,
      },
    },
    object: { apiVersion: 'v1', kind, metadata: meta(metadata, namespace.name) },
    identity,
  };
}

/** An example's partial input, completed the way an admission fills the variables. */
export function exampleVariables(input: ExampleInput): PolicyVariables {
  const ns = input.namespaceObject?.metadata;
  const sa = input.serviceAccount?.metadata;
  const obj = input.object;
  const m = (obj?.metadata ?? {}) as ObjectMeta;
  const identity = emptyIdentity();
  for (const [k, v] of Object.entries(input.identity ?? {}))
    if (typeof v === 'string') identity[k as keyof IdentityVariable] = v;
  const namespace = ns?.name ?? '';
  return {
    namespaceObject: { metadata: { name: namespace, labels: { ...ns?.labels } } },
    serviceAccount: {
      metadata: { name: sa?.name ?? '', namespace: sa?.namespace ?? namespace, annotations: { ...sa?.annotations } },
    },
    object: { apiVersion: obj?.apiVersion ?? 'v1', kind: obj?.kind ?? 'Pod', metadata: meta(m, namespace) },
    identity,
  };
}
