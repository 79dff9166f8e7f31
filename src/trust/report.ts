// `trust` output: per cloud, the cloud-side configuration that makes each identity's token
// accepted, as data (-o json or yaml: for machines and the stand-ins of the tests) or as text: a script whose
// every command word is quoted and whose every other line is a comment. An identity whose values
// are not of their form gets a FAIL line instead: its values never reach a command.
import { cloudModule, type TrustReportOf } from '../clouds/index.ts';
import { PROVIDER_NAMES, type ProviderName } from '../clouds/registry.ts';
import { isNamespaceName, isObjectName } from '../model.ts';
import { shellComment } from '../shell.ts';
import type { TrustContext, TrustFinding, TrustIdentity } from '../clouds/types.ts';

/** Each cloud's part (clouds/<cloud>/trust.ts), present when an identity of that cloud is. */
export type TrustReport = {
  issuer: string;
  identities: { cloud: string; source: string; subject: string; audience: string }[];
  /** Identities left out because a value is not of its form. */
  failures?: { cloud: string; source: string; problem: string }[];
  /** What a cloud would refuse (its documented limits) or the configuration disagrees with, each with the fix. */
  findings?: (TrustFinding & { cloud: string })[];
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

export function trustReport(issuer: string, identities: readonly TrustIdentity[], context: TrustContext): TrustReport {
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
  const findings: NonNullable<TrustReport['findings']> = [];
  for (const cloud of PROVIDER_NAMES) {
    const trust = cloudModule(cloud).trust;
    if (!good.some((i) => i.cloud === cloud) && !trust.hasPart?.(context)) continue;
    parts[cloud] = trust.report(issuer, good, context);
    findings.push(...cloudFindings(cloud, parts[cloud]).filter((f) => f.verdict !== 'pass'));
  }
  if (findings.length > 0) report.findings = findings;
  return report;
}

function cloudFindings(cloud: ProviderName, part: unknown): (TrustFinding & { cloud: string })[] {
  return cloudModule(cloud)
    .trust.findings(part)
    .map((f) => ({ cloud, ...f }));
}

/**
 * doctor's checks of the trust: each finding, and a pass of the clouds' limits when identities
 * were counted and none is over.
 */
export function trustChecks(
  issuer: string,
  identities: readonly TrustIdentity[],
  context: TrustContext,
): (TrustFinding & { cloud?: string })[] {
  const report = trustReport(issuer, identities, context);
  const parts = report as Record<ProviderName, unknown>;
  const findings: (TrustFinding & { cloud?: string })[] = PROVIDER_NAMES.flatMap((cloud) =>
    parts[cloud] === undefined ? [] : cloudFindings(cloud, parts[cloud]),
  );
  if (report.identities.length > 0 && !findings.some((f) => f.check === 'cloud-limits'))
    findings.unshift({
      check: 'cloud-limits',
      verdict: 'pass',
      subject: '',
      message: `the cloud-side configuration of ${report.identities.length} identities is within the clouds' documented limits (trust policy length, federated credentials per identity, a provider's audiences, google.subject)`,
      fix: '',
    });
  return findings;
}

/** `trust`'s exit code: 1 when an identity or a finding fails. */
export function trustFailed(report: TrustReport): boolean {
  return !!report.failures || !!report.findings?.some((f) => f.verdict === 'fail');
}

export function trustText(report: TrustReport): string {
  const out: string[] = [shellComment(`issuer: ${report.issuer}`)];
  const parts = report as Record<ProviderName, unknown>;
  for (const f of report.failures ?? [])
    out.push(shellComment(`FAIL ${f.cloud} ${f.source}: ${f.problem}; no command is printed for it`));
  for (const f of report.findings ?? [])
    out.push(shellComment(`${f.verdict.toUpperCase()} ${f.cloud} ${f.subject}: ${f.message}; fix: ${f.fix}`));
  if (report.identities.length === 0 && !PROVIDER_NAMES.some((c) => parts[c] !== undefined))
    out.push(shellComment('no ServiceAccount or labelled Secret carries an identity: nothing to trust'));
  for (const cloud of PROVIDER_NAMES)
    if (parts[cloud] !== undefined) out.push(...cloudModule(cloud).trust.text(parts[cloud]));
  return out.join('\n') + '\n';
}
