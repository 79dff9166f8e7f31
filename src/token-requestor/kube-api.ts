import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { slimServiceAccount } from '../kube/serviceaccount-cache.ts';
import { RENEW_ANNOTATION, SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../model.ts';
import type { RequestorApi } from './requestor.ts';

export const EVENT_SOURCE = 'workload-identity-token-requestor';

/** The requestor's calls against the API server (its RBAC is listed in docs/secrets.md). */
export function kubeRequestorApi(kubeConfig: KubeConfig, instance: string): RequestorApi {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return {
    async readServiceAccount(namespace, name) {
      try {
        const sa = await core.readNamespacedServiceAccount({ namespace, name });
        // Only the grant, bounded, as the webhook's cache keeps it: a marker when it is over.
        const view = slimServiceAccount(
          { metadata: { ...sa.metadata, namespace, name } },
          SECRET_SERVICE_ACCOUNT_ANNOTATIONS,
        );
        return view && { ...view, uid: sa.metadata?.uid ?? '' };
      } catch (err) {
        if ((err as { code?: number }).code === 404) return undefined;
        throw err;
      }
    },

    async requestToken({ namespace, name, audience, expirationSeconds, boundSecret }) {
      const res = await core.createNamespacedServiceAccountToken({
        namespace,
        name,
        body: {
          spec: {
            audiences: [audience],
            expirationSeconds,
            boundObjectRef: boundSecret
              ? { apiVersion: 'v1', kind: 'Secret', name: boundSecret.name, uid: boundSecret.uid }
              : undefined,
          },
        },
      });
      if (!res.status?.token) throw new Error('the TokenRequest returned no token');
      return res.status.token;
    },

    async writeToken({ namespace, name, resourceVersion }, token, clearRenewAnnotation) {
      // resourceVersion makes the merge patch conditional: 409 if the Secret changed meanwhile.
      const metadata: Record<string, unknown> = { resourceVersion };
      if (clearRenewAnnotation) metadata.annotations = { [RENEW_ANNOTATION]: null };
      const res = await core.patchNamespacedSecret(
        {
          namespace,
          name,
          body: { metadata, data: { token: token === null ? null : Buffer.from(token, 'utf8').toString('base64') } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      return res.metadata?.resourceVersion ?? '';
    },

    async warn(secret, reason, message) {
      const now = new Date();
      await core.createNamespacedEvent({
        namespace: secret.namespace,
        body: {
          metadata: { generateName: `${secret.name}.`, namespace: secret.namespace },
          involvedObject: {
            apiVersion: 'v1',
            kind: 'Secret',
            namespace: secret.namespace,
            name: secret.name,
            uid: secret.uid,
          },
          reason,
          message,
          type: 'Warning',
          source: { component: EVENT_SOURCE },
          reportingComponent: EVENT_SOURCE,
          reportingInstance: instance,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
    },
  };
}
