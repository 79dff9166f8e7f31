// The Google side: the workload identity pool provider that trusts the cluster's issuer and
// allows the audiences the webhook injects, with google.subject mapped from the token's sub, and
// for each service account the roles/iam.workloadIdentityUser binding of its ServiceAccounts'
// principals (or, without one, the principal to grant roles on resources directly).
import {
  EMAIL_PATTERN,
  PROVIDER_PATTERN,
  parseWorkloadIdentityProvider,
  type WorkloadIdentityProvider,
} from './external-account.ts';
import type { CloudTrust, TrustFinding, TrustIdentity } from '../types.ts';
import { GCP_PROVIDER_LIMITS } from './facts.ts';
import { partNames, splitToFit } from '../trust-split.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, unique } from '../../shell.ts';

/** A provider's id: 4 to 32 characters (gcloud iam workload-identity-pools providers create-oidc). */
const PROVIDER_ID_LENGTH = 32;
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
    /**
     * More audiences than a provider allows: no command is printed for it; instead the providers
     * its ServiceAccounts split into by audience, each within the limit (the first this one).
     */
    overLimit?: {
      count: number;
      limit: number;
      split: { provider: string; allowedAudiences: string[]; trustedBy: string[] }[];
    };
  }[];
  /** Subjects longer than google.subject may be: Google refuses their tokens, so nothing is printed for them. */
  subjectsOverLimit: { source: string; subject: string; bytes: number; limit: number }[];
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
  const result: GcpTrust = {
    providers: [],
    serviceAccounts: [],
    directAccess: [],
    subjectsOverLimit: [],
    commands: [],
  };
  const limit = GCP_PROVIDER_LIMITS.subjectBytes;
  const resolved = identities
    .filter((i) => i.cloud === 'gcp')
    .filter((i) => {
      // google.subject is mapped from the token's sub as it is.
      const bytes = Buffer.byteLength(i.subject);
      if (bytes <= limit) return true;
      if (!result.subjectsOverLimit.some((s) => s.source === i.source))
        result.subjectsOverLimit.push({ source: i.source, subject: i.subject, bytes, limit });
      return false;
    })
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
    const entry: Provider = {
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
    entry.overLimit = audiencesOverLimit(entry, members);
    if (entry.overLimit) {
      result.commands.push(...splitComments(entry));
      continue;
    }
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

type Provider = GcpTrust['providers'][number];

/** More audiences than a provider allows: the providers its ServiceAccounts split into by audience. */
function audiencesOverLimit(entry: Provider, members: readonly Resolved[]): Provider['overLimit'] {
  const limit = GCP_PROVIDER_LIMITS.allowedAudiences;
  if (entry.allowedAudiences.length <= limit) return undefined;
  const parts = splitToFit(
    entry.allowedAudiences,
    (a) => a,
    (part) => part.length <= limit,
  );
  const names = partNames(entry.provider, parts.length, PROVIDER_ID_LENGTH);
  return {
    count: entry.allowedAudiences.length,
    limit,
    split: parts.map((audiences, n) => ({
      provider: names[n],
      allowedAudiences: audiences,
      trustedBy: unique(members.filter((m) => audiences.includes(m.i.audience)).map((m) => m.i.source)),
    })),
  };
}

/** Over the limit: the split as comments; applying it means new providers and new annotations. */
function splitComments(entry: Provider): string[] {
  // biome-ignore lint/style/noNonNullAssertion: Called for an entry over the limit only.
  const { count, limit, split } = entry.overLimit!;
  return [
    shellComment(
      `pool provider ${entry.name}: ${count} audiences, over the ${limit} a provider allows, so no command is printed for it. A split that fits, ${split.length} providers of pool ${entry.pool} (annotate each ServiceAccount with its part's provider):`,
    ),
    ...split.map((part, n) =>
      shellComment(
        `  provider ${part.provider}${n === 0 ? '' : ' (new)'}: audiences ${part.allowedAudiences.join(',')}, for ${part.trustedBy.join(', ')}`,
      ),
    ),
  ];
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

function gcpFindings(report: GcpTrust): TrustFinding[] {
  return [
    ...report.providers.flatMap((p) =>
      p.overLimit
        ? [
            {
              check: 'cloud-limits',
              verdict: 'fail' as const,
              subject: `pool provider ${p.name}`,
              message: `its ServiceAccounts' tokens carry ${p.overLimit.count} audiences, over the ${p.overLimit.limit} allowed audiences a workload identity pool provider takes`,
              fix: `split its ServiceAccounts over ${p.overLimit.split.length} providers by audience as trust prints (${p.overLimit.split.map((s) => s.provider).join(', ')}), or give them fewer audiences`,
            },
          ]
        : [],
    ),
    ...report.subjectsOverLimit.map((s) => ({
      check: 'cloud-limits',
      verdict: 'fail' as const,
      subject: s.source,
      message: `its subject ${s.subject} is ${s.bytes} bytes, over the ${s.limit} bytes google.subject may hold: Google refuses its tokens; nothing is printed for it`,
      fix: 'a shorter namespace or ServiceAccount name',
    })),
  ];
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
  findings: gcpFindings,
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
