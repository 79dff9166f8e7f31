import { denial, type Denial } from '../errors.ts';
import type { ServiceAccountView } from '../kube/types.ts';
import {
  ALLOWED_REFERRERS_ANNOTATION,
  isNamespaceName,
  isObjectName,
  PROVIDER_LABEL,
  SERVICE_ACCOUNT_ANNOTATION,
} from '../model.ts';

/**
 * References from a Secret to a ServiceAccount, and the grant that allows one across namespaces.
 * In the spirit of Gateway API's ReferenceGrant the target side decides: a ServiceAccount in
 * namespace B may be referenced from namespace A only if it lists A in its
 * allowed-referrer-namespaces annotation. The webhook and the token requestor both call this, so
 * the requestor never issues a token for a reference the webhook would refuse.
 */
export interface ServiceAccountReference {
  namespace: string;
  name: string;
}

export function parseServiceAccountReference(
  value: string | undefined,
  secretNamespace: string,
): ServiceAccountReference | Denial {
  if (value === undefined || value.trim() === '') {
    return denial(
      'MissingServiceAccount',
      `annotation ${SERVICE_ACCOUNT_ANNOTATION} is required on a Secret labelled ${PROVIDER_LABEL}: it names the ServiceAccount the token is issued for, "name" in the Secret's namespace or "namespace/name"`,
    );
  }
  const parts = value.trim().split('/');
  const [namespace, name] = parts.length === 1 ? [secretNamespace, parts[0]] : parts;
  if (parts.length > 2 || !isNamespaceName(namespace) || !isObjectName(name)) {
    return denial(
      'InvalidServiceAccountReference',
      `annotation ${SERVICE_ACCOUNT_ANNOTATION}="${value}" is not a ServiceAccount reference; expected "name" or "namespace/name"`,
    );
  }
  return { namespace, name };
}

/** Whether `sa` lists `referrerNamespace` (or `*`) in its allowed-referrer-namespaces annotation. */
export function grantsReferrer(sa: ServiceAccountView, referrerNamespace: string): boolean {
  const value = sa.annotations[ALLOWED_REFERRERS_ANNOTATION];
  if (value === undefined) return false;
  return value.split(',').some((entry) => {
    const ns = entry.trim();
    return ns === '*' || ns === referrerNamespace;
  });
}

/**
 * undefined when the reference is allowed: same namespace, or granted by the target. A missing
 * ServiceAccount gets the same answer as one that did not grant, so a tenant cannot probe which
 * ServiceAccounts exist in namespaces it cannot read.
 */
export function checkReferenceGrant(
  ref: ServiceAccountReference,
  referrerNamespace: string,
  target: ServiceAccountView | undefined,
): Denial | undefined {
  if (ref.namespace === referrerNamespace) return undefined;
  if (
    target &&
    target.namespace === ref.namespace &&
    target.name === ref.name &&
    grantsReferrer(target, referrerNamespace)
  )
    return undefined;
  return denial(
    'ReferenceNotGranted',
    `annotation ${SERVICE_ACCOUNT_ANNOTATION} references ServiceAccount ${ref.namespace}/${ref.name} in another namespace, which has not granted references from namespace ${referrerNamespace} (or does not exist); ` +
      `the owner of namespace ${ref.namespace} grants it by adding ${referrerNamespace} to that ServiceAccount's annotation ${ALLOWED_REFERRERS_ANNOTATION} (comma-separated namespaces, * for all), ` +
      `for example: kubectl annotate serviceaccount -n ${ref.namespace} ${ref.name} ${ALLOWED_REFERRERS_ANNOTATION}=${referrerNamespace}`,
  );
}
