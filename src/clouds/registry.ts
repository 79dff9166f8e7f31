// The clouds the webhook knows by name, with the facts each states in its folder (facts.ts): the
// provider name type derives from here. The cloud modules themselves are CLOUD_MODULES
// (clouds/index.ts); a new cloud adds one line to each.
import { AWS_FACTS } from './aws/facts.ts';
import { AZURE_FACTS } from './azure/facts.ts';
import type { CloudFacts } from './facts.ts';
import { GCP_FACTS } from './gcp/facts.ts';

export const CLOUDS = { aws: AWS_FACTS, azure: AZURE_FACTS, gcp: GCP_FACTS } as const satisfies Record<
  string,
  CloudFacts
>;

export type ProviderName = keyof typeof CLOUDS;

/** The clouds in registry order (the order of injection, messages and schema lists). */
export const PROVIDER_NAMES = Object.keys(CLOUDS) as ProviderName[];

/** One cloud's facts, as the shape every cloud shares. */
export function cloudFacts(name: ProviderName): CloudFacts {
  return CLOUDS[name];
}
