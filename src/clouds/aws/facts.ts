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

/**
 * IAM's quota on a role trust policy's length, whitespace not counted: 2,048 characters by
 * default, up to 8,192 once raised in Service Quotas ("Role trust policy length"); past it
 * UpdateAssumeRolePolicy fails with "Cannot exceed quota for ACLSizePerRole".
 * https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html
 */
export const AWS_ROLE_TRUST_POLICY_LENGTH = { default: 2048, max: 8192 } as const;

/** IAM role names: 1 to 64 characters (same page). */
export const AWS_ROLE_NAME_LENGTH = 64;

/**
 * EKS cluster names: 1 to 100 of letters, digits, "-" and "_", starting with a letter or digit
 * (https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html).
 */
export const EKS_CLUSTER_NAME = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;
