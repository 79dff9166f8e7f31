// Azure facts read by its flags, its Pod provider and tenant policy.
import type { CloudFacts } from '../facts.ts';

const GUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
/** A GUID: client ids, tenant ids. */
export const GUID_PATTERN = new RegExp(`^${GUID}$`);
// Entra accepts a tenant's verified domain in place of its id.
const TENANT_PATTERN = new RegExp(`^(?:${GUID}|[a-zA-Z0-9][a-zA-Z0-9.-]{0,252}\\.[a-zA-Z]{2,})$`);

export const AZURE_FACTS = {
  title: 'Azure',
  // Entra ID refuses tokens that live less than an hour or more than a day.
  tokenBounds: { min: 3600, max: 86400, belowMinimum: 'refuse' },
  tenant: { pattern: TENANT_PATTERN, what: "a tenant id (a GUID or the tenant's domain)" },
} as const satisfies CloudFacts;

export function isTenantId(value: string): boolean {
  return TENANT_PATTERN.test(value);
}

/**
 * Entra ID takes at most 20 federated identity credentials per application or user-assigned
 * managed identity; the 21st is refused.
 * https://learn.microsoft.com/en-us/entra/workload-id/workload-identity-federation-considerations
 * (and Graph's application-post-federatedidentitycredentials: "Maximum of 20 objects").
 */
export const AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY = 20;
