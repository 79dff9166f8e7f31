// The AWS side of the handshake: an IAM OIDC identity provider for the cluster's issuer, and for
// each role the trust policy that admits exactly its ServiceAccounts' tokens (sub and aud).
import { parseRoleArn, ROLE_ARN_PATTERN } from './pod.ts';
import type { CloudTrust, TrustIdentity } from '../types.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, unique } from '../../shell.ts';

export interface AwsTrustPolicy {
  Version: '2012-10-17';
  Statement: {
    Effect: 'Allow';
    Principal: { Federated: string };
    Action: 'sts:AssumeRoleWithWebIdentity';
    Condition: { StringEquals: Record<string, string | string[]> };
  }[];
}

export interface AwsTrust {
  oidcProviders: { arn: string; url: string; account: string; clientIds: string[] }[];
  roles: { roleArn: string; roleName: string; trustedBy: string[]; trustPolicy: AwsTrustPolicy }[];
  commands: string[];
}

/** IAM names OIDC providers and their condition keys by the issuer without its scheme. */
export function issuerHostPath(issuer: string): string {
  return issuer.replace(/^https:\/\//, '');
}

function oidcProviderArn(partition: string, account: string, issuer: string): string {
  return `arn:${partition}:iam::${account}:oidc-provider/${issuerHostPath(issuer)}`;
}

function awsTrust(issuer: string, identities: readonly TrustIdentity[]): AwsTrust {
  const ours = identities.filter((i) => i.cloud === 'aws');
  const hostPath = issuerHostPath(issuer);
  const roles: AwsTrust['roles'] = [];
  const providers = new Map<string, AwsTrust['oidcProviders'][number] & { partition: string }>();
  for (const [roleArn, members] of groupBy(ours, (i) => i.identity.roleArn)) {
    const role = parseRoleArn(roleArn, 'role');
    if ('reason' in role) continue; // `problem` left it out already
    const providerArn = oidcProviderArn(role.partition, role.account, issuer);
    const provider = providers.get(providerArn) ?? {
      arn: providerArn,
      url: issuer,
      account: role.account,
      partition: role.partition,
      clientIds: [],
    };
    providers.set(providerArn, provider);
    // One statement per audience: conditions on different keys are ANDed, values of one key ORed,
    // so mixing audiences in one statement would admit a subject with another's audience.
    const statements = [...groupBy(members, (i) => i.audience)].map(([audience, group]) => {
      provider.clientIds = unique([...provider.clientIds, audience]);
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
    roles.push({
      roleArn,
      roleName: roleArn.slice(roleArn.lastIndexOf('/') + 1),
      trustedBy: unique(members.map((i) => i.source)),
      trustPolicy: { Version: '2012-10-17', Statement: statements },
    });
  }

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
  for (const r of roles) {
    commands.push(
      shellComment(
        `role ${r.roleArn}, trusted by ${r.trustedBy.join(', ')} (a new role: aws iam create-role --role-name ${r.roleName} --assume-role-policy-document with the same JSON)`,
      ),
      shellCommand([
        'aws',
        'iam',
        'update-assume-role-policy',
        '--role-name',
        r.roleName,
        '--policy-document',
        JSON.stringify(r.trustPolicy),
      ]),
    );
  }
  return { oidcProviders: [...providers.values()].map(({ partition: _, ...p }) => p), roles, commands };
}

export const awsTrustPart: CloudTrust<AwsTrust> = {
  verifier: 'AWS STS',
  algorithms: ['RS256'],
  // EKS Pod Identity's tokens go to the Pod Identity Agent, trusted through EKS associations.
  names: (identity) => identity.mode !== 'eks-pod-identity',
  // Whole-string match, no trimming: what goes into `aws` is exactly what the pattern allows.
  problem: (identity) =>
    ROLE_ARN_PATTERN.test(identity.roleArn ?? '')
      ? undefined
      : `role ARN ${JSON.stringify(identity.roleArn)} is not an IAM role ARN`,
  report: awsTrust,
  text: (report) => [
    '',
    '## AWS',
    ...report.oidcProviders.flatMap((p) => [
      shellComment(`IAM OIDC identity provider ${p.arn}`),
      shellComment(`  url ${p.url}, client IDs (audiences): ${p.clientIds.join(', ')}`),
    ]),
    ...report.roles.flatMap((r) => [
      shellComment(`trust policy of role ${r.roleArn} (${r.trustedBy.join(', ')}):`),
      ...shellCommentJson(r.trustPolicy),
    ]),
    ...report.commands,
  ],
};
