// The Azure side: one federated identity credential per ServiceAccount on the application or
// user-assigned managed identity its client id names. Entra matches issuer, subject and audience
// byte for byte, so each is printed exactly as the token carries it.
import type { CloudTrust, TrustFinding, TrustIdentity } from '../types.ts';
import { AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY, GUID_PATTERN, isTenantId } from './facts.ts';
import { splitToFit } from '../trust-split.ts';
import { AZURE_USE_LABEL } from './pod.ts';
import { groupBy, shellCommand, shellComment, shellCommentJson, shellSubstitution } from '../../shell.ts';

interface FederatedIdentityCredential {
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

type Identity = AzureTrust['identities'][number];
type Credential = FederatedIdentityCredential & { source: string };

/** One credential per subject and audience: Entra matches them byte for byte. */
function credentialsOf(issuer: string, members: readonly TrustIdentity[]): Credential[] {
  const credentials = new Map<string, Credential>();
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
  return [...credentials.values()];
}

const strip = (cs: readonly Credential[]): FederatedIdentityCredential[] => cs.map(({ source: _, ...c }) => c);

/** Over Entra's limit: the identities the credentials split into, a namespace's together. */
function overLimitOf(all: readonly Credential[]): Identity['overLimit'] {
  const limit = AZURE_FEDERATED_CREDENTIALS_PER_IDENTITY;
  if (all.length <= limit) return undefined;
  const parts = splitToFit(all, namespaceOf, (part) => part.length <= limit);
  return {
    count: all.length,
    limit,
    split: parts.map((part) => ({
      trustedBy: [...new Set(part.map((c) => c.source))],
      federatedCredentials: strip(part),
    })),
  };
}

function azureTrust(issuer: string, identities: readonly TrustIdentity[]): AzureTrust {
  const ours = identities.filter((i) => i.cloud === 'azure' && i.identity.clientId);
  const result: AzureTrust = { identities: [], commands: [] };
  for (const [clientId, members] of groupBy(ours, (i) => i.identity.clientId.toLowerCase())) {
    const tenantId = members.find((m) => m.identity.tenantId)?.identity.tenantId;
    const all = credentialsOf(issuer, members);
    const overLimit = overLimitOf(all);
    const entry: Identity = {
      clientId,
      ...(tenantId && { tenantId }),
      trustedBy: [...new Set(members.map((m) => m.source))],
      federatedCredentials: strip(all),
      ...(overLimit && { overLimit }),
    };
    result.identities.push(entry);
    result.commands.push(...(overLimit ? splitComments(entry) : commandsOf(entry)));
  }
  return result;
}

function commandsOf(entry: Identity): string[] {
  const { clientId, tenantId } = entry;
  // The managed identity's name and resource group, looked up by its client id (a GUID: `problem`).
  const pick = (field: string) =>
    shellSubstitution(['az', 'identity', 'list', '--query', `[?clientId=='${clientId}'].${field} | [0]`, '-o', 'tsv']);
  return [
    shellComment(
      `client id ${clientId}${tenantId ? ` (tenant ${tenantId})` : ''}, trusted by ${entry.trustedBy.join(', ')}`,
    ),
    ...entry.federatedCredentials.map(
      (c) =>
        `${shellCommand(['az', 'identity', 'federated-credential', 'create', '--name', c.name, '--identity-name'])} ${pick('name')} --resource-group ${pick('resourceGroup')} ${shellCommand(['--issuer', c.issuer, '--subject', c.subject, '--audiences', ...c.audiences])}`,
    ),
    shellComment('or, when the client id is an app registration rather than a managed identity:'),
    ...entry.federatedCredentials.map((c) =>
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
    ),
  ];
}

/** Over the limit: the split as comments; applying it means new identities and new annotations. */
function splitComments(entry: Identity): string[] {
  // biome-ignore lint/style/noNonNullAssertion: Called for an entry over the limit only.
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
