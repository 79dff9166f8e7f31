// The Azure side: one federated identity credential per ServiceAccount on the application or
// user-assigned managed identity its client id names. Entra matches issuer, subject and audience
// byte for byte, so each is printed exactly as the token carries it.
import type { CloudTrust, TrustFinding, TrustIdentity } from '../types.ts';
import { AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY, GUID_PATTERN, isTenantId } from './facts.ts';
import { splitToFit } from '../trust-split.ts';
import { AZURE_USE_LABEL } from './pod.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, shellSubstitution } from '../../shell.ts';

export interface FederatedIdentityCredential {
  name: string;
  issuer: string;
  subject: string;
  audiences: string[];
  description: string;
}

export interface AzureTrust {
  identities: {
    clientId: string;
    tenantId?: string;
    trustedBy: string[];
    federatedCredentials: FederatedIdentityCredential[];
    /**
     * More credentials than Entra takes per identity: no command is printed for them; instead the
     * identities they split into (the first this one), each within the limit, namespaces together.
     */
    overLimit?: {
      count: number;
      limit: number;
      split: { trustedBy: string[]; federatedCredentials: FederatedIdentityCredential[] }[];
    };
  }[];
  commands: string[];
}

/** A credential's namespace, for keeping a namespace's ServiceAccounts on one identity. */
const namespaceOf = (c: FederatedIdentityCredential) => c.subject.split(':')[2] ?? '';

/** Entra's credential names: 3 to 120 letters, digits, - and _, starting with a letter or digit. */
function credentialName(namespace: string, serviceAccount: string): string {
  return `kubernetes-${namespace}-${serviceAccount}`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 120);
}

function azureTrust(issuer: string, identities: readonly TrustIdentity[]): AzureTrust {
  const ours = identities.filter((i) => i.cloud === 'azure' && i.identity.clientId);
  const result: AzureTrust = { identities: [], commands: [] };
  for (const [clientId, members] of groupBy(ours, (i) => i.identity.clientId.toLowerCase())) {
    const credentials = new Map<string, FederatedIdentityCredential & { source: string }>();
    for (const m of members) {
      const key = `${m.subject}\n${m.audience}`;
      if (credentials.has(key)) continue;
      credentials.set(key, {
        source: m.source,
        name: credentialName(m.namespace, m.serviceAccount),
        issuer,
        subject: m.subject,
        audiences: [m.audience],
        description: `Kubernetes ServiceAccount ${m.namespace}/${m.serviceAccount}`,
      });
    }
    const tenantId = members.find((m) => m.identity.tenantId)?.identity.tenantId;
    const all = [...credentials.values()];
    const strip = (cs: typeof all) => cs.map(({ source: _, ...c }) => c);
    const entry: AzureTrust['identities'][number] = {
      clientId,
      ...(tenantId && { tenantId }),
      trustedBy: [...new Set(members.map((m) => m.source))],
      federatedCredentials: strip(all),
    };
    const limit = AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY;
    if (all.length > limit) {
      const parts = splitToFit(all, namespaceOf, (part) => part.length <= limit);
      entry.overLimit = {
        count: all.length,
        limit,
        split: parts.map((part) => ({
          trustedBy: [...new Set(part.map((c) => c.source))],
          federatedCredentials: strip(part),
        })),
      };
    }
    result.identities.push(entry);
    if (entry.overLimit) {
      result.commands.push(...splitComments(entry));
      continue;
    }

    // The managed identity's name and resource group, looked up by its client id (a GUID: `problem`).
    const pick = (field: string) =>
      shellSubstitution([
        'az',
        'identity',
        'list',
        '--query',
        `[?clientId=='${clientId}'].${field} | [0]`,
        '-o',
        'tsv',
      ]);
    result.commands.push(
      shellComment(
        `client id ${clientId}${tenantId ? ` (tenant ${tenantId})` : ''}, trusted by ${entry.trustedBy.join(', ')}`,
      ),
    );
    for (const c of entry.federatedCredentials) {
      result.commands.push(
        `${shellCommand(['az', 'identity', 'federated-credential', 'create', '--name', c.name, '--identity-name'])} ${pick('name')} --resource-group ${pick('resourceGroup')} ${shellCommand(['--issuer', c.issuer, '--subject', c.subject, '--audiences', ...c.audiences])}`,
      );
    }
    result.commands.push(shellComment('or, when the client id is an app registration rather than a managed identity:'));
    for (const c of entry.federatedCredentials) {
      result.commands.push(
        shellCommand([
          'az',
          'ad',
          'app',
          'federated-credential',
          'create',
          '--id',
          clientId,
          '--parameters',
          JSON.stringify(c),
        ]),
      );
    }
  }
  return result;
}

/** Over the limit: the split as comments; applying it means new identities and new annotations. */
function splitComments(entry: AzureTrust['identities'][number]): string[] {
  const { count, limit, split } = entry.overLimit!;
  return [
    shellComment(
      `client id ${entry.clientId}: ${count} federated identity credentials, over Entra's ${limit} per identity, so no command is printed for it. A split that fits, ${split.length} identities (the first this one; annotate each other part's ServiceAccounts with a new identity's client id):`,
    ),
    ...split.map((part, n) =>
      shellComment(
        `  identity ${n + 1}${n === 0 ? ` (${entry.clientId})` : ' (new)'}: ${part.federatedCredentials.length} credentials, for ${part.trustedBy.join(', ')}`,
      ),
    ),
  ];
}

function azureFindings(report: AzureTrust): TrustFinding[] {
  return report.identities.flatMap((i) =>
    i.overLimit
      ? [
          {
            check: 'cloud-limits',
            verdict: 'fail' as const,
            subject: `client id ${i.clientId}`,
            message: `it needs ${i.overLimit.count} federated identity credentials, over Entra's limit of ${i.overLimit.limit} per managed identity or application: credential number ${i.overLimit.limit + 1} is refused`,
            fix: `split its ServiceAccounts over ${i.overLimit.split.length} identities as trust prints (one namespace's on one identity), each annotated with its identity's client id`,
          },
        ]
      : [],
  );
}

export const azureTrustPart: CloudTrust<AzureTrust> = {
  verifier: 'Microsoft Entra ID',
  algorithms: ['RS256'],
  // The provider injects only into Pods that opt in.
  podLabels: { [AZURE_USE_LABEL]: 'true' },
  // It injects for any labelled Pod; only a client id makes it an identity to trust.
  names: (identity) => !!identity.clientId,
  // Outside --strict the webhook injects a client id of another form, as the peer does; it never
  // goes into a command.
  problem: ({ clientId, tenantId }) => {
    if (!GUID_PATTERN.test(clientId ?? '')) return `client id ${JSON.stringify(clientId)} is not a GUID`;
    if (tenantId !== undefined && !isTenantId(tenantId))
      return `tenant ${JSON.stringify(tenantId)} is not a GUID or a domain`;
    return undefined;
  },
  report: azureTrust,
  findings: azureFindings,
  text: (report) => [
    '',
    '## Azure',
    ...report.identities.flatMap((i) => [
      shellComment(
        `federated identity credentials of client id ${i.clientId}${i.tenantId ? ` (tenant ${i.tenantId})` : ''}:`,
      ),
      ...i.federatedCredentials.flatMap(shellCommentJson),
    ]),
    ...report.commands,
  ],
};
