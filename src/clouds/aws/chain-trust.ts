// The trust a chained role (`source-profiles`) needs: it is assumed with its source role's
// credentials, not with the token, so its trust policy names the source role (sts:AssumeRole),
// and the source role needs the permission to call sts:AssumeRole on it. Both are required
// across accounts, the point of chaining (the AWS peer's issue #258).
import type { TrustIdentity } from '../types.ts';
import { shellCommand, shellComment, shellCommentJson, unique } from '../../shell.ts';

export interface AssumeRoleStatement {
  Effect: 'Allow';
  Principal: { AWS: string | string[] };
  Action: 'sts:AssumeRole';
}

/** A source role's inline policy: the roles chained from it that it may assume. */
export interface AwsRolePermission {
  roleArn: string;
  roleName: string;
  policyName: string;
  /** The ServiceAccounts whose chains pass through it. */
  trustedBy: string[];
  policy: {
    Version: '2012-10-17';
    Statement: { Effect: 'Allow'; Action: 'sts:AssumeRole'; Resource: string | string[] }[];
  };
}

/** `put-role-policy` replaces the inline policy of this name: it lists every role chained from the source. */
const CHAIN_POLICY_NAME = 'workload-identity-webhook-role-chaining';

/** The source role of a chained identity, undefined for one that presents the token. */
export const sourceRoleOf = (i: TrustIdentity): string | undefined => i.identity.sourceRoleArn || undefined;

const one = (values: string[]): string | string[] => (values.length === 1 ? values[0] : values);

/** The statement admitting the source roles of these chained members, if any. */
export function assumeRoleStatements(members: readonly TrustIdentity[]): AssumeRoleStatement[] {
  const sources = unique(members.flatMap((i) => sourceRoleOf(i) ?? [])).sort();
  if (sources.length === 0) return [];
  return [{ Effect: 'Allow', Principal: { AWS: one(sources) }, Action: 'sts:AssumeRole' }];
}

/** Per source role, the permission to assume the roles chained from it. */
export function rolePermissions(identities: readonly TrustIdentity[]): AwsRolePermission[] {
  const bySource = new Map<string, TrustIdentity[]>();
  for (const i of identities) {
    const source = sourceRoleOf(i);
    if (source !== undefined) bySource.set(source, [...(bySource.get(source) ?? []), i]);
  }
  return [...bySource].map(([roleArn, chained]) => ({
    roleArn,
    roleName: roleArn.slice(roleArn.lastIndexOf('/') + 1),
    policyName: CHAIN_POLICY_NAME,
    trustedBy: unique(chained.map((i) => i.source)),
    policy: {
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: 'sts:AssumeRole',
          Resource: one(unique(chained.map((i) => i.identity.roleArn)).sort()),
        },
      ],
    },
  }));
}

export function permissionCommands(p: AwsRolePermission): string[] {
  return [
    shellComment(
      `role ${p.roleArn} may assume the roles chained from it (source-profiles of ${p.trustedBy.join(', ')}); this replaces its inline policy ${p.policyName}`,
    ),
    shellCommand([
      'aws',
      'iam',
      'put-role-policy',
      '--role-name',
      p.roleName,
      '--policy-name',
      p.policyName,
      '--policy-document',
      JSON.stringify(p.policy),
    ]),
  ];
}

export function permissionText(p: AwsRolePermission): string[] {
  return [shellComment(`permission of role ${p.roleArn} to assume its chained roles:`), ...shellCommentJson(p.policy)];
}
