// `trust` output: per cloud, the cloud-side configuration that makes each identity's token
// accepted, as JSON (for machines and the stand-ins of the tests) or as text with the commands.
import { awsTrust, type AwsTrust } from '../clouds/aws/trust.ts';
import { azureTrust, type AzureTrust } from '../clouds/azure/trust.ts';
import { gcpTrust, type GcpTrust } from '../clouds/gcp/trust.ts';
import type { TrustIdentity } from './identities.ts';

export interface TrustReport {
  issuer: string;
  identities: { cloud: string; source: string; subject: string; audience: string }[];
  aws?: AwsTrust;
  azure?: AzureTrust;
  gcp?: GcpTrust;
}

export function trustReport(issuer: string, identities: readonly TrustIdentity[]): TrustReport {
  const report: TrustReport = {
    issuer,
    identities: identities.map((i) => ({ cloud: i.cloud, source: i.source, subject: i.subject, audience: i.audience })),
  };
  if (identities.some((i) => i.cloud === 'aws')) report.aws = awsTrust(issuer, identities);
  if (identities.some((i) => i.cloud === 'azure')) report.azure = azureTrust(issuer, identities);
  if (identities.some((i) => i.cloud === 'gcp')) report.gcp = gcpTrust(issuer, identities);
  return report;
}

export function trustJson(report: TrustReport): string {
  return JSON.stringify(report, null, 2) + '\n';
}

const json = (value: unknown): string => JSON.stringify(value, null, 2);

export function trustText(report: TrustReport): string {
  const out: string[] = [`# issuer: ${report.issuer}`];
  if (report.identities.length === 0)
    out.push('# no ServiceAccount or labelled Secret carries an identity: nothing to trust');
  if (report.aws) {
    out.push('', '## AWS');
    for (const p of report.aws.oidcProviders) {
      out.push(
        `# IAM OIDC identity provider ${p.arn}`,
        `#   url ${p.url}, client IDs (audiences): ${p.clientIds.join(', ')}`,
      );
    }
    for (const r of report.aws.roles)
      out.push(`# trust policy of role ${r.roleArn} (${r.trustedBy.join(', ')}):`, json(r.trustPolicy));
    out.push(...report.aws.commands);
  }
  if (report.azure) {
    out.push('', '## Azure');
    for (const i of report.azure.identities) {
      out.push(
        `# federated identity credentials of client id ${i.clientId}${i.tenantId ? ` (tenant ${i.tenantId})` : ''}:`,
      );
      for (const c of i.federatedCredentials) out.push(json(c));
    }
    out.push(...report.azure.commands);
  }
  if (report.gcp) {
    out.push('', '## Google Cloud');
    for (const p of report.gcp.providers) {
      out.push(
        `# workload identity pool provider ${p.name} (${p.trustedBy.join(', ')}):`,
        json({ issuerUri: p.issuerUri, allowedAudiences: p.allowedAudiences, attributeMapping: p.attributeMapping }),
      );
    }
    for (const s of report.gcp.serviceAccounts) out.push(`# IAM policy binding on ${s.email}:`, json(s.binding));
    out.push(...report.gcp.commands);
  }
  return out.join('\n') + '\n';
}
