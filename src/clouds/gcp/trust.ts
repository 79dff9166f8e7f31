// The Google side: the workload identity pool provider that trusts the cluster's issuer and
// allows the audiences the webhook injects, with google.subject mapped from the token's sub, and
// for each service account the roles/iam.workloadIdentityUser binding of its ServiceAccounts'
// principals (or, without one, the principal to grant roles on resources directly).
import {
  EMAIL_PATTERN,
  PROVIDER_PATTERN,
  parseWorkloadIdentityProvider,
  type WorkloadIdentityProvider,
} from './pod.ts';
import type { CloudTrust, TrustIdentity } from '../types.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, unique } from '../../shell.ts';

const ATTRIBUTE_MAPPING = { 'google.subject': 'assertion.sub' } as const;
const WORKLOAD_IDENTITY_USER = 'roles/iam.workloadIdentityUser';

export interface GcpTrust {
  providers: {
    name: string;
    projectNumber: string;
    pool: string;
    provider: string;
    issuerUri: string;
    allowedAudiences: string[];
    attributeMapping: Record<string, string>;
    trustedBy: string[];
  }[];
  serviceAccounts: { email: string; binding: { role: string; members: string[] }; trustedBy: string[] }[];
  /** ServiceAccounts without a Google service account: their principal, for direct resource access. */
  directAccess: { source: string; principal: string }[];
  commands: string[];
}

function principalOf(projectNumber: string, pool: string, subject: string): string {
  return `principal://iam.googleapis.com/projects/${projectNumber}/locations/global/workloadIdentityPools/${pool}/subject/${subject}`;
}

/** An identity with its provider's name read: the pool and project number it lives in. */
interface Resolved {
  i: TrustIdentity;
  provider: WorkloadIdentityProvider;
}

function gcpTrust(issuer: string, identities: readonly TrustIdentity[]): GcpTrust {
  const result: GcpTrust = { providers: [], serviceAccounts: [], directAccess: [], commands: [] };
  const resolved = identities
    .filter((i) => i.cloud === 'gcp')
    .map((i) => ({ i, provider: parseWorkloadIdentityProvider(i.identity.workloadIdentityProvider, 'provider') }))
    .filter((r): r is Resolved => !('reason' in r.provider));
  trustIssuer(result, issuer, resolved);
  bindServiceAccounts(result, resolved);
  grantPrincipals(result, resolved);
  return result;
}

/** Each pool provider trusts the issuer for the audiences its ServiceAccounts' tokens carry. */
function trustIssuer(result: GcpTrust, issuer: string, resolved: Resolved[]): void {
  for (const [name, members] of groupBy(resolved, (r) => r.provider.name)) {
    const p = members[0].provider;
    const entry = {
      name,
      projectNumber: p.projectNumber,
      pool: p.pool,
      provider: p.provider,
      issuerUri: issuer,
      allowedAudiences: unique(members.map((m) => m.i.audience)),
      attributeMapping: { ...ATTRIBUTE_MAPPING },
      trustedBy: unique(members.map((m) => m.i.source)),
    };
    result.providers.push(entry);
    result.commands.push(
      shellComment(`pool provider ${name} (existing: providers update-oidc with the same flags)`),
      shellCommand([
        'gcloud',
        'iam',
        'workload-identity-pools',
        'providers',
        'create-oidc',
        p.provider,
        `--project=${p.projectNumber}`,
        '--location=global',
        `--workload-identity-pool=${p.pool}`,
        `--issuer-uri=${issuer}`,
        `--allowed-audiences=${entry.allowedAudiences.join(',')}`,
        '--attribute-mapping=google.subject=assertion.sub',
      ]),
    );
  }
}

/** Each Google service account lets its ServiceAccounts' principals impersonate it. */
function bindServiceAccounts(result: GcpTrust, resolved: Resolved[]): void {
  for (const [email, members] of groupBy(
    resolved.filter((r) => r.i.identity.serviceAccountEmail),
    (r) => r.i.identity.serviceAccountEmail,
  )) {
    const principals = unique(members.map((m) => principalOf(m.provider.projectNumber, m.provider.pool, m.i.subject)));
    const entry = {
      email,
      binding: { role: WORKLOAD_IDENTITY_USER, members: principals },
      trustedBy: unique(members.map((m) => m.i.source)),
    };
    result.serviceAccounts.push(entry);
    result.commands.push(shellComment(`service account ${email}, impersonated by ${entry.trustedBy.join(', ')}`));
    for (const member of principals) {
      result.commands.push(
        shellCommand([
          'gcloud',
          'iam',
          'service-accounts',
          'add-iam-policy-binding',
          email,
          `--role=${WORKLOAD_IDENTITY_USER}`,
          `--member=${member}`,
        ]),
      );
    }
  }
}

/** Without a Google service account, roles are granted on resources to the principal itself. */
function grantPrincipals(result: GcpTrust, resolved: Resolved[]): void {
  for (const m of resolved.filter((r) => !r.i.identity.serviceAccountEmail)) {
    const principal = principalOf(m.provider.projectNumber, m.provider.pool, m.i.subject);
    if (result.directAccess.some((d) => d.principal === principal)) continue;
    result.directAccess.push({ source: m.i.source, principal });
    result.commands.push(
      shellComment(
        `${m.i.source} has no Google service account: grant roles on resources to its principal, for example`,
      ),
      shellCommand([
        'gcloud',
        'projects',
        'add-iam-policy-binding',
        'PROJECT_ID',
        '--role=ROLE',
        `--member=${principal}`,
      ]),
    );
  }
}

export const gcpTrustPart: CloudTrust<GcpTrust> = {
  verifier: 'Google STS',
  algorithms: ['RS256', 'ES256'],
  // Outside --strict the webhook passes pfnet's looser provider names through; they never go into a command.
  problem: ({ workloadIdentityProvider, serviceAccountEmail }) => {
    const provider = workloadIdentityProvider ?? '';
    if (!PROVIDER_PATTERN.test(provider))
      return `workload identity provider ${JSON.stringify(workloadIdentityProvider)} is not of the form projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>`;
    if (serviceAccountEmail !== undefined && !EMAIL_PATTERN.test(serviceAccountEmail))
      return `service account email ${JSON.stringify(serviceAccountEmail)} is not an email address`;
    return undefined;
  },
  report: gcpTrust,
  text: (report) => [
    '',
    '## Google Cloud',
    ...report.providers.flatMap((p) => [
      shellComment(`workload identity pool provider ${p.name} (${p.trustedBy.join(', ')}):`),
      ...shellCommentJson({
        issuerUri: p.issuerUri,
        allowedAudiences: p.allowedAudiences,
        attributeMapping: p.attributeMapping,
      }),
    ]),
    ...report.serviceAccounts.flatMap((s) => [
      shellComment(`IAM policy binding on ${s.email}:`),
      ...shellCommentJson(s.binding),
    ]),
    ...report.commands,
  ],
};
