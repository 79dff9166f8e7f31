import { printable } from '../shell.ts';

// A doctor's findings: one verdict per check, with the fix when something is wrong, and the exit
// code scripts read (0 all good, 1 a problem found, 2 something could not be checked).

export type Verdict = 'pass' | 'warn' | 'fail' | 'unknown';

export interface Check {
  /** Stable id, for scripts: issuer-https, token-issuer, public-jwks, identity, ... */
  id: string;
  verdict: Verdict;
  /** What was found, in one sentence. */
  message: string;
  /** What to do about it (fail, warn and unknown only). */
  fix?: string;
  /** The object a per-identity check is about: `ServiceAccount ns/name`. */
  subject?: string;
}

export interface DoctorReport {
  issuer: string | undefined;
  checks: Check[];
}

export function exitCode(report: DoctorReport): 0 | 1 | 2 {
  if (report.checks.some((c) => c.verdict === 'fail')) return 1;
  if (report.checks.some((c) => c.verdict === 'unknown')) return 2;
  return 0;
}

const LABEL: Record<Verdict, string> = { pass: 'ok', warn: 'WARN', fail: 'FAIL', unknown: '??' };

export function reportText(report: DoctorReport): string {
  // Messages carry values read from the cluster: one line each, whatever they hold.
  const lines = [`issuer: ${printable(report.issuer ?? '(unknown)')}`];
  for (const c of report.checks) {
    lines.push(printable(`${LABEL[c.verdict].padEnd(4)} ${c.id}: ${c.subject ? `${c.subject}: ` : ''}${c.message}`));
    if (c.fix) lines.push(`     fix: ${printable(c.fix)}`);
  }
  const code = exitCode(report);
  const counts = (v: Verdict) => report.checks.filter((c) => c.verdict === v).length;
  lines.push(
    code === 0
      ? `all ${report.checks.length} checks passed${counts('warn') ? ` (${counts('warn')} warnings)` : ''}`
      : code === 1
        ? `${counts('fail')} problem(s) found`
        : `${counts('unknown')} check(s) could not be made`,
  );
  return lines.join('\n') + '\n';
}

export function reportJson(report: DoctorReport): string {
  const code = exitCode(report);
  return (
    JSON.stringify(
      {
        issuer: report.issuer ?? null,
        result: ['ok', 'problems', 'incomplete'][code],
        exitCode: code,
        checks: report.checks,
      },
      null,
      2,
    ) + '\n'
  );
}
