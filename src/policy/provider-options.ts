// What tenant policy changes in a provider's options: computed defaults first, then the matched
// identity provider's, then the flags; and the matched identity provider itself, whose own fields
// its cloud reads. The Pod is resolved again by the same cloud's provider built from the
// overridden options (clouds/index.ts), so precedence stays the providers' own (an annotation
// still wins over any default) and the core stays pure.
import type { PolicyDefaults, PolicyOverrides } from '../clouds/types.ts';
import type { IdentityProviderSpec } from './model.ts';

export function overridesFor(
  computed: PolicyDefaults,
  declared: IdentityProviderSpec | undefined,
): PolicyOverrides<IdentityProviderSpec> {
  const d = declared?.defaults ?? {};
  return {
    values: {
      region: computed.region ?? d.region,
      tenant: computed.tenant,
      audience: computed.audience ?? d.audience,
      tokenExpirationSeconds: computed.tokenExpirationSeconds ?? d.tokenExpirationSeconds,
    },
    declared,
  };
}
