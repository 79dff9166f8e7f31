// AWS facts read by its flags, its Pod provider and tenant policy.
import { API_SERVER_TOKEN_BOUNDS, type CloudFacts } from '../facts.ts';

/** Region codes of every partition, the European Sovereign Cloud's (eusc-de-east-1) included. */
export const AWS_REGION_PATTERN = /^[a-z]{2,4}(-[a-z]+)+-\d+$/;

export const AWS_FACTS = {
  title: 'AWS',
  tokenBounds: { ...API_SERVER_TOKEN_BOUNDS, belowMinimum: 'raise' },
  region: { pattern: AWS_REGION_PATTERN, what: 'an AWS region', example: 'eu-west-1' },
} as const satisfies CloudFacts;
