// Where `trust` reads ServiceAccounts and labelled Secrets: manifests (offline) or the cluster.
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Secret, ServiceAccountView } from '../kube/types.ts';
import { PROVIDER_LABEL } from '../model.ts';
import { parseManifests, type ManifestInput } from '../manifests.ts';

export interface Objects {
  accounts: ServiceAccountView[];
  secrets: Secret[];
  /** What could not be read (Secrets, without the right to list them), for a warning. */
  warnings?: string[];
}

/** ServiceAccounts and Secrets among YAML/JSON documents; `stringData` is folded into `data` as the API server does. */
export function objectsOfManifests(input: ManifestInput): Objects {
  const accounts: ServiceAccountView[] = [];
  const secrets: Secret[] = [];
  for (const m of parseManifests(input)) {
    if (m.apiVersion !== undefined && m.apiVersion !== 'v1') continue;
    const namespace = m.metadata?.namespace || 'default';
    if (m.kind === 'ServiceAccount' && m.metadata?.name) {
      accounts.push({ namespace, name: m.metadata.name, uid: '', annotations: m.metadata.annotations ?? {} });
    } else if (m.kind === 'Secret' && m.metadata?.name) {
      const secret = structuredClone(m) as Secret;
      secret.metadata = { ...secret.metadata, namespace };
      if (secret.stringData) {
        secret.data = { ...secret.data };
        for (const [k, v] of Object.entries(secret.stringData))
          secret.data[k] = Buffer.from(String(v)).toString('base64');
        delete secret.stringData;
      }
      secrets.push(secret);
    }
  }
  return { accounts, secrets };
}

/**
 * Every ServiceAccount (or those of `namespace`), and the Secrets carrying the provider label.
 * Reading Secrets is optional: without the right to list them, they are left out with a warning.
 */
export async function objectsOfCluster(kc: KubeConfig, namespace?: string): Promise<Objects> {
  const core = kc.makeApiClient(CoreV1Api);
  const [sas, listed] = await Promise.all([
    namespace ? core.listNamespacedServiceAccount({ namespace }) : core.listServiceAccountForAllNamespaces(),
    (namespace
      ? core.listNamespacedSecret({ namespace, labelSelector: PROVIDER_LABEL })
      : core.listSecretForAllNamespaces({ labelSelector: PROVIDER_LABEL })
    ).then(
      (list) => ({ items: list.items }),
      (err: { code?: number; message?: string }) => ({
        items: [] as V1Secret[],
        error: err.code ? `HTTP ${err.code}` : err.message,
      }),
    ),
  ]);
  const secrets = listed.items;
  return {
    warnings:
      'error' in listed
        ? [`cannot list Secrets labelled ${PROVIDER_LABEL} (${listed.error}): their identities are left out`]
        : [],
    accounts: sas.items.map((sa) => ({
      namespace: sa.metadata?.namespace ?? 'default',
      name: sa.metadata?.name ?? '',
      uid: sa.metadata?.uid ?? '',
      annotations: sa.metadata?.annotations ?? {},
    })),
    // Only config and labels matter here; the token is never read, let alone printed.
    secrets: secrets.map(
      (s) => ({ metadata: s.metadata, data: s.data?.config ? { config: s.data.config } : {} }) as Secret,
    ),
  };
}
