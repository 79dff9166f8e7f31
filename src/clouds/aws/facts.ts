// AWS facts read by its flags, its Pod provider and tenant policy.
import { API_SERVER_TOKEN_BOUNDS, type CloudFacts } from '../facts.ts';

/** Region codes of every partition, the European Sovereign Cloud's (eusc-de-east-1) included. */
export const AWS_REGION_PATTERN = /^[a-z]{2,4}(-[a-z]+)+-\d+$/;
/**
 * A region name as the flags, annotations and instance metadata give it: what no SDK could read
 * as a region is refused, and region shapes AWS adds later keep working.
 */
export const AWS_REGION_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;
/** 12 digits; the source is also the pattern in tenant policy's CRD schema. */
export const AWS_ACCOUNT_ID = /^[0-9]{12}$/;
/** A partition (aws, aws-cn, aws-us-gov, ...); the source is also the CRD schema's pattern. */
export const AWS_PARTITION = /^aws(-[a-z]+)*$/;

export const AWS_FACTS = {
  title: 'AWS',
  tokenBounds: { ...API_SERVER_TOKEN_BOUNDS, belowMinimum: 'raise' },
  region: { pattern: AWS_REGION_PATTERN, what: 'an AWS region', example: 'eu-west-1' },
} as const satisfies CloudFacts;
