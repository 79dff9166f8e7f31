import { apiPath, type KubeApi } from '../kube/api.ts';
import { statusOf } from '../kube/list-watch.ts';
import { slimServiceAccount } from '../kube/serviceaccount-cache.ts';
import { RENEW_ANNOTATION, SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../model.ts';
import type { RequestorApi } from './api.ts';

export const EVENT_SOURCE = 'workload-identity-token-requestor';

/**
 * The requestor's calls against the API server (its RBAC is listed in docs/secrets.md), on the
 * same HTTP/2 pool as its watches: client-node opened a connection per call and kept each, 400
 * for 200 Secrets.
 */
export function kubeRequestorApi(kube: KubeApi, instance: string): RequestorApi {
  const ns = (namespace: string, ...rest: string[]) => apiPath('api', 'v1', 'namespaces', namespace, ...rest);
  return {
    async readServiceAccount(namespace, name) {
      let sa: { metadata?: { uid?: string; annotations?: Record<string, string> } };
      try {
        sa = await kube.request('GET', ns(namespace, 'serviceaccounts', name));
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
      // Only the grant, bounded, as the webhook's cache keeps it: a marker when it is over.
      const view = slimServiceAccount(
        { metadata: { ...sa.metadata, namespace, name } },
        SECRET_SERVICE_ACCOUNT_ANNOTATIONS,
      );
      return view && { ...view, uid: sa.metadata?.uid ?? '' };
    },

    async requestToken({ namespace, name, audience, expirationSeconds, boundSecret }) {
      const res = await kube.request<{ status?: { token?: string } }>(
        'POST',
        ns(namespace, 'serviceaccounts', name, 'token'),
        {
          body: {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenRequest',
            spec: {
              audiences: [audience],
              expirationSeconds,
              boundObjectRef: boundSecret
                ? { apiVersion: 'v1', kind: 'Secret', name: boundSecret.name, uid: boundSecret.uid }
                : undefined,
            },
          },
        },
      );
      if (!res?.status?.token) throw new Error('the TokenRequest returned no token');
      return res.status.token;
    },

    async writeToken({ namespace, name, resourceVersion }, token, clearRenewAnnotation) {
      // resourceVersion makes the merge patch conditional: 409 if the Secret changed meanwhile.
      const metadata: Record<string, unknown> = { resourceVersion };
      if (clearRenewAnnotation) metadata.annotations = { [RENEW_ANNOTATION]: null };
      const res = await kube.request<{ metadata?: { resourceVersion?: string } }>(
        'PATCH',
        ns(namespace, 'secrets', name),
        {
          contentType: 'application/merge-patch+json',
          body: { metadata, data: { token: token === null ? null : Buffer.from(token, 'utf8').toString('base64') } },
        },
      );
      return res?.metadata?.resourceVersion ?? '';
    },

    async warn(secret, reason, message) {
      const now = new Date();
      await kube.request('POST', ns(secret.namespace, 'events'), {
        body: {
          apiVersion: 'v1',
          kind: 'Event',
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
          firstTimestamp: now.toISOString(),
          lastTimestamp: now.toISOString(),
          count: 1,
        },
      });
    },
  };
}
