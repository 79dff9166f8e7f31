// AWS in tenant policy: an identity provider is a partition and its accounts (none: the whole
// partition); a policy sees the role, its account and partition.
import type { CloudPolicy } from '../types.ts';
import { AWS_ACCOUNT_ID, AWS_PARTITION } from './facts.ts';
import type { AwsOptions } from './options.ts';

export interface AwsDeclared {
  /** aws, aws-cn, aws-us-gov, ... */
  partition: string;
  /** None: every account of the partition. */
  accountIds: string[];
}

export type AwsField = 'partition' | 'account' | 'roleArn';

export const awsPolicy: CloudPolicy<AwsOptions, AwsDeclared, AwsField> = {
  identityFields: ['partition', 'account', 'roleArn'],
  schema: {
    description: 'AWS accounts in one partition; no accountIds trusts the whole partition.',
    properties: {
      partition: {
        type: 'string',
        pattern: AWS_PARTITION.source,
        description: 'aws (default), aws-cn, aws-us-gov, ...',
      },
      accountIds: { type: 'array', items: { type: 'string', pattern: AWS_ACCOUNT_ID.source } },
    },
    defaults: {
      region: "AWS_REGION and AWS_DEFAULT_REGION for these accounts' Pods",
      audience: 'token audience unless the ServiceAccount names one',
    },
  },
  parseDeclared: (r, o, path) => ({
    partition:
      r.matching(
        o.partition,
        `${path}.partition`,
        AWS_PARTITION,
        'an AWS partition such as aws, aws-cn or aws-us-gov',
      ) ?? 'aws',
    accountIds: r.list(o.accountIds, `${path}.accountIds`, (x, p) =>
      r.matching(x, p, AWS_ACCOUNT_ID, 'an AWS account id of 12 digits (quote it in YAML)', true),
    ),
  }),
  identity: (raw) => {
    const roleArn = raw.roleArn ?? '';
    return { roleArn, account: raw.account ?? '', partition: raw.partition ?? roleArn.split(':')[1] ?? '' };
  },
  describeIdentity: (id) => `AWS account ${id.account} (partition ${id.partition}) of role ${id.roleArn}`,
  describeDeclared: (p) => (p.accountIds.length ? `accounts ${p.accountIds.join(', ')}` : `partition ${p.partition}`),
  match: (p, id) => {
    if (p.partition !== id.partition) return undefined;
    if (p.accountIds.includes(id.account)) return 'exact';
    return p.accountIds.length === 0 ? 'wide' : undefined;
  },
};
