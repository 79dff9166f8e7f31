// The Azure side: one federated identity credential per ServiceAccount on the application or
// user-assigned managed identity its client id names. Entra matches issuer, subject and audience
// byte for byte, so each is printed exactly as the token carries it.
import type { CloudTrust, TrustIdentity } from '../types.ts';
import { GUID_PATTERN, isTenantId } from './facts.ts';
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
  }[];
  commands: string[];
}

/** Entra's credential names: 3 to 120 letters, digits, - and _, starting with a letter or digit. */
function credentialName(namespace: string, serviceAccount: string): string {
  return `kubernetes-${namespace}-${serviceAccount}`.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 120);
}

function azureTrust(issuer: string, identities: readonly TrustIdentity[]): AzureTrust {
  const ours = identities.filter((i) => i.cloud === 'azure' && i.identity.clientId);
  const result: AzureTrust = { identities: [], commands: [] };
  for (const [clientId, members] of groupBy(ours, (i) => i.identity.clientId.toLowerCase())) {
    const credentials = new Map<string, FederatedIdentityCredential>();
    for (const m of members) {
      const key = `${m.subject}\n${m.audience}`;
      if (credentials.has(key)) continue;
      credentials.set(key, {
        name: credentialName(m.namespace, m.serviceAccount),
        issuer,
        subject: m.subject,
        audiences: [m.audience],
        description: `Kubernetes ServiceAccount ${m.namespace}/${m.serviceAccount}`,
      });
    }
    const tenantId = members.find((m) => m.identity.tenantId)?.identity.tenantId;
    const entry = {
      clientId,
      ...(tenantId && { tenantId }),
      trustedBy: [...new Set(members.map((m) => m.source))],
      federatedCredentials: [...credentials.values()],
    };
    result.identities.push(entry);

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
