// The commands the release runs (scripts/release.ts, scripts/release-sign.ts): stdout returned,
// stderr passed through as progress; and the tools found as a user has them ($VAR, then the
// PATH), else as the project's provide scripts build them.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '..');

/** Runs a command in the checkout; its stderr goes to ours (progress), its stdout is returned. */
export function exec(cmd: string, args: string[]): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? ok(out.trim()) : fail(new Error(`${cmd} ${args.join(' ')} failed (exit ${code})`)),
    );
  });
}

/** The NAME=value lines a provide script prints (printf %q quoting undone). */
export async function scriptVars(script: string, args: string[] = []): Promise<Record<string, string>> {
  const out = await exec('bash', [script, ...args]);
  return Object.fromEntries(
    out
      .split('\n')
      .map((l) => /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(l))
      .filter((m) => m !== null)
      .map((m) => [m[1], m[2].replace(/\\(.)/g, '$1')]),
  );
}

/** A tool: $VARIABLE, else `name` on the PATH (if `name ...probe` runs), else what `script` provides as VARIABLE. */
export async function tool(name: string, variable: string, script: string, probe: string[]): Promise<string> {
  const set = process.env[variable];
  if (set) return set;
  try {
    await exec(name, probe);
    return name;
  } catch {
    const provided = (await scriptVars(script))[variable];
    if (!provided) throw new Error(`${script} printed no ${variable}`);
    return provided;
  }
}
