// The RequestorApi of ./api.ts against the real API server: each call, and the object it sends.
import { apiPath, type KubeApi } from '../kube/api.ts';
import { statusOf } from '../kube/list-watch.ts';
import { slimServiceAccount } from '../kube/serviceaccount-cache.ts';
import type { ServiceAccountView } from '../kube/types.ts';
import { RENEW_ANNOTATION, SECRET_SERVICE_ACCOUNT_ANNOTATIONS } from '../model.ts';
import type { RequestorApi, TokenRequestInput } from './api.ts';
import type { TrackedSecret } from './secret-informer.ts';

export const EVENT_SOURCE = 'workload-identity-token-requestor';

/**
 * The requestor's calls against the API server (its RBAC is listed in docs/secrets.md), on the
 * same HTTP/2 pool as its watches: client-node opened a connection per call and kept each, 400
 * for 200 Secrets. The objects each call sends are built by the functions below it.
 */
export function kubeRequestorApi(kube: KubeApi, instance: string): RequestorApi {
  return {
    readServiceAccount: (namespace, name) => readServiceAccount(kube, namespace, name),

    async requestToken(request) {
      const res = await kube.request<{ status?: { token?: string } }>(
        'POST',
        namespaced(request.namespace, 'serviceaccounts', request.name, 'token'),
        { body: tokenRequest(request) },
      );
      if (!res?.status?.token) throw new Error('the TokenRequest returned no token');
      return res.status.token;
    },

    async writeToken({ namespace, name, resourceVersion }, token, clearRenewAnnotation) {
      const res = await kube.request<{ metadata?: { resourceVersion?: string } }>(
        'PATCH',
        namespaced(namespace, 'secrets', name),
        { contentType: 'application/merge-patch+json', body: tokenPatch(resourceVersion, token, clearRenewAnnotation) },
      );
      return res?.metadata?.resourceVersion ?? '';
    },

    async warn(secret, reason, message) {
      await kube.request('POST', namespaced(secret.namespace, 'events'), {
        body: warningEvent(secret, reason, message, instance, new Date()),
      });
    },
  };
}

function namespaced(namespace: string, ...rest: string[]): string {
  return apiPath('api', 'v1', 'namespaces', namespace, ...rest);
}

async function readServiceAccount(
  kube: KubeApi,
  namespace: string,
  name: string,
): Promise<ServiceAccountView | undefined> {
  let sa: { metadata?: { uid?: string; annotations?: Record<string, string> } };
  try {
    sa = await kube.request('GET', namespaced(namespace, 'serviceaccounts', name));
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
}

/** A TokenRequest for the audience; bound to the Secret when one is given, so deleting it revokes the token. */
function tokenRequest({ audience, expirationSeconds, boundSecret }: TokenRequestInput) {
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: [audience],
      expirationSeconds,
      boundObjectRef: boundSecret
        ? { apiVersion: 'v1', kind: 'Secret', name: boundSecret.name, uid: boundSecret.uid }
        : undefined,
    },
  };
}

/** The merge patch that writes the token (null: removes it), conditional on the Secret's resourceVersion. */
function tokenPatch(resourceVersion: string, token: string | null, clearRenewAnnotation: boolean) {
  // resourceVersion makes the merge patch conditional: 409 if the Secret changed meanwhile.
  const metadata: Record<string, unknown> = { resourceVersion };
  if (clearRenewAnnotation) metadata.annotations = { [RENEW_ANNOTATION]: null };
  return { metadata, data: { token: token === null ? null : Buffer.from(token, 'utf8').toString('base64') } };
}

/** A Warning event on the Secret, reported by this instance. */
function warningEvent(secret: TrackedSecret, reason: string, message: string, instance: string, now: Date) {
  return {
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
  };
}
