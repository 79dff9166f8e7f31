// What the benchmarks read and set on the machine: a process's CPU time and memory, CPU pinning,
// a memory cgroup (as a Pod's limit), and how busy the machine is with work that is not ours.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';

/** CPU seconds (user + system) the process has used so far, all threads. */
export function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/** Resident memory now and its peak, MiB. */
export function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Pins every thread of `pid` (and the threads they start later) to `cpus`, e.g. "0". */
export function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
}

export function cpuCount(): number {
  return readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .filter((l) => /^cpu\d/.test(l)).length;
}

/** Busy and total jiffies of one CPU so far (from /proc/stat). */
function cpuTimes(cpu: number): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${cpu} `));
  const v = (line ?? '').trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/**
 * How much of one CPU went to processes other than `pid` while `measure` ran: the other helpers,
 * tests and builds sharing the machine (they are not pinned, and we leave them alone).
 */
export async function foreignLoad<T>(cpu: number, pid: number, measure: () => Promise<T>) {
  const c0 = cpuTimes(cpu);
  const p0 = cpuSecondsOf(pid);
  const result = await measure();
  const c1 = cpuTimes(cpu);
  const ownJiffies = (cpuSecondsOf(pid) - p0) * 100;
  const total = c1.total - c0.total;
  return { result, foreign: total > 0 ? Math.max(0, (c1.busy - c0.busy - ownJiffies) / total) : 0 };
}

export function loadAverage(): number {
  return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
}

export interface MemoryCgroup {
  /** The file a process writes its pid to, to enter the cgroup. */
  procs: string;
  usageMiB(): number;
  peakMiB(): number;
  oomKills(): number;
  remove(): void;
}

/** A memory cgroup (v2, else v1) with `limitBytes` and no swap: beyond it the kernel kills, as in a Pod. */
export function memoryCgroup(name: string, limitBytes: number): MemoryCgroup {
  const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  const dir = v2 ? `/sys/fs/cgroup/${name}` : `/sys/fs/cgroup/memory/${name}`;
  if (!existsSync(dir)) mkdirSync(dir);
  writeFileSync(`${dir}/${v2 ? 'memory.max' : 'memory.limit_in_bytes'}`, String(limitBytes));
  if (v2) writeFileSync(`${dir}/memory.swap.max`, '0');
  else if (existsSync(`${dir}/memory.memsw.limit_in_bytes`))
    writeFileSync(`${dir}/memory.memsw.limit_in_bytes`, String(limitBytes));
  const read = (f: string) => readFileSync(`${dir}/${f}`, 'utf8');
  const mib = (f: string) => Number(read(f)) / 2 ** 20;
  return {
    procs: `${dir}/cgroup.procs`,
    usageMiB: () => mib(v2 ? 'memory.current' : 'memory.usage_in_bytes'),
    peakMiB: () =>
      v2 ? mib(existsSync(`${dir}/memory.peak`) ? 'memory.peak' : 'memory.current') : mib('memory.max_usage_in_bytes'),
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
