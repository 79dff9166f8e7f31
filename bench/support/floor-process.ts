// Starts the floor (support/floor.ts) on one CPU with the given Node flags, and waits for its port:
// bench:peers and bench:apiserver run the same process; with `core` (a support/floor-core.ts
// CoreFile), it answers with serve's admission core.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Managed, startProcess } from '../../test/harness/processes.ts';
import type { TlsFiles } from '../../test/support/peer-diff.ts';
import { GiveUp, until } from '../../test/support/webhook.ts';

export async function startFloorProcess(options: {
  tls: TlsFiles;
  cpu: string;
  nodeOptions: string;
  log: string;
  host?: string;
  core?: string;
}): Promise<{ proc: Managed; port: number }> {
  const { tls, cpu, nodeOptions, log, host = '127.0.0.1', core } = options;
  const script = join(import.meta.dirname, 'floor.ts');
  const args = ['-c', cpu, process.execPath, script, tls.certFile, tls.keyFile, host, ...(core ? [core] : [])];
  const proc = startProcess('floor', 'taskset', args, log, { NODE_OPTIONS: nodeOptions });
  const port = await until(
    core ? 'the core to listen' : 'the floor to listen',
    () => {
      if (proc.exitStatus() !== null) throw new GiveUp(`the ${core ? 'core' : 'floor'} exited:\n${proc.logTail(10)}`);
      const line = existsSync(log) ? readFileSync(log, 'utf8').split('\n')[0] : '';
      return line ? ((JSON.parse(line) as { port?: number }).port ?? undefined) : undefined;
    },
    30_000,
  );
  return { proc, port };
}
