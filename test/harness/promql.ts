// wiw-promql (scripts/promql/main.go): Prometheus's own rule-file validator, PromQL parser, scrape
// parser and query engine. From TEST_ASSET_PROMQL, otherwise from scripts/provide-promql.sh (which
// builds it once from Go modules and caches it).
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

let binary: Promise<string> | undefined;

export function promqlBinary(): Promise<string> {
  binary ??= provide();
  return binary;
}

async function provide(): Promise<string> {
  if (process.env.TEST_ASSET_PROMQL) return process.env.TEST_ASSET_PROMQL;
  // No timeout: a first build takes minutes; its progress goes to our stderr.
  const script = spawn('bash', ['scripts/provide-promql.sh'], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  script.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    script.on('error', reject);
    script.on('close', resolve);
  });
  if (code !== 0) throw new Error(`scripts/provide-promql.sh failed (exit ${code}); see its messages above`);
  const path = /^PROMQL=(.*)$/m.exec(stdout)?.[1]?.replace(/\\(.)/g, '$1');
  if (!path) throw new Error(`scripts/provide-promql.sh printed no PROMQL:\n${stdout}`);
  return path;
}

export class PromqlError extends Error {
  readonly stderr: string;
  constructor(command: string, stderr: string) {
    super(`wiw-promql ${command} failed:\n${stderr}`);
    this.stderr = stderr;
  }
}

async function run<T>(args: string[], input?: unknown): Promise<T> {
  const bin = await promqlBinary();
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new PromqlError(args[0], stderr || err.message));
      else resolve(JSON.parse(stdout) as T);
    });
    // A command that reads no input may exit before the write lands: its answer is the exit's.
    child.stdin?.on('error', () => {});
    child.stdin?.end(input === undefined ? '' : JSON.stringify(input));
  });
}

export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Metric names the expression selects. */
  metrics: string[];
}

/** Loads rule groups as Prometheus loads a rule file; rejects with its errors. */
export async function checkRules(groups: unknown): Promise<{ name: string; rules: Rule[] }[]> {
  const dir = await mkdtemp(join(tmpdir(), 'wiw-rules-'));
  try {
    const file = join(dir, 'rules.yaml');
    await writeFile(file, stringify({ groups }));
    return await run(['rules', file]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Parses PromQL expressions; resolves with the metric names of each, rejects with parse errors. */
export function parseExprs(exprs: string[]): Promise<{ metrics: string[] }[]> {
  return run(['exprs'], exprs);
}

export interface Scrape {
  timeMs: number;
  /** Target labels, as Prometheus adds them (job, namespace, pod...). */
  labels: Record<string, string>;
  body: string;
  contentType?: string;
}

/** The instant query `expr` at `timeMs` over these scrapes, ingested as Prometheus ingests them. */
export function evaluate(
  scrapes: Scrape[],
  expr: string,
  timeMs: number,
): Promise<{ labels: Record<string, string>; value: number }[]> {
  return run(['eval'], { scrapes, expr, timeMs });
}
