// The clouds as modules: every layer above the providers reaches a cloud through CLOUD_MODULES
// and iterates it in registry order, never naming a cloud. A new cloud is one folder and one line.
import type { AnnotationBound } from '../annotation-bounds.ts';
import { awsCloud } from './aws/index.ts';
import { azureCloud } from './azure/index.ts';
import { gcpCloud } from './gcp/index.ts';
import { PROVIDER_NAMES, type ProviderName } from './registry.ts';
import type { SecretProvider } from './secret-config.ts';
import type { CloudSettings } from './settings.ts';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Cloud, PeerMetrics, PeerMetricsOptions, PodProvider, PolicyOverrides } from './types.ts';

export const CLOUD_MODULES = { aws: awsCloud, azure: azureCloud, gcp: gcpCloud } as const satisfies Record<
  ProviderName,
  Cloud<object>
>;

// Distributes over a union of names: Parts<'aws' | 'gcp'> is the union of both clouds' parts.
type Parts<K extends ProviderName> = K extends ProviderName
  ? (typeof CLOUD_MODULES)[K] extends Cloud<infer O, infer D, infer F, infer T>
    ? { options: O; declared: D; field: F; trust: T }
    : never
  : never;
/** A cloud's part of a declared identity provider in tenant policy. */
export type DeclaredOf<K extends ProviderName> = Parts<K>['declared'];
/** A cloud's fields of `identity` in tenant policy. */
export type IdentityFieldOf<K extends ProviderName> = Parts<K>['field'];
/** A cloud's part of the `trust` report. */
export type TrustReportOf<K extends ProviderName> = Parts<K>['trust'];

/** One cloud for code that handles every cloud alike: the parts' own types widened. */
export function cloudModule(name: ProviderName): Cloud<object> {
  return CLOUD_MODULES[name];
}

/**
 * Every Pod provider's options, from the flags. Tenant policy changes a copy and resolves the
 * Pod again with a provider built from it, so precedence stays the providers' own.
 */
export type ProviderOptions = { [K in ProviderName]: ReturnType<(typeof CLOUD_MODULES)[K]['options']> };

export type SecretProviders = Readonly<Record<ProviderName, SecretProvider>>;

function perCloud<T>(make: (name: ProviderName) => T): Record<ProviderName, T> {
  return Object.fromEntries(PROVIDER_NAMES.map((name) => [name, make(name)])) as Record<ProviderName, T>;
}

export function providerOptionsFromConfig(config: CloudSettings): ProviderOptions {
  return perCloud((name) => CLOUD_MODULES[name].options(config)) as ProviderOptions;
}

export function createProviders(config: CloudSettings): PodProvider[] {
  const options = providerOptionsFromConfig(config);
  return PROVIDER_NAMES.map((name) => podProvider(name, options[name]));
}

/** The providers of GEP-26 Secrets, from the same settings as the Pod providers. */
export function createSecretProviders(config: CloudSettings): SecretProviders {
  return perCloud((name) => CLOUD_MODULES[name].secretProvider(config));
}

/** The Pod provider of one cloud, with the overrides applied; undefined when they change nothing. */
export function providerWithOverrides(
  options: ProviderOptions,
  name: ProviderName,
  overrides: PolicyOverrides<object>,
): PodProvider | undefined {
  const base = options[name];
  const next = (CLOUD_MODULES[name] as Cloud<typeof base>).withOverrides(base, overrides);
  const changed = (Object.keys(next) as (keyof typeof next)[]).some((k) => base[k] !== next[k]);
  return changed ? podProvider(name, next) : undefined;
}

function podProvider(name: ProviderName, options: ProviderOptions[ProviderName]): PodProvider {
  return (CLOUD_MODULES[name] as Cloud<typeof options>).podProvider(options);
}

/**
 * The ServiceAccount annotations any provider reads, each key once: all the cache keeps. A key two
 * clouds read (an AWS prefix set to another cloud's) keeps the larger bound: each cloud's own
 * parser still judges the value.
 */
export function serviceAccountAnnotations(providers: readonly PodProvider[]): AnnotationBound[] {
  const byKey = new Map<string, AnnotationBound>();
  for (const bound of providers.flatMap((p) => p.serviceAccountAnnotations)) {
    const seen = byKey.get(bound.key);
    if (!seen || seen.maxBytes < bound.maxBytes) byKey.set(bound.key, bound);
  }
  return [...byKey.values()];
}

/** Starts what each cloud keeps current while serving; returns what stops them all. */
export function startClouds(settings: CloudSettings, log: Logger): () => void {
  const stops = PROVIDER_NAMES.map((name) => (CLOUD_MODULES[name] as Cloud<object>).start?.(settings, log));
  return () => {
    for (const stop of stops) stop?.();
  };
}

/** Every cloud's peer metrics as one: each sees every Pod review and counts those its peer would have. */
export function createPeerMetrics(registry: Registry, options: PeerMetricsOptions): Required<PeerMetrics> {
  const all = PROVIDER_NAMES.map((name) => CLOUD_MODULES[name].peerMetrics(registry, options));
  return {
    observePod: (review) => {
      for (const m of all) m.observePod(review);
    },
    forgetNamespace: (namespace) => {
      for (const m of all) m.forgetNamespace?.(namespace);
    },
  };
}
