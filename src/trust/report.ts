// `trust` output: per cloud, the cloud-side configuration that makes each identity's token
// accepted, as data (-o json or yaml: for machines and the stand-ins of the tests) or as text: a script whose
// every command word is quoted and whose every other line is a comment. An identity whose values
// are not of their form gets a FAIL line instead: its values never reach a command.
import { cloudModule, type TrustReportOf } from '../clouds/index.ts';
import { PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import { isNamespaceName, isObjectName } from '../model.ts';
import { shellComment } from '../shell.ts';
import type { TrustIdentity } from './identities.ts';

/** Each cloud's part (clouds/<cloud>/trust.ts), present when an identity of that cloud is. */
export type TrustReport = {
  issuer: string;
  identities: { cloud: string; source: string; subject: string; audience: string }[];
  /** Identities left out because a value is not of its form. */
  failures?: { cloud: string; source: string; problem: string }[];
} & { [K in ProviderName]?: TrustReportOf<K> };

/** An audience as the clouds take it: a URI or a name, without anything a shell would read. */
const AUDIENCE_FORM = /^[A-Za-z0-9._~:/@%+=,-]{1,256}$/;

function problemOf(i: TrustIdentity): string | undefined {
  if (!isNamespaceName(i.namespace)) return `namespace ${JSON.stringify(i.namespace)} is not a namespace name`;
  if (!isObjectName(i.serviceAccount))
    return `ServiceAccount name ${JSON.stringify(i.serviceAccount)} is not an object name`;
  if (!AUDIENCE_FORM.test(i.audience)) return `audience ${JSON.stringify(i.audience)} is not a URI or name`;
  return cloudModule(i.cloud).trust.problem(i.identity);
}

export function trustReport(issuer: string, identities: readonly TrustIdentity[]): TrustReport {
  const failures: NonNullable<TrustReport['failures']> = [];
  const good = identities.filter((i) => {
    const problem = problemOf(i);
    if (problem) failures.push({ cloud: i.cloud, source: i.source, problem });
    return !problem;
  });
  const report: TrustReport = {
    issuer,
    identities: good.map((i) => ({ cloud: i.cloud, source: i.source, subject: i.subject, audience: i.audience })),
    ...(failures.length > 0 && { failures }),
  };
  const parts = report as Record<ProviderName, unknown>;
  for (const cloud of PROVIDER_NAMES)
    if (good.some((i) => i.cloud === cloud)) parts[cloud] = cloudModule(cloud).trust.report(issuer, good);
  return report;
}

export function trustText(report: TrustReport): string {
  const out: string[] = [shellComment(`issuer: ${report.issuer}`)];
  for (const f of report.failures ?? [])
    out.push(shellComment(`FAIL ${f.cloud} ${f.source}: ${f.problem}; no command is printed for it`));
  if (report.identities.length === 0)
    out.push(shellComment('no ServiceAccount or labelled Secret carries an identity: nothing to trust'));
  const parts = report as Record<ProviderName, unknown>;
  for (const cloud of PROVIDER_NAMES)
    if (parts[cloud] !== undefined) out.push(...cloudModule(cloud).trust.text(parts[cloud]));
  return out.join('\n') + '\n';
}
