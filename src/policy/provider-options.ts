// What tenant policy changes in a provider's options: computed defaults first, then the matched
// identity provider's, then the flags. The Pod is resolved again by the same cloud's provider
// built from the overridden options (clouds/index.ts), so precedence stays the providers' own
// (an annotation still wins over any default) and the core stays pure.
import { cloudModule } from '../clouds/index.ts';
import type { Overrides } from '../clouds/types.ts';
import type { IdentityProviderSpec } from './model.ts';

export function overridesFor(computed: Overrides, declared: IdentityProviderSpec | undefined): Overrides {
  const d = declared?.defaults ?? {};
  return {
    region: computed.region ?? d.region,
    tenant: computed.tenant,
    audience: computed.audience ?? d.audience,
    tokenExpirationSeconds: computed.tokenExpirationSeconds ?? d.tokenExpirationSeconds,
    ...(declared && cloudModule(declared.provider).policy.overrides?.(declared)),
  };
}
