// The clouds the webhook knows, and the facts about each that more than one layer needs (flags,
// providers, tenant policy): a name for messages, the token expiry bounds and the region format.
// Everything iterates CLOUDS; a new cloud adds its entry here rather than a branch elsewhere.

/** Projected token expiry: the API server's own bounds (600 s to 2^32 s). */
export const API_SERVER_TOKEN_BOUNDS = { min: 600, max: 2 ** 32 } as const;

export interface TokenBounds {
  min: number;
  max: number;
  /**
   * What a ServiceAccount annotation below the minimum gets: raised to it (the cloud's
   * documented behaviour) or refused. Flags and tenant policy defaults below it are always refused.
   */
  belowMinimum: 'raise' | 'refuse';
}

export interface RegionFormat {
  pattern: RegExp;
  /** "an AWS region", for messages. */
  what: string;
  example: string;
}

export interface CloudFacts {
  /** Shown in messages: "for AWS". */
  title: string;
  tokenBounds: TokenBounds;
  /** Clouds whose identities carry a region; undefined when a region means nothing to the cloud. */
  region?: RegionFormat;
}

/** Region codes of every partition, the European Sovereign Cloud's (eusc-de-east-1) included. */
export const AWS_REGION_PATTERN = /^[a-z]{2,4}(-[a-z]+)+-\d+$/;
export const GCP_REGION_PATTERN = /^[a-z]+(-[a-z]+)+\d+$/;

export const CLOUDS = {
  aws: {
    title: 'AWS',
    tokenBounds: { ...API_SERVER_TOKEN_BOUNDS, belowMinimum: 'raise' },
    region: { pattern: AWS_REGION_PATTERN, what: 'an AWS region', example: 'eu-west-1' },
  },
  // Entra ID refuses tokens that live less than an hour or more than a day.
  azure: { title: 'Azure', tokenBounds: { min: 3600, max: 86400, belowMinimum: 'refuse' } },
  // Google's STS wants an hour at least; shorter annotations are raised, as GKE does.
  gcp: {
    title: 'GCP',
    tokenBounds: { min: 3600, max: API_SERVER_TOKEN_BOUNDS.max, belowMinimum: 'raise' },
    region: { pattern: GCP_REGION_PATTERN, what: 'a Google Cloud region', example: 'europe-west1' },
  },
} as const satisfies Record<string, CloudFacts>;

export type ProviderName = keyof typeof CLOUDS;

/** The clouds in registry order (the order of injection, messages and schema lists). */
export const PROVIDER_NAMES = Object.keys(CLOUDS) as ProviderName[];

/**
 * The end of a switch over the clouds: with every cloud handled, TypeScript proves this is never
 * reached, and a cloud added to CLOUDS without its case fails to compile instead of falling through.
 */
export function unknownCloud(name: never): never {
  throw new Error(`unknown cloud ${String(name)}`);
}

export function cloudFacts(name: ProviderName): CloudFacts {
  return CLOUDS[name];
}
