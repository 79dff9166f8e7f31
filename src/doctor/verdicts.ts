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
  /** Milliseconds since the check before: the reads it waited for and its own work. */
  ms?: number;
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
/** SGR colours of the verdicts: green, yellow, red, magenta. */
const COLOUR: Record<Verdict, number> = { pass: 32, warn: 33, fail: 31, unknown: 35 };

/** The report for a person; `colour` (a terminal's) paints the verdicts. Each check ends with its time. */
export function reportText(report: DoctorReport, options: { colour?: boolean } = {}): string {
  const paint = (v: Verdict, s: string) => (options.colour ? `\x1b[${COLOUR[v]}m${s}\x1b[0m` : s);
  // Messages carry values read from the cluster: one line each, whatever they hold.
  const lines = [`issuer: ${printable(report.issuer ?? '(unknown)')}`];
  for (const c of report.checks) {
    const time = c.ms === undefined ? '' : ` (${duration(c.ms)})`;
    const text = printable(`${c.id}: ${c.subject ? `${c.subject}: ` : ''}${c.message}`);
    lines.push(`${paint(c.verdict, LABEL[c.verdict].padEnd(4))} ${text}${time}`);
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

/** 12 ms, 1.5 s. */
export function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
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
