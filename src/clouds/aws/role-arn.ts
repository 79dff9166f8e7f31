// IAM role ARNs as the AWS peer reads them: validated, and, with --aws-compose-role-arn, a bare
// role name or path completed to the account's ARN (the peer's --compose-role-arn, its PR #95).
import { denial, type Denial } from '../../errors.ts';

export const ROLE_ARN_PATTERN = /^arn:aws[a-z0-9-]*:iam::(\d{12}):role\/(?:[\w+=,.@-]+\/)*[\w+=,.@-]{1,64}$/;
const ROLE_ARN_FORM = 'arn:<partition>:iam::<12-digit account>:role/<optional path/><name>';

export interface RoleArn {
  partition: string;
  account: string;
  arn: string;
}

/** The account and partition a bare role name completes to. */
export interface RoleArnBase {
  partition: string;
  account: string;
}

/** Validates a role ARN; the message names where it came from and the expected form. */
export function parseRoleArn(value: string, where: string): RoleArn | Denial {
  const arn = value.trim();
  const match = ROLE_ARN_PATTERN.exec(arn);
  if (!match) {
    return denial('InvalidRoleArn', `${where}="${value}" is not an IAM role ARN; expected ${ROLE_ARN_FORM}`);
  }
  return { partition: arn.split(':')[1], account: match[1], arn };
}

/**
 * The peer's completion (pkg/cache/cache.go addSA): a value without "arn:" anywhere becomes
 * arn:<partition>:iam::<account>:role/<value>, so "s3-reader" and "team/s3-reader" name roles of
 * the account; anything else is left as written.
 */
export function composeRoleArn(value: string, base: RoleArnBase | undefined): string {
  if (!base || value.includes('arn:')) return value;
  return `arn:${base.partition}:iam::${base.account}:role/${value}`;
}

/**
 * The partition of a region, as the peer derives it from the instance identity document's
 * region (main.go): cn- aws-cn, us-gov- aws-us-gov, us-iso- aws-iso, us-isob- aws-iso-b, eusc-
 * aws-eusc, any other aws.
 */
export function partitionOfRegion(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  if (region.startsWith('us-iso-')) return 'aws-iso';
  if (region.startsWith('us-isob-')) return 'aws-iso-b';
  if (region.startsWith('eusc-')) return 'aws-eusc';
  return 'aws';
}

/**
 * A role annotation as written: completed, then validated. The message of a value that does not
 * validate says what it was completed to.
 */
export function readRoleArn(raw: string, where: string, base: RoleArnBase | undefined): RoleArn | Denial {
  const value = raw.trim();
  const composed = composeRoleArn(value, base);
  if (composed === value) return parseRoleArn(raw, where);
  const role = parseRoleArn(composed, where);
  if (!('reason' in role)) return role;
  return denial(
    'InvalidRoleArn',
    `${where}="${raw}" (completed by --aws-compose-role-arn to "${composed}") is not an IAM role ARN; expected ${ROLE_ARN_FORM}, or a role name or path`,
  );
}
