import { unknownCloud } from '../clouds/registry.ts';
import type { NamespaceView, ObjectMeta, ServiceAccountView } from '../kube/types.ts';
import type { SecretDerivation } from '../clouds/secret-config.ts';
import type { Injection, ProviderName } from '../clouds/types.ts';
import { parseWorkloadIdentityProvider } from '../clouds/gcp/pod.ts';
import { IDENTITY_FIELDS, type IdentityVariable, type PolicyVariables } from './cel.ts';
import type { ExampleInput } from './model.ts';
import { isDenial } from '../errors.ts';

export function emptyIdentity(): IdentityVariable {
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

function identityOf(provider: ProviderName, raw: Readonly<Record<string, string>>): IdentityVariable {
  const id = emptyIdentity();
  id.provider = provider;
  id.audience = raw.audience ?? '';
  if (provider === 'aws') {
    id.roleArn = raw.roleArn ?? '';
    id.account = raw.account ?? '';
    id.partition = raw.partition ?? id.roleArn.split(':')[1] ?? '';
  } else if (provider === 'azure') {
    // Entra ids are case-insensitive; policies compare one spelling.
    id.tenant = (raw.tenantId ?? '').toLowerCase();
    id.clientId = (raw.clientId ?? '').toLowerCase();
    id.cloud = raw.cloud ?? '';
  } else if (provider === 'gcp') {
    id.workloadIdentityProvider = raw.workloadIdentityProvider ?? '';
    id.serviceAccountEmail = raw.serviceAccountEmail ?? '';
    id.projectNumber = raw.projectNumber ?? '';
    id.pool = raw.pool ?? '';
    if ((!id.pool || !id.projectNumber) && id.workloadIdentityProvider) {
      const parsed = parseWorkloadIdentityProvider(id.workloadIdentityProvider, 'workloadIdentityProvider');
      if (!isDenial(parsed)) {
        id.projectNumber = parsed.projectNumber;
        id.pool = parsed.pool;
      }
    }
  } else {
    unknownCloud(provider);
  }
  return id;
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
