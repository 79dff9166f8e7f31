// Several workload identity providers in one Pod (no peer offers it): beside the
// ServiceAccount's provider, `cloud.google.com/workload-identity-providers` names more, each with
// its own token (its provider's audience) and its own `external_account` file in the token
// volume, projected like the first from a Pod annotation. GOOGLE_APPLICATION_CREDENTIALS keeps
// naming the first file; code or a container's own GOOGLE_APPLICATION_CREDENTIALS picks another.
import { listBound } from '../../annotation-bounds.ts';
import { MAX_AUDIENCE, MAX_SCALAR_ANNOTATION } from '../../bounds.ts';
import { denial, type Denial, isDenial } from '../../errors.ts';
import type { VolumeProjection } from '../../kube/types.ts';
import { parseNamedEntries, windowsPath } from '../common.ts';
import type { Injection, PodContext, PodProvider } from '../types.ts';
import { GCP_MOUNT_PATH } from './conventions.ts';
import {
  EMAIL_PATTERN,
  externalAccountConfig,
  parseWorkloadIdentityProvider,
  type WorkloadIdentityProvider,
} from './external-account.ts';
import type { GcpOptions } from './options.ts';

const PROVIDERS_ANNOTATION = 'cloud.google.com/workload-identity-providers';
/** The Pod annotation a named provider's file is projected from: the prefix, then the name. */
export const CREDENTIALS_ANNOTATION_PREFIX = 'workload-identity-webhook.io/gcp-credentials-';

// Names fit an annotation key's name part (63 characters, "gcp-credentials-" and the name) and a file name.
const NAME = /^[a-z0-9]([a-z0-9-]{0,34}[a-z0-9])?$/;

interface Named {
  name: string;
  provider: WorkloadIdentityProvider;
  email: string | undefined;
}

/** The token and file names of a named provider in the token volume. */
const tokenFileOf = (name: string) => `token-${name}`;
const credentialsFileOf = (name: string) => `federation-${name}.json`;

/**
 * `<name>=<provider>` (direct resource access) or `<name>=<provider>:<service account email>`
 * entries, separated by commas or new lines. New with this webhook: anything malformed is
 * refused, with or without --strict.
 */
function parseNamedProviders(value: string, where: string): Named[] | Denial {
  const key = `${where} annotation ${PROVIDERS_ANNOTATION}`;
  const pairs = parseNamedEntries(value, {
    key,
    entry: '<name>=<provider>',
    form: 'expected <name>=<provider> or <name>=<provider>:<service account email>, separated by commas',
    noun: 'provider',
    nameProblem: (name) =>
      NAME.test(name)
        ? undefined
        : `"${name}" is not a name (1 to 36 lower-case letters, digits and "-", a letter or digit at each end)`,
    twice: (name) => `"${name}" is named twice`,
  });
  if (isDenial(pairs)) return pairs;
  const named: Named[] = [];
  for (const [name, entry] of pairs) {
    // The email never holds ":", the provider's audience form may ("https://").
    const colon = entry.lastIndexOf(':');
    const email = colon > 0 && entry.slice(colon + 1).includes('@') ? entry.slice(colon + 1) : undefined;
    const provider = parseWorkloadIdentityProvider(email ? entry.slice(0, colon) : entry, `${key} ${name}`);
    if (isDenial(provider)) return provider;
    if (email !== undefined && !EMAIL_PATTERN.test(email))
      return denial(
        'InvalidServiceAccountEmail',
        `${key} ${name}: "${email}" is not a Google service account email; expected NAME@PROJECT.iam.gserviceaccount.com`,
      );
    named.push({ name, provider, email });
  }
  return named;
}

/**
 * The provider with the named providers added to each injection: their tokens and files in the
 * token volume, their files' Pod annotations, and each as an identity of its own.
 */
export function withNamedProviders(inner: PodProvider, options: GcpOptions): PodProvider {
  return {
    ...inner,
    // 64 entries of a name (36), a provider (as the dialects' key) and an email (254).
    serviceAccountAnnotations: [
      ...inner.serviceAccountAnnotations,
      listBound(PROVIDERS_ANNOTATION, 36 + 1 + MAX_AUDIENCE + 1 + MAX_SCALAR_ANNOTATION),
    ],
    resolvePod(ctx: PodContext): Injection | Denial | undefined {
      const injection = inner.resolvePod(ctx);
      const sa = ctx.serviceAccount;
      const raw = sa?.annotations[PROVIDERS_ANNOTATION];
      if (injection === undefined || isDenial(injection) || !sa || raw === undefined || raw.trim() === '')
        return injection;
      const named = parseNamedProviders(raw, `ServiceAccount ${sa.namespace}/${sa.name}`);
      if (isDenial(named)) return named;
      return addNamed(injection, named, options, ctx.windows);
    },
  };
}

function addNamed(injection: Injection, named: Named[], options: GcpOptions, windows: boolean): Injection {
  // biome-ignore lint/style/noNonNullAssertion: The GCP injection's volume is always a projected one with a ServiceAccount token among its sources.
  const sources = injection.volume.projected!.sources!;
  // biome-ignore lint/style/noNonNullAssertion: one of those sources is the ServiceAccount token.
  const expirationSeconds = sources.find((s) => s.serviceAccountToken)!.serviceAccountToken!.expirationSeconds;
  const added: VolumeProjection[] = [];
  const annotations: Record<string, string> = {};
  const identities: Record<string, string>[] = [];
  for (const { name, provider, email } of named) {
    // Each provider allows its own default audience unless the cluster names one for all.
    const audience = options.audience || `//iam.googleapis.com/${provider.name}`;
    const tokenFile = `${GCP_MOUNT_PATH}/${tokenFileOf(name)}`;
    const annotation = `${CREDENTIALS_ANNOTATION_PREFIX}${name}`;
    annotations[annotation] = JSON.stringify(
      externalAccountConfig({
        provider,
        serviceAccountEmail: email,
        tokenFile: windows ? windowsPath(tokenFile) : tokenFile,
      }),
    );
    added.push(
      { serviceAccountToken: { audience, expirationSeconds, path: tokenFileOf(name) } },
      {
        downwardAPI: {
          items: [
            {
              path: credentialsFileOf(name),
              fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${annotation}']` },
            },
          ],
        },
      },
    );
    identities.push({
      name,
      workloadIdentityProvider: provider.name,
      projectNumber: provider.projectNumber,
      pool: provider.pool,
      audience,
      ...(email ? { serviceAccountEmail: email } : {}),
    });
  }
  return {
    ...injection,
    volume: { ...injection.volume, projected: { ...injection.volume.projected, sources: [...sources, ...added] } },
    annotations: { ...injection.annotations, ...annotations },
    additionalIdentities: [...(injection.additionalIdentities ?? []), ...identities],
  };
}
