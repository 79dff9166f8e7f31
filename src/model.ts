// The shared model of the objects the webhook reads, used by every layer (configuration,
// admission, the token requestor, the CLI): which ServiceAccount and OS a Pod has, and the labels
// and annotations of GEP-26 Secrets: Gardener's, which this webhook honours so Gardener's token
// requestor can be the writer, and the project's own (`workload-identity-webhook.io/`).
import { type AnnotationBound, listBound } from './annotation-bounds.ts';
import { MAX_TOKEN_PATH } from './bounds.ts';
import type { Pod } from './kube/types.ts';

export function serviceAccountNameOf(pod: Pod): string {
  return pod.spec?.serviceAccountName || (pod.spec?.serviceAccount as string | undefined) || 'default';
}

export function isWindowsPod(pod: Pod): boolean {
  const selector = pod.spec?.nodeSelector;
  // The beta label still selects Windows nodes on older clusters; the AWS peer honours it.
  return (
    pod.spec?.os?.name === 'windows' ||
    selector?.['kubernetes.io/os'] === 'windows' ||
    selector?.['beta.kubernetes.io/os'] === 'windows'
  );
}

const PROJECT_DOMAIN = 'workload-identity-webhook.io/';

/** Selects a Secret for the webhook and the token requestor: `aws`, `azure` or `gcp`. */
export const PROVIDER_LABEL = `${PROJECT_DOMAIN}provider`;
/** The ServiceAccount the token is issued for: `name` (the Secret's namespace) or `namespace/name`. */
export const SERVICE_ACCOUNT_ANNOTATION = `${PROJECT_DOMAIN}service-account`;
/** On a ServiceAccount: namespaces whose Secrets may reference it (comma-separated, `*` for all). */
export const ALLOWED_REFERRERS_ANNOTATION = `${PROJECT_DOMAIN}allowed-referrer-namespaces`;
/** Where the Pod mounts the Secret's `token` key, when not the default. */
export const TOKEN_PATH_ANNOTATION = `${PROJECT_DOMAIN}token-path`;
/** Any value asks the token requestor for a new token now; it removes the annotation with that write. */
export const RENEW_ANNOTATION = `${PROJECT_DOMAIN}renew-requested-at`;

/** Gardener's selection: both labels, as Gardener's token requestor and provider extensions use them. */
export const GARDENER_PURPOSE_LABEL = 'security.gardener.cloud/purpose';
export const GARDENER_PURPOSE = 'workload-identity-token-requestor';
export const GARDENER_PROVIDER_LABEL = 'workloadidentity.security.gardener.cloud/provider';

// Letters, digits and . _ - / \ only: the path goes into an INI file, a dotenv file and JSON, and
// a newline or quote there would let a Secret's writer add settings of their own.
const TOKEN_PATH = /^(?:\/|[A-Za-z]:\\)[A-Za-z0-9._\-/\\]*$/;

/** An absolute POSIX path, or a Windows one (C:\\...), in the safe character set. */
export function isTokenPath(value: string): boolean {
  return value.length <= MAX_TOKEN_PATH && TOKEN_PATH.test(value);
}

/** Where Gardener's provider extensions mount the Secret (WorkloadIdentityMountPath) plus `/token`. */
export const DEFAULT_SECRET_TOKEN_PATH = '/var/run/secrets/gardener.cloud/workload-identity/token';

/** The labels that select a Secret (selectSecret): all the token requestor keeps of its labels. */
export const SECRET_LABELS: readonly string[] = [PROVIDER_LABEL, GARDENER_PURPOSE_LABEL, GARDENER_PROVIDER_LABEL];

/**
 * The ServiceAccount annotations the Secret path reads (the cache must keep them): the grant, 64
 * namespaces (DNS labels) or `*`.
 */
export const SECRET_SERVICE_ACCOUNT_ANNOTATIONS: readonly AnnotationBound[] = [
  listBound(ALLOWED_REFERRERS_ANNOTATION, 63),
];

/** A JSON object: neither null nor a list. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A DNS-1123 label's characters; a label has at most 63 of them. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A DNS-1123 label, as the API server validates one: a namespace, container or volume name. */
export function isDnsLabel(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 63 && DNS_LABEL.test(value);
}

/** A namespace name, as the API server validates it: a DNS-1123 label. */
export function isNamespaceName(value: unknown): value is string {
  return isDnsLabel(value);
}

/** An object name (Pod, ServiceAccount, Secret): a DNS-1123 subdomain. */
export function isObjectName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 253 && DNS_SUBDOMAIN.test(value);
}
