// What the benchmarks read and set on the machine: a process's CPU time, CPU pinning, and how busy
// the machine is with work that is not ours (memory and the cgroup: test/support/cgroup.ts).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** CPU seconds (user + system) the process has used so far, all threads. */
export function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
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
