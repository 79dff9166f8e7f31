// The shapes of the facts each cloud states once in its folder (clouds/<cloud>/facts.ts) and more
// than one layer reads: flags, Pod providers and tenant policy (parse and evaluate).

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

interface RegionFormat {
  pattern: RegExp;
  /** "an AWS region", for messages. */
  what: string;
  example: string;
}

/** How a cloud spells a tenant, for tenant policy's computed `tenant` default. */
interface TenantFormat {
  pattern: RegExp;
  /** "a tenant id (...)", for messages. */
  what: string;
}

export interface CloudFacts {
  /** Shown in messages: "for AWS". */
  title: string;
  tokenBounds: TokenBounds;
  /** Clouds whose identities carry a region; undefined when a region means nothing to the cloud. */
  region?: RegionFormat;
  /** Clouds whose identities name a tenant a default may compute; undefined for the others. */
  tenant?: TenantFormat;
}
