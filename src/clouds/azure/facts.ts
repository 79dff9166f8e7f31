// Azure facts read by its flags, its Pod provider and tenant policy.
import type { CloudFacts } from '../facts.ts';

export const AZURE_FACTS = {
  title: 'Azure',
  // Entra ID refuses tokens that live less than an hour or more than a day.
  tokenBounds: { min: 3600, max: 86400, belowMinimum: 'refuse' },
} as const satisfies CloudFacts;
