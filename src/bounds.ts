// The sizes of what the webhook reads from an object under review, and of what it keeps between
// reviews, in one place. A Pod reaches a mutating webhook before kube-apiserver validates it, and a
// dryRun Pod is bounded only by the request's 3 MiB: every string and list the webhook reads gets
// a size here, checked before any work (admission/shape.ts, the clouds' list parsers), so that a
// Pod over one is refused with a message naming the field and the bound, and the process never
// pays. Each value is what a legitimate object needs, or kube-apiserver's own limit where it has
// one (docs/hardening.md lists them all).

/** kube-apiserver's limit on an object's annotations, keys and values together (ValidateAnnotations). */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** A label's value (kube-apiserver's own limit): the webhook reads the provider labels' values. */
export const MAX_LABEL_VALUE = 63;

/** A DNS-1123 label: container, volume and namespace names. */
export const MAX_DNS_LABEL = 63;

/** A DNS-1123 subdomain: object names (a ServiceAccount's). */
export const MAX_DNS_SUBDOMAIN = 253;

/** Entries of a list annotation (role-arns, skip-containers, container client ids, GCP providers). */
export const MAX_LIST_ENTRIES = 64;

/** One entry of a list annotation: an IAM role ARN's own limit (2,048), the longest an entry needs. */
export const MAX_LIST_ENTRY = 2048;

/**
 * AWS role chaining (`source-profiles`): the AssumeRole calls from a profile back to the
 * web-identity profile its chain starts at. A cross-account chain needs one, two through a hub
 * account; each costs an STS call at every refresh, and a chained session lasts at most an hour.
 */
export const MAX_CHAIN_HOPS = 4;

/** An IAM role ARN: STS's limit on a RoleArn (AssumeRoleWithWebIdentity). */
export const MAX_ROLE_ARN = 2048;

/** A token audience or a workload identity provider name (about 170 characters in its full form). */
export const MAX_AUDIENCE = 1024;

/** A single-valued annotation a provider reads (an expiry, a region, a switch, a port). */
export const MAX_SCALAR_ANNOTATION = 256;

/** A list annotation of names: 64 names of 63 characters, with room for separators and blanks. */
export const MAX_NAME_LIST_ANNOTATION = MAX_LIST_ENTRIES * (MAX_DNS_LABEL + 16);

/** A container's own value of a credential variable the webhook compares (a role ARN, a path: PATH_MAX). */
export const MAX_CREDENTIAL_ENV_VALUE = 4096;

/** A labelled Secret's reference to a ServiceAccount: `namespace/name` (63 + 1 + 253), blanks around it. */
export const MAX_SECRET_REFERENCE = 512;

/** A labelled Secret's token-path annotation (model.ts isTokenPath). */
export const MAX_TOKEN_PATH = 1024;

/** A labelled Secret's `config` (a WorkloadIdentityConfig: a few hundred bytes), decoded, before it is parsed. */
export const MAX_SECRET_CONFIG_BYTES = 64 * 1024;

/** A token in a labelled Secret (a ServiceAccount token is 1 to 2 KiB): a longer one is not decoded. */
export const MAX_SECRET_TOKEN_BYTES = 16 * 1024;

/**
 * What a memo of the mutation core keeps between reviews (digests of the webhook's own values,
 * MACs of the records it signed): at most this many bytes of keys, and no key longer than
 * MAX_MEMO_KEY (a longer value is worked out each time, as cheaply as its size).
 */
export const MAX_MEMO_BYTES = 1024 * 1024;
export const MAX_MEMO_KEY = 4096;

/** An annotation map's size as kube-apiserver counts it: the bytes of every key and value. */
export function annotationsBytes(annotations: Readonly<Record<string, string>> | undefined): number {
  let bytes = 0;
  for (const key in annotations)
    if (Object.hasOwn(annotations, key)) bytes += Buffer.byteLength(key) + Buffer.byteLength(annotations[key]);
  return bytes;
}
