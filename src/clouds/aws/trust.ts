// The AWS side of the handshake: an IAM OIDC identity provider for the cluster's issuer, and for
// each role the trust policy that admits exactly its ServiceAccounts' tokens (sub and aud), split
// over several roles when it is longer than IAM's quota; and the EKS Pod Identity associations.
import { parseRoleArn, ROLE_ARN_PATTERN } from './role-arn.ts';
import type { CloudTrust, TrustContext, TrustFinding, TrustIdentity } from '../types.ts';
import { AWS_ROLE_NAME_LENGTH, AWS_ROLE_TRUST_POLICY_LENGTH } from './facts.ts';
import { partNames, splitToFit } from '../trust-split.ts';
import { type PodIdentityTrust, podIdentityFindings, podIdentityPart, podIdentityText } from './pod-identity-trust.ts';
import {
  type AssumeRoleStatement,
  type AwsRolePermission,
  assumeRoleStatements,
  permissionCommands,
  permissionText,
  rolePermissions,
  sourceRoleOf,
} from './chain-trust.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, unique } from '../../shell.ts';

/** A statement admitting ServiceAccount tokens of one audience through the account's OIDC provider. */
export interface AwsWebIdentityStatement {
  Effect: 'Allow';
  Principal: { Federated: string };
  Action: 'sts:AssumeRoleWithWebIdentity';
  Condition: { StringEquals: Record<string, string | string[]> };
}

interface AwsTrustPolicy {
  Version: '2012-10-17';
  Statement: (AwsWebIdentityStatement | AssumeRoleStatement)[];
}

interface AwsRoleTrust {
  roleArn: string;
  roleName: string;
  trustedBy: string[];
  trustPolicy: AwsTrustPolicy;
  /**
   * The policy is longer than the quota (--aws-role-trust-policy-length): IAM would refuse it, so
   * no command is printed for it; instead the roles it splits into, each within the quota.
   */
  overLimit?: { length: number; limit: number; split: Omit<AwsRoleTrust, 'overLimit'>[] };
}

export interface AwsTrust extends PodIdentityTrust {
  oidcProviders: { arn: string; url: string; account: string; clientIds: string[] }[];
  roles: AwsRoleTrust[];
  /** Role chaining: what each source role needs to assume the roles chained from it. */
  rolePermissions: AwsRolePermission[];
  commands: string[];
}

/** A trust policy's length as IAM counts it against the quota: without whitespace (JSON.stringify adds none). */
export function trustPolicyLength(policy: AwsTrustPolicy): number {
  return JSON.stringify(policy).length;
}

/** IAM names OIDC providers and their condition keys by the issuer without its scheme. */
function issuerHostPath(issuer: string): string {
  return issuer.replace(/^https:\/\//, '');
}

function oidcProviderArn(partition: string, account: string, issuer: string): string {
  return `arn:${partition}:iam::${account}:oidc-provider/${issuerHostPath(issuer)}`;
}

/**
 * The policy admitting `members`: one statement per audience. Conditions on different keys are
 * ANDed, values of one key ORed, so mixing audiences in one statement would admit a subject with
 * another's audience. Members reaching the role by chaining are admitted by their source role.
 */
function trustPolicyOf(providerArn: string, hostPath: string, members: readonly TrustIdentity[]): AwsTrustPolicy {
  const web = members.filter((i) => sourceRoleOf(i) === undefined);
  const statements = [...groupBy(web, (i) => i.audience)].map(([audience, group]) => {
    const subjects = unique(group.map((i) => i.subject)).sort();
    return {
      Effect: 'Allow' as const,
      Principal: { Federated: providerArn },
      Action: 'sts:AssumeRoleWithWebIdentity' as const,
      Condition: {
        StringEquals: {
          [`${hostPath}:sub`]: subjects.length === 1 ? subjects[0] : subjects,
          [`${hostPath}:aud`]: audience,
        },
      },
    };
  });
  return { Version: '2012-10-17', Statement: [...statements, ...assumeRoleStatements(members)] };
}

/** The role's trust, and when its policy is over the quota the roles it splits into (namespaces kept together). */
function roleTrust(
  roleArn: string,
  members: TrustIdentity[],
  policyOf: (m: readonly TrustIdentity[]) => AwsTrustPolicy,
  limit: number,
): AwsRoleTrust {
  const roleName = roleArn.slice(roleArn.lastIndexOf('/') + 1);
  const trustPolicy = policyOf(members);
  const role: AwsRoleTrust = { roleArn, roleName, trustedBy: unique(members.map((i) => i.source)), trustPolicy };
  const length = trustPolicyLength(trustPolicy);
  if (length <= limit) return role;
  const sorted = [...members].sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0));
  const parts = splitToFit(
    sorted,
    (i) => i.namespace,
    (part) => trustPolicyLength(policyOf(part)) <= limit,
  );
  const names = partNames(roleName, parts.length, AWS_ROLE_NAME_LENGTH);
  const base = roleArn.slice(0, roleArn.lastIndexOf('/') + 1);
  role.overLimit = {
    length,
    limit,
    split: parts.map((part, n) => ({
      roleArn: base + names[n],
      roleName: names[n],
      trustedBy: unique(part.map((i) => i.source)),
      trustPolicy: policyOf(part),
    })),
  };
  return role;
}

function awsTrust(issuer: string, identities: readonly TrustIdentity[], context: TrustContext): AwsTrust {
  const ours = identities.filter((i) => i.cloud === 'aws');
  const hostPath = issuerHostPath(issuer);
  const limit = context.settings.awsRoleTrustPolicyLength ?? AWS_ROLE_TRUST_POLICY_LENGTH.default;
  const roles: AwsTrust['roles'] = [];
  const providers = new Map<string, AwsTrust['oidcProviders'][number] & { partition: string }>();
  for (const [roleArn, members] of groupBy(ours, (i) => i.identity.roleArn)) {
    const role = parseRoleArn(roleArn, 'role');
    if ('reason' in role) continue; // `problem` left it out already
    const providerArn = oidcProviderArn(role.partition, role.account, issuer);
    const policyOf = (part: readonly TrustIdentity[]) => trustPolicyOf(providerArn, hostPath, part);
    roles.push(roleTrust(roleArn, members, policyOf, limit));
    // A role only chained to needs no OIDC provider in its account.
    const web = members.filter((i) => sourceRoleOf(i) === undefined);
    if (web.length === 0) continue;
    const provider = providers.get(providerArn) ?? {
      arn: providerArn,
      url: issuer,
      account: role.account,
      partition: role.partition,
      clientIds: [],
    };
    providers.set(providerArn, provider);
    provider.clientIds = unique([...provider.clientIds, ...web.map((i) => i.audience)]);
  }
  const permissions = rolePermissions(ours);

  const commands: string[] = [];
  for (const p of providers.values()) {
    commands.push(
      shellComment(
        `account ${p.account}: the cluster's issuer as an IAM OIDC identity provider (if it exists: aws iam add-client-id-to-open-id-connect-provider)`,
      ),
      shellCommand([
        'aws',
        'iam',
        'create-open-id-connect-provider',
        '--url',
        p.url,
        '--client-id-list',
        ...p.clientIds,
      ]),
    );
  }
  for (const r of roles) commands.push(...roleCommands(r));
  for (const p of permissions) commands.push(...permissionCommands(p));
  const podIdentity = podIdentityPart(context);
  commands.push(...podIdentity.commands);
  return {
    oidcProviders: [...providers.values()].map(({ partition: _, ...p }) => p),
    roles,
    rolePermissions: permissions,
    podIdentityAssociations: podIdentity.podIdentityAssociations,
    ...(podIdentity.clusterName && { clusterName: podIdentity.clusterName }),
    commands,
  };
}

function updatePolicy(roleName: string, policy: AwsTrustPolicy): string[] {
  return [
    'aws',
    'iam',
    'update-assume-role-policy',
    '--role-name',
    roleName,
    '--policy-document',
    JSON.stringify(policy),
  ];
}

/** A role's command; over the quota, the split as comments: applying it means new roles and new annotations. */
function roleCommands(r: AwsRoleTrust): string[] {
  if (!r.overLimit)
    return [
      shellComment(
        `role ${r.roleArn}, trusted by ${r.trustedBy.join(', ')} (a new role: aws iam create-role --role-name ${r.roleName} --assume-role-policy-document with the same JSON)`,
      ),
      shellCommand(updatePolicy(r.roleName, r.trustPolicy)),
    ];
  const { length, limit, split } = r.overLimit;
  return [
    shellComment(
      `role ${r.roleArn}: its trust policy is ${length} characters, over the quota of ${limit}, so no command is printed for it. A split that fits, ${split.length} roles (annotate each ServiceAccount with its part's role; give the new roles the same permissions):`,
    ),
    ...split.flatMap((part, n) => [
      shellComment(
        `  part ${n + 1}: role ${part.roleArn} (${trustPolicyLength(part.trustPolicy)} characters), trusted by ${part.trustedBy.join(', ')}`,
      ),
      shellComment(
        `  ${shellCommand(
          n === 0
            ? updatePolicy(part.roleName, part.trustPolicy)
            : [
                'aws',
                'iam',
                'create-role',
                '--role-name',
                part.roleName,
                '--assume-role-policy-document',
                JSON.stringify(part.trustPolicy),
              ],
        )}`,
      ),
    ]),
  ];
}

function awsFindings(report: AwsTrust): TrustFinding[] {
  const findings: TrustFinding[] = report.roles.flatMap((r) =>
    r.overLimit
      ? [
          {
            check: 'cloud-limits',
            verdict: 'fail' as const,
            subject: `role ${r.roleArn}`,
            message: `its trust policy for ${r.trustedBy.length} ServiceAccount(s) is ${r.overLimit.length} characters, over IAM's quota of ${r.overLimit.limit} ("Role trust policy length"): IAM refuses it (ACLSizePerRole)`,
            fix: `split it over ${r.overLimit.split.length} roles as trust prints (${r.overLimit.split.map((p) => p.roleName).join(', ')}), or raise the quota (up to ${AWS_ROLE_TRUST_POLICY_LENGTH.max}) and pass --aws-role-trust-policy-length`,
          },
        ]
      : [],
  );
  return [...findings, ...podIdentityFindings(report)];
}

export const awsTrustPart: CloudTrust<AwsTrust> = {
  verifier: 'AWS STS',
  algorithms: ['RS256'],
  // EKS Pod Identity's tokens go to the Pod Identity Agent, trusted through EKS associations.
  names: (identity) => identity.mode !== 'eks-pod-identity',
  // A chained role is assumed with its source role's credentials: the token goes to the source.
  presentsToken: (identity) => !identity.sourceRoleArn,
  // Whole-string match, no trimming: what goes into `aws` is exactly what the pattern allows.
  problem: (identity) =>
    [identity.roleArn, ...(identity.sourceRoleArn === undefined ? [] : [identity.sourceRoleArn])]
      .filter((arn) => !ROLE_ARN_PATTERN.test(arn ?? ''))
      .map((arn) => `role ARN ${JSON.stringify(arn)} is not an IAM role ARN`)[0],
  report: awsTrust,
  hasPart: (context) => podIdentityPart(context).podIdentityAssociations.length > 0,
  findings: awsFindings,
  text: (report) => [
    '',
    '## AWS',
    ...report.oidcProviders.flatMap((p) => [
      shellComment(`IAM OIDC identity provider ${p.arn}`),
      shellComment(`  url ${p.url}, client IDs (audiences): ${p.clientIds.join(', ')}`),
    ]),
    ...report.roles.flatMap((r) =>
      r.overLimit
        ? r.overLimit.split.flatMap((part, n) => [
            shellComment(
              `trust policy of role ${part.roleArn}, part ${n + 1} of the split of ${r.roleArn} (${part.trustedBy.join(', ')}):`,
            ),
            ...shellCommentJson(part.trustPolicy),
          ])
        : [
            shellComment(`trust policy of role ${r.roleArn} (${r.trustedBy.join(', ')}):`),
            ...shellCommentJson(r.trustPolicy),
          ],
    ),
    ...report.rolePermissions.flatMap(permissionText),
    ...podIdentityText(report),
    ...report.commands,
  ],
};
