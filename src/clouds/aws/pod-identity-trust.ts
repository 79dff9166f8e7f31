// EKS Pod Identity in `trust` and `doctor`: the ServiceAccounts of the associations file
// (--aws-container-credentials-config) and those annotated <prefix>/pod-identity-role-arn, each
// an `aws eks create-pod-identity-association`; and where the two disagree, a finding. The token
// goes to the Pod Identity Agent, not through the issuer: the role trusts the EKS service instead.
import { isNamespaceName, isObjectName } from '../../model.ts';
import { shellCommand, shellComment, shellCommentJson, shellVariable, unique } from '../../shell.ts';
import type { TrustContext, TrustFinding } from '../types.ts';
import { POD_IDENTITY_ROLE_ARN_KEY } from './pod-identity-associations.ts';
import { ROLE_ARN_PATTERN } from './role-arn.ts';

interface PodIdentityAssociationTrust {
  namespace: string;
  serviceAccount: string;
  /** The association's role: the file's roleArn, else the annotation's. */
  roleArn?: string;
  /** Where it was read: the file, the annotation, or both. */
  from: ('file' | 'annotation')[];
  /** Why no command is printed for it (a value not of its form, two roles). */
  problem?: string;
  /** The webhook's configuration does not give its Pods container credentials. */
  notInFile?: string;
}

export interface PodIdentityTrust {
  podIdentityAssociations: PodIdentityAssociationTrust[];
  /** --aws-eks-cluster-name; without it the commands read $EKS_CLUSTER_NAME. */
  clusterName?: string;
}

/** The trust policy a role of an EKS Pod Identity association needs (EKS user guide, pod-id-role). */
const POD_IDENTITY_ROLE_TRUST = {
  Version: '2012-10-17',
  Statement: [
    {
      Effect: 'Allow',
      Principal: { Service: 'pods.eks.amazonaws.com' },
      Action: ['sts:AssumeRole', 'sts:TagSession'],
    },
  ],
} as const;

const CLUSTER_VARIABLE = 'EKS_CLUSTER_NAME';

function problemOf(a: PodIdentityAssociationTrust, annotated: string | undefined): string | undefined {
  if (!isNamespaceName(a.namespace)) return `namespace ${JSON.stringify(a.namespace)} is not a namespace name`;
  if (!isObjectName(a.serviceAccount))
    return `ServiceAccount name ${JSON.stringify(a.serviceAccount)} is not an object name`;
  if (annotated !== undefined && !ROLE_ARN_PATTERN.test(annotated))
    return `role ARN ${JSON.stringify(annotated)} is not an IAM role ARN`;
  if (annotated !== undefined && a.roleArn !== undefined && a.roleArn !== annotated)
    return `the associations file names role ${a.roleArn}, the annotation role ${annotated}`;
  return undefined;
}

/** The associations the file and the annotations ask for, in the file's order, then the annotations'. */
function associationsOf(context: TrustContext): PodIdentityAssociationTrust[] {
  const { settings, accounts } = context;
  const file = settings.awsContainerCredentialsConfig;
  const key = `${settings.awsAnnotationPrefix}/${POD_IDENTITY_ROLE_ARN_KEY}`;
  const annotations = new Map(accounts.map((sa) => [`${sa.namespace}/${sa.name}`, sa.annotations[key]]));
  const byName = new Map<string, PodIdentityAssociationTrust>();
  for (const e of file?.entries() ?? []) {
    if (context.namespace !== undefined && e.namespace !== context.namespace) continue;
    byName.set(`${e.namespace}/${e.serviceAccount}`, {
      namespace: e.namespace,
      serviceAccount: e.serviceAccount,
      ...(e.roleArn && { roleArn: e.roleArn }),
      from: ['file'],
    });
  }
  for (const sa of accounts) {
    const annotated = sa.annotations[key];
    if (annotated === undefined) continue;
    const name = `${sa.namespace}/${sa.name}`;
    const entry = byName.get(name);
    if (entry) entry.from.push('annotation');
    else
      byName.set(name, {
        namespace: sa.namespace,
        serviceAccount: sa.name,
        from: ['annotation'],
        notInFile: file
          ? `the associations file ${file.file} does not list it`
          : 'the webhook has no associations file (--aws-container-credentials-config)',
      });
  }
  return [...byName.values()].map((a) => {
    const annotated = annotations.get(`${a.namespace}/${a.serviceAccount}`);
    const problem = problemOf(a, annotated);
    if (problem) return { ...a, roleArn: undefined, problem };
    return annotated !== undefined && a.roleArn === undefined ? { ...a, roleArn: annotated } : a;
  });
}

export function podIdentityPart(context: TrustContext): PodIdentityTrust & { commands: string[] } {
  const associations = associationsOf(context);
  const clusterName = context.settings.awsEksClusterName;
  const commands: string[] = [];
  const printable = associations.flatMap((a) => (a.roleArn && !a.problem ? [{ ...a, roleArn: a.roleArn }] : []));
  if (printable.length > 0) {
    commands.push(
      shellComment(
        `EKS Pod Identity associations${clusterName ? '' : ` (set ${CLUSTER_VARIABLE} to the cluster's name, or pass --aws-eks-cluster-name)`}; an existing one: aws eks update-pod-identity-association`,
      ),
    );
    const cluster = clusterName ? shellCommand([clusterName]) : shellVariable(CLUSTER_VARIABLE);
    for (const a of printable)
      commands.push(
        `${shellCommand(['aws', 'eks', 'create-pod-identity-association', '--cluster-name'])} ${cluster} ${shellCommand(
          ['--namespace', a.namespace, '--service-account', a.serviceAccount, '--role-arn', a.roleArn],
        )}`,
      );
  }
  return { podIdentityAssociations: associations, ...(clusterName && { clusterName }), commands };
}

export function podIdentityFindings(part: PodIdentityTrust): TrustFinding[] {
  const findings: TrustFinding[] = [];
  for (const a of part.podIdentityAssociations) {
    const subject = `ServiceAccount ${a.namespace}/${a.serviceAccount}`;
    if (a.problem)
      findings.push({
        check: 'pod-identity-associations',
        verdict: 'fail',
        subject,
        message: `EKS Pod Identity: ${a.problem}; no command is printed for it`,
        fix: `correct the annotation ${POD_IDENTITY_ROLE_ARN_KEY} or the file's roleArn`,
      });
    else if (a.notInFile)
      findings.push({
        check: 'pod-identity-associations',
        verdict: 'fail',
        subject,
        message: `annotated for EKS Pod Identity (role ${a.roleArn}) but ${a.notInFile}: its Pods get no container credentials from the webhook`,
        fix: `add {"namespace": "${a.namespace}", "serviceAccount": "${a.serviceAccount}", "roleArn": "${a.roleArn}"} to the associations file, and create the association (trust prints it)`,
      });
  }
  const agreed = part.podIdentityAssociations.length - findings.length;
  if (findings.length === 0 && agreed > 0)
    findings.push({
      check: 'pod-identity-associations',
      verdict: 'pass',
      subject: 'EKS Pod Identity',
      message: `${agreed} ServiceAccount(s) in the associations file or annotated ${POD_IDENTITY_ROLE_ARN_KEY}: the file and the annotations agree`,
      fix: '',
    });
  return findings;
}

export function podIdentityText(part: PodIdentityTrust): string[] {
  const associations = part.podIdentityAssociations.filter((a) => !a.problem);
  if (associations.length === 0) return [];
  const roles = unique(associations.flatMap((a) => (a.roleArn ? [a.roleArn] : [])));
  return [
    ...associations.map((a) =>
      shellComment(
        `EKS Pod Identity: ServiceAccount ${a.namespace}/${a.serviceAccount} (${a.from.join(' and ')}), ${a.roleArn ? `role ${a.roleArn}` : 'no role named: an association EKS already holds'}`,
      ),
    ),
    ...(roles.length > 0
      ? [
          shellComment(`trust policy the roles of EKS Pod Identity need (${roles.join(', ')}):`),
          ...shellCommentJson(POD_IDENTITY_ROLE_TRUST),
        ]
      : []),
  ];
}
