// `trust` output: per cloud, the cloud-side configuration that makes each identity's token
// accepted, as JSON (for machines and the stand-ins of the tests) or as text with the commands.
import { cloudModule, type TrustReportOf } from '../clouds/index.ts';
import { PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import type { TrustIdentity } from './identities.ts';

/** Each cloud's part (clouds/<cloud>/trust.ts), present when an identity of that cloud is. */
export type TrustReport = {
  issuer: string;
  identities: { cloud: string; source: string; subject: string; audience: string }[];
} & { [K in ProviderName]?: TrustReportOf<K> };

export function trustReport(issuer: string, identities: readonly TrustIdentity[]): TrustReport {
  const report: TrustReport = {
    issuer,
    identities: identities.map((i) => ({ cloud: i.cloud, source: i.source, subject: i.subject, audience: i.audience })),
  };
  const parts = report as Record<ProviderName, unknown>;
  for (const cloud of PROVIDER_NAMES)
    if (identities.some((i) => i.cloud === cloud)) parts[cloud] = cloudModule(cloud).trust.report(issuer, identities);
  return report;
}

export function trustJson(report: TrustReport): string {
  return JSON.stringify(report, null, 2) + '\n';
}

export function trustText(report: TrustReport): string {
  const out: string[] = [`# issuer: ${report.issuer}`];
  if (report.identities.length === 0)
    out.push('# no ServiceAccount or labelled Secret carries an identity: nothing to trust');
  const parts = report as Record<ProviderName, unknown>;
  for (const cloud of PROVIDER_NAMES)
    if (parts[cloud] !== undefined) out.push(...cloudModule(cloud).trust.text(parts[cloud]));
  return out.join('\n') + '\n';
}
