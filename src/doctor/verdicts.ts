import { styleText } from 'node:util';
import { printable } from '../shell.ts';

// A doctor's findings: one verdict per check, with the fix when something is wrong, and the exit
// code scripts read (0 all good, 1 a problem found, 3 something could not be checked; 2 is bad
// usage, src/cli-args.ts's EXIT).

type Verdict = 'pass' | 'warn' | 'fail' | 'unknown';

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

/** The exit code and the result it stands for: all good, a problem found, something not checked. */
const RESULTS = { ok: 0, problems: 1, incomplete: 3 } as const;
type Result = keyof typeof RESULTS;

function resultOf(report: DoctorReport): Result {
  if (report.checks.some((c) => c.verdict === 'fail')) return 'problems';
  if (report.checks.some((c) => c.verdict === 'unknown')) return 'incomplete';
  return 'ok';
}

export function exitCode(report: DoctorReport): 0 | 1 | 3 {
  return RESULTS[resultOf(report)];
}

const LABEL: Record<Verdict, string> = { pass: 'ok', warn: 'WARN', fail: 'FAIL', unknown: '??' };
const COLOUR: Record<Verdict, 'green' | 'yellow' | 'red' | 'magenta'> = {
  pass: 'green',
  warn: 'yellow',
  fail: 'red',
  unknown: 'magenta',
};

/**
 * The report for a person; each check ends with its time. The verdicts are coloured by
 * util.styleText for `stream`, the one the report is written to: only when that stream is a
 * terminal that has colours and NO_COLOR is not set, or FORCE_COLOR asks (Node's rules).
 */
export function reportText(report: DoctorReport, options: { stream?: NodeJS.WritableStream } = {}): string {
  const { stream } = options;
  const paint = (v: Verdict, s: string) => (stream ? styleText(COLOUR[v], s, { stream }) : s);
  // Messages carry values read from the cluster: one line each, whatever they hold.
  const lines = [`issuer: ${printable(report.issuer ?? '(unknown)')}`];
  for (const c of report.checks) {
    const time = c.ms === undefined ? '' : ` (${duration(c.ms)})`;
    const text = printable(`${c.id}: ${c.subject ? `${c.subject}: ` : ''}${c.message}`);
    lines.push(`${paint(c.verdict, LABEL[c.verdict].padEnd(4))} ${text}${time}`);
    if (c.fix) lines.push(`     fix: ${printable(c.fix)}`);
  }
  const result = resultOf(report);
  const counts = (v: Verdict) => report.checks.filter((c) => c.verdict === v).length;
  lines.push(
    result === 'ok'
      ? `all ${report.checks.length} checks passed${counts('warn') ? ` (${counts('warn')} warnings)` : ''}`
      : result === 'problems'
        ? `${counts('fail')} problem(s) found`
        : `${counts('unknown')} check(s) could not be made`,
  );
  return lines.join('\n') + '\n';
}

/** 12 ms, 1.5 s. */
export function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** The report for scripts, as -o json and -o yaml write it. */
export function reportData(report: DoctorReport): {
  issuer: string | null;
  result: Result;
  exitCode: number;
  checks: Check[];
} {
  const result = resultOf(report);
  return { issuer: report.issuer ?? null, result, exitCode: RESULTS[result], checks: report.checks };
}
