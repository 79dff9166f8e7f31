// doctor --fix on a terminal: what will be restarted, then a question; only "y" or "yes" restarts.
import { createInterface } from 'node:readline/promises';
import { printable } from '../shell.ts';
import { type Owner, ownerKey } from './owners.ts';
import { MAX_LISTED_OWNERS } from './slipped-report.ts';

export async function confirmRestart(
  owners: readonly Owner[],
  input: NodeJS.ReadableStream,
  output: NodeJS.WritableStream,
): Promise<boolean> {
  const keys = owners.map(ownerKey).sort();
  const lines = keys.slice(0, MAX_LISTED_OWNERS).map((k) => `  ${printable(k)}`);
  if (owners.length > MAX_LISTED_OWNERS) lines.push(`  and ${owners.length - MAX_LISTED_OWNERS} more`);
  output.write(`doctor --fix will restart (as kubectl rollout restart):\n${lines.join('\n')}\n`);
  const rl = createInterface({ input, output });
  try {
    const answer = await rl.question(`Restart these ${owners.length}? [y/N] `);
    return /^\s*y(es)?\s*$/i.test(answer);
  } finally {
    rl.close();
  }
}
