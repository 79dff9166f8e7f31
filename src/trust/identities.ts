// Which identities the webhook would hand out, and to whom: every ServiceAccount (through the
// same providers that mutate Pods) and every labelled Secret (through the same Secret core), so
// the audience and subject printed for the cloud side are the ones the token will carry.
import type { Pod, Secret, ServiceAccountView } from '../kube/types.ts';
import { decideSecret, planSecret, type SecretCoreOptions } from '../mutate/secret.ts';
import { cloudModule } from '../clouds/index.ts';
import { PROVIDER_NAMES } from '../clouds/registry.ts';
import type { PodProvider, TrustIdentity } from '../clouds/types.ts';

import { isDenial } from '../errors.ts';

interface Collected {
  identities: TrustIdentity[];
  /** Objects whose identity the webhook would refuse: their message. */
  problems: string[];
}

function subjectOf(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/**
 * A Pod of this ServiceAccount, with every label a cloud needs to inject at all (Azure's opt-in),
 * as the providers see it. Pod annotations can shorten a token's lifetime but never change its
 * audience or subject, which is all the trust depends on.
 */
const PROBE_LABELS = Object.assign({}, ...PROVIDER_NAMES.map((name) => cloudModule(name).trust.podLabels));

function probePod(sa: ServiceAccountView): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'trust-probe', namespace: sa.namespace, labels: PROBE_LABELS },
    spec: { serviceAccountName: sa.name, containers: [{ name: 'app', image: 'app' }] },
  } as Pod;
}

export function identitiesOfServiceAccounts(
  providers: readonly PodProvider[],
  accounts: readonly ServiceAccountView[],
): Collected {
  const identities: TrustIdentity[] = [];
  const problems: string[] = [];
  for (const sa of accounts) {
    const pod = probePod(sa);
    for (const provider of providers) {
      const result = provider.resolvePod({ pod, namespace: sa.namespace, serviceAccount: sa, windows: false });
      if (result === undefined) continue;
      if (isDenial(result)) {
        problems.push(`ServiceAccount ${sa.namespace}/${sa.name}: ${result.message}`);
        continue;
      }
      const token = result.volume.projected?.sources?.find((s) => s.serviceAccountToken)?.serviceAccountToken;
      // Every identity the Pod may claim: the cloud's side must trust each one.
      for (const identity of [result.identity, ...(result.additionalIdentities ?? [])]) {
        // Some clouds inject for any opted-in Pod (Azure): only what names an identity is one to trust.
        if (cloudModule(provider.name).trust.names?.(identity) === false) continue;
        // An identity that presents its own token (a GCP provider with its audience) says which.
        const audience = identity.audience || token?.audience;
        if (!audience) continue;
        identities.push({
          cloud: provider.name,
          source: `ServiceAccount ${sa.namespace}/${sa.name}`,
          namespace: sa.namespace,
          serviceAccount: sa.name,
          subject: subjectOf(sa.namespace, sa.name),
          audience,
          expirationSeconds: token?.expirationSeconds,
          identity,
        });
      }
    }
  }
  return { identities, problems };
}

/** Labelled Secrets (the project's label): the token requestor issues their token for the referenced ServiceAccount. */
export function identitiesOfSecrets(
  options: SecretCoreOptions,
  secrets: readonly Secret[],
  accounts: readonly ServiceAccountView[],
): Collected {
  const identities: TrustIdentity[] = [];
  const problems: string[] = [];
  const byName = new Map(accounts.map((sa) => [`${sa.namespace}/${sa.name}`, sa]));
  for (const secret of secrets) {
    const namespace = secret.metadata?.namespace || 'default';
    const where = `Secret ${namespace}/${secret.metadata?.name ?? '?'}`;
    const plan = planSecret(secret, namespace);
    const read = isDenial(plan) ? undefined : plan.read;
    const result = decideSecret(options, plan, {
      referencedServiceAccount: read && byName.get(`${read.namespace}/${read.name}`),
    });
    if (!result.allowed) {
      problems.push(`${where}: ${result.denial.message}`);
      continue;
    }
    // Gardener-only Secrets get their token from the garden cluster's issuer: not this cluster's trust.
    if (!result.selected || !result.reference) continue;
    identities.push({
      cloud: result.selection.provider,
      source: where,
      namespace: result.reference.namespace,
      serviceAccount: result.reference.name,
      subject: subjectOf(result.reference.namespace, result.reference.name),
      audience: result.derivation.audience,
      identity: result.derivation.identity,
    });
  }
  return { identities, problems };
}
