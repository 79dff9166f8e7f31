// The small slice of the Kubernetes object model the webhook reads. Objects arrive as plain JSON
// from admission requests; everything not named here is carried through untouched.

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  subPath?: string;
  [key: string]: unknown;
}

/** One source of a container's `envFrom`: every key of a ConfigMap or Secret, each name prefixed. */
interface EnvFromSource {
  prefix?: string;
  configMapRef?: unknown;
  secretRef?: unknown;
}

export interface Container {
  name: string;
  env?: EnvVar[];
  envFrom?: EnvFromSource[];
  volumeMounts?: VolumeMount[];
  [key: string]: unknown;
}

interface ServiceAccountTokenProjection {
  audience?: string;
  expirationSeconds?: number;
  path: string;
}

export interface DownwardAPIFile {
  path: string;
  fieldRef?: { apiVersion?: string; fieldPath: string };
  mode?: number;
  [key: string]: unknown;
}

export interface VolumeProjection {
  serviceAccountToken?: ServiceAccountTokenProjection;
  downwardAPI?: { items?: DownwardAPIFile[] };
  [key: string]: unknown;
}

export interface Volume {
  name: string;
  projected?: { sources?: VolumeProjection[]; defaultMode?: number };
  [key: string]: unknown;
}

export interface PodSpec {
  serviceAccountName?: string;
  containers?: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  nodeSelector?: Record<string, string>;
  os?: { name?: string };
  [key: string]: unknown;
}

export interface Pod {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: PodSpec;
  [key: string]: unknown;
}

export interface Secret {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  [key: string]: unknown;
}

/**
 * What the webhook keeps of a ServiceAccount: identity and only the annotation keys the providers
 * read, each within its bound (src/annotation-bounds.ts), so a cluster of 50,000 ServiceAccounts
 * stays small in memory whatever their authors write.
 */
export interface ServiceAccountView {
  namespace: string;
  name: string;
  /** Read by the token requestor (its own reads); the admission cache does not keep it. */
  uid?: string;
  annotations: Readonly<Record<string, string>>;
  /**
   * Set when an annotation the webhook reads is over its bound: then no annotation is kept, and
   * every Pod and Secret that needs this ServiceAccount is refused with a message naming it.
   */
  oversize?: OversizeAnnotation;
}

/** An annotation over its bound: which one, and by how much (no value is kept). */
export interface OversizeAnnotation {
  key: string;
  bytes: number;
  maxBytes: number;
  /** For a list annotation over its count of entries. */
  entries?: number;
  maxEntries?: number;
}

/** What the webhook keeps of a Namespace: its name and labels. */
export interface NamespaceView {
  name: string;
  labels: Readonly<Record<string, string>>;
}
