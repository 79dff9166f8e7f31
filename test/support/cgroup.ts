// A memory cgroup (v2, else v1) with no swap for the webhook to run in, as a Pod's memory limit
// holds it: beyond the limit the kernel kills it. The chart's limit comes from its values.yaml and
// NODE_OPTIONS as an install sets them (the chart's nodeOptions, else the image's), so the tests
// and the benchmarks hold the webhook to what an install gives it.
// Needs root (as `npm test` runs in CI).
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';

export interface MemoryCgroup {
  /**
   * Wraps a command so that it starts inside the cgroup (for startWebhook's `wrap`), with the
   * image's allocator settings (imageEnv) where the caller's environment sets none: the process
   * runs as the Pod does.
   */
  wrap(command: string, args: string[]): [string, string[]];
  /** Highest usage so far (memory.peak, else the current usage on kernels without it). */
  peakMiB(): number;
  oomKills(): number;
  remove(): void;
}

const ROOT = resolve(import.meta.dirname, '../..');

/** The chart's memory limit (bytes) and the NODE_OPTIONS its Pod runs with: nodeOptions, else the image's. */
export function chartMemory(): { limit: number; nodeOptions: string } {
  const values = parse(readFileSync(resolve(ROOT, 'charts/workload-identity-webhook/values.yaml'), 'utf8')) as {
    resources: { limits: { memory: string } };
    nodeOptions: string;
  };
  const m = /^(\d+)(Mi|Gi)$/.exec(values.resources.limits.memory);
  if (!m) throw new Error(`resources.limits.memory ${values.resources.limits.memory}: expected Mi or Gi`);
  return {
    limit: Number(m[1]) * 1024 ** (m[2] === 'Gi' ? 3 : 2),
    nodeOptions: values.nodeOptions || imageNodeOptions(),
  };
}

/** The Node flags of the image: the Dockerfile's ENV NODE_OPTIONS, the one place they are set. */
export function imageNodeOptions(): string {
  const flags = /^\s*NODE_OPTIONS="([^"]*)"/m.exec(readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8'))?.[1];
  if (flags === undefined) throw new Error('the Dockerfile sets no NODE_OPTIONS="..."');
  return flags;
}

/**
 * The environment the image gives the server beside NODE_OPTIONS that sizes its memory: the
 * Dockerfile's ENV MALLOC_* settings (glibc's allocator), as the tests and benchmarks must run it.
 */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(resolve(ROOT, 'Dockerfile'), 'utf8');
  return Object.fromEntries([...dockerfile.matchAll(/^\s*(MALLOC_[A-Z_]+)=(\S+?)\s*\\?$/gm)].map((m) => [m[1], m[2]]));
}

/** Creates (or resets) the cgroup `wiw-<name>-<pid>` with `limit` bytes of memory and no swap. */
export function memoryCgroup(name: string, limit: number): MemoryCgroup {
  const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  const leaf = `wiw-${name}-${process.pid}`;
  const dir = v2 ? `/sys/fs/cgroup/${leaf}` : `/sys/fs/cgroup/memory/${leaf}`;
  if (!existsSync(dir)) mkdirSync(dir);
  writeFileSync(`${dir}/${v2 ? 'memory.max' : 'memory.limit_in_bytes'}`, String(limit));
  // No swap: beyond the limit the kernel kills, as in a Pod.
  if (v2) writeFileSync(`${dir}/memory.swap.max`, '0');
  else if (existsSync(`${dir}/memory.memsw.limit_in_bytes`))
    writeFileSync(`${dir}/memory.memsw.limit_in_bytes`, String(limit));
  const read = (f: string) => readFileSync(`${dir}/${f}`, 'utf8');
  const procs = `${dir}/cgroup.procs`;
  const imageDefaults = Object.entries(imageEnv())
    .map(([k, v]) => `export ${k}="\${${k}-${v}}";`)
    .join(' ');
  return {
    wrap: (command, args) => [
      '/bin/sh',
      ['-c', `echo $$ > ${procs} && ${imageDefaults} exec "$0" "$@"`, command, ...args],
    ],
    peakMiB: () =>
      Number(
        v2
          ? existsSync(`${dir}/memory.peak`)
            ? read('memory.peak')
            : read('memory.current')
          : read('memory.max_usage_in_bytes'),
      ) /
      2 ** 20,
    oomKills: () => Number(/oom_kill (\d+)/.exec(read(v2 ? 'memory.events' : 'memory.oom_control'))?.[1] ?? 0),
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        /* still has a process: left for the next run */
      }
    },
  };
}

/** A process's resident set (VmRSS) and its high-water mark (VmHWM), in MiB. */
export function rssMiB(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, hwm: kib('VmHWM') / 1024 };
}

/**
 * The token requestor's memory limit (bytes, the chart's tokenRequestor.resources.limits.memory)
 * and its NODE_OPTIONS: the image's, since the chart sets nodeOptions on the webhook's container only.
 */
export function tokenRequestorMemory(): { limit: number; nodeOptions: string } {
  const values = parse(readFileSync(resolve(ROOT, 'charts/workload-identity-webhook/values.yaml'), 'utf8')) as {
    tokenRequestor: { resources: { limits: { memory: string } } };
  };
  const memory = values.tokenRequestor.resources.limits.memory;
  const m = /^(\d+)(Mi|Gi)$/.exec(memory);
  if (!m) throw new Error(`tokenRequestor.resources.limits.memory ${memory}: expected Mi or Gi`);
  return { limit: Number(m[1]) * 1024 ** (m[2] === 'Gi' ? 3 : 2), nodeOptions: imageNodeOptions() };
}
