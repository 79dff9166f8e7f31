import type { Denial } from '../errors.ts';
import type { Container, EnvVar, Pod, ServiceAccountView, Volume, VolumeMount } from '../kube/types.ts';

export type { ProviderName } from './registry.ts';
import type { ProviderName } from './registry.ts';
import type { Config } from '../config.ts';
import type { AzureCloud } from './azure/environments.ts';
import type { SecretProvider } from './secret-config.ts';

/**
 * Everything one provider adds to a Pod. The mutation core turns it into additive JSON Patch
 * operations; providers never see the patch.
 */
export interface Injection {
  provider: ProviderName;
  /** The projected volume: a ServiceAccount token with this provider's audience, and any files. */
  volume: Volume;
  mountPath: string;
  /** More volumes, each mounted into every container the provider serves (pfnet's layout). */
  extraVolumes?: { volume: Volume; mount: VolumeMount }[];
  /** Runs before every other init container (pfnet's gcloud setup); never mutated itself. */
  initContainer?: Container;
  /**
   * Env vars in groups: a group is added to a container only when none of its names is set
   * there already (AWS_REGION and AWS_DEFAULT_REGION travel together; most groups hold one).
   */
  envGroups: EnvVar[][];
  /** Pod annotations the volume projects through the downward API (the GCP credential file). */
  annotations: Record<string, string>;
  /** Pod labels (the AWS peer's `eks.amazonaws.com/pod-identity: enabled`). */
  labels?: Record<string, string>;
  /** Container and init container names this provider leaves alone. */
  skipContainers: ReadonlySet<string>;
  /**
   * The container already configures this identity itself (given its env var names): the
   * provider adds nothing to it, not even the mount.
   */
  satisfied?: (envNames: ReadonlySet<string>) => boolean;
  /** The identity claimed, for logs, audit annotations and tenant policy. */
  identity: Record<string, string>;
  /** Shown to the client by the API server; the Pod is still admitted. */
  warnings?: string[];
}

export interface PodContext {
  pod: Pod;
  namespace: string;
  /** Undefined when the Pod's ServiceAccount does not exist (yet). */
  serviceAccount: ServiceAccountView | undefined;
  /** The Pod runs on Windows nodes: token paths in env vars and files are Windows paths. */
  windows: boolean;
}

export interface PodProvider {
  readonly name: ProviderName;
  /** ServiceAccount annotation prefixes this provider reads; the cache keeps only these. */
  readonly annotationPrefixes: readonly string[];
  /** undefined: this provider has nothing to inject into this Pod. */
  resolvePod(ctx: PodContext): Injection | Denial | undefined;
}

export { isDenial } from '../errors.ts';

/**
 * Values tenant policy puts in place of the flags for one identity (docs/policy.md); undefined
 * keeps the flag's value.
 */
export interface Overrides {
  region?: string;
  tenant?: string;
  audience?: string;
  tokenExpirationSeconds?: number;
  /** Azure: the national cloud of the matched identity provider. */
  azureCloud?: AzureCloud;
}

/**
 * One cloud, as the rest of the webhook sees it: its Pod provider's options from the flags (plain
 * data), those options with tenant policy's overrides, the Pod provider built from options, and
 * the Secret provider. Facts needed below the providers (bounds, names) live in CLOUDS.
 */
export interface Cloud<Options extends object> {
  readonly name: ProviderName;
  options(config: Config): Options;
  withOverrides(options: Options, overrides: Overrides): Options;
  podProvider(options: Options): PodProvider;
  secretProvider(config: Config): SecretProvider;
}
