// What a node changes on the host outside its own folder, and how each change is undone: a
// bridge for the Pods' network, one NAT chain (Pods reach the API server through the
// `kubernetes` Service's ClusterIP), a cgroup root for the kubelet, and mounts under the
// node's folder. Every change is first written to the node's record (host.json), so a later
// run can undo the changes of a run that was SIGKILLed (sweepStaleNodes).
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Each node's folder lives here (on disk: containerd keeps its images there). */
export const NODES_ROOT = '/var/lib/wiw-nodes';
const CGROUP_FS = '/sys/fs/cgroup';

export interface HostRecord {
  /** Pid of the test process that owns the node. */
  owner: number;
  dir: string;
  bridge?: string;
  natChain?: string;
  cgroupRoot?: string;
}

export async function sh(command: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(command, args, { maxBuffer: 16 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
  }
}

async function record(host: HostRecord): Promise<void> {
  await writeFile(join(host.dir, 'host.json'), JSON.stringify(host));
}

export async function createNodeDir(id: string): Promise<HostRecord> {
  const dir = join(NODES_ROOT, id);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const host: HostRecord = { owner: process.pid, dir };
  await record(host);
  return host;
}

/**
 * A bridge with a free 10.x.y.0/24 for the Pods; returns the gateway (the host's address on
 * the bridge), which the Pods reach the host by.
 */
export async function createBridge(host: HostRecord, name: string): Promise<{ subnet: string; gateway: string }> {
  const routes = await sh('ip', ['-4', 'route', 'show']);
  for (let attempt = 0; attempt < 20; attempt++) {
    const prefix = `10.${randomInt(200, 250)}.${randomInt(0, 256)}`;
    if (routes.includes(`${prefix}.`)) continue;
    host.bridge = name;
    await record(host);
    await sh('ip', ['link', 'add', 'name', name, 'type', 'bridge']);
    await sh('ip', ['addr', 'add', `${prefix}.1/24`, 'dev', name]);
    await sh('ip', ['link', 'set', name, 'up']);
    return { subnet: `${prefix}.0/24`, gateway: `${prefix}.1` };
  }
  throw new Error('no free 10.x.y.0/24 for the node bridge');
}

/** Pods on `bridge` reach `clusterIp:443` at `target` (what kube-proxy would do for that one Service). */
export async function forwardServiceIp(
  host: HostRecord,
  chain: string,
  bridge: string,
  clusterIp: string,
  target: string,
): Promise<void> {
  host.natChain = chain;
  await record(host);
  await sh('iptables', ['-w', '-t', 'nat', '-N', chain]);
  await sh('iptables', [
    '-w',
    '-t',
    'nat',
    '-A',
    chain,
    '-d',
    `${clusterIp}/32`,
    '-p',
    'tcp',
    '--dport',
    '443',
    '-j',
    'DNAT',
    '--to-destination',
    target,
  ]);
  await sh('iptables', ['-w', '-t', 'nat', '-A', 'PREROUTING', '-i', bridge, '-j', chain]);
}

/** The cgroup v1 controllers mounted here, or ['unified'-less v2 root] on a pure v2 host. */
function cgroupHierarchies(): string[] {
  if (existsSync(join(CGROUP_FS, 'cgroup.controllers'))) return [CGROUP_FS];
  return readdirSync(CGROUP_FS)
    .map((n) => join(CGROUP_FS, n))
    .filter((p) => existsSync(join(p, 'cgroup.procs')));
}

/** The kubelet's --cgroup-root, created in every hierarchy (the kubelet requires it to exist). */
export async function createCgroupRoot(host: HostRecord, name: string): Promise<string> {
  host.cgroupRoot = `/${name}`;
  await record(host);
  for (const h of cgroupHierarchies()) {
    await mkdir(join(h, name), { recursive: true });
    // A new v1 cpuset starts with no CPUs and no memory nodes, and nothing can join it then:
    // give it its parent's.
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      if (existsSync(join(h, f))) await writeFile(join(h, name, f), readFileSync(join(h, f), 'utf8'));
    }
  }
  return host.cgroupRoot;
}

/** Mount points at or below `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => !!p)
    .map((p) => p.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

async function deleteNetnsOnBridge(bridge: string): Promise<void> {
  if (!existsSync(`/sys/class/net/${bridge}`)) return;
  const links = await sh('ip', ['-o', 'link', 'show', 'master', bridge]);
  // The peer of each veth: by name for named namespaces, else by id.
  const names = new Set([...links.matchAll(/link-netns (\S+)/g)].map((m) => m[1]));
  const ids = new Set([...links.matchAll(/link-netnsid (\d+)/g)].map((m) => m[1]));
  // `ip netns list`: "cni-... (id: 3)"
  for (const line of (await sh('ip', ['netns', 'list'])).split('\n')) {
    const m = /^(\S+)(?: \(id: (\d+)\))?/.exec(line);
    if (m && (names.has(m[1]) || (m[2] && ids.has(m[2])))) await sh('ip', ['netns', 'delete', m[1]]);
  }
}

/** SIGKILLs every process in the cgroup tree and waits (up to 5 s) until it is empty. */
async function killCgroupTree(root: string): Promise<void> {
  const pids = (): number[] => {
    const found = new Set<number>();
    const walk = (path: string): void => {
      if (!existsSync(path)) return;
      for (const line of readFileSync(join(path, 'cgroup.procs'), 'utf8').split('\n'))
        if (line) found.add(Number(line));
      for (const entry of readdirSync(path, { withFileTypes: true }))
        if (entry.isDirectory()) walk(join(path, entry.name));
    };
    for (const h of cgroupHierarchies()) walk(join(h, root));
    return [...found];
  };
  for (let round = 0; round < 50; round++) {
    const left = pids();
    if (left.length === 0) return;
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // exited meanwhile
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`processes left in cgroup ${root}: ${pids().join(', ')}`);
}

/** Removes a cgroup tree depth-first (only empty cgroups can be removed). */
async function removeCgroupTree(path: string): Promise<void> {
  if (!existsSync(path)) return;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (entry.isDirectory()) await removeCgroupTree(join(path, entry.name));
  }
  await rmdir(path);
}

/**
 * Undoes everything the record names; each step is tried even if an earlier one failed, and
 * the errors are reported together. Processes must be gone already.
 */
export async function undoHost(host: HostRecord): Promise<void> {
  const errors: string[] = [];
  const attempt = async (what: string, step: () => Promise<unknown>): Promise<void> => {
    try {
      await step();
    } catch (err) {
      errors.push(`${what}: ${(err as Error).message}`);
    }
  };
  for (const point of mountsUnder(host.dir)) {
    await attempt(`unmount ${point}`, () => sh('umount', ['--lazy', point]));
  }
  if (host.natChain) {
    const chain = host.natChain;
    const bridge = host.bridge!;
    await attempt('NAT jump', async () => {
      const rules = await sh('iptables', ['-w', '-t', 'nat', '-S', 'PREROUTING']);
      if (rules.includes(`-j ${chain}`))
        await sh('iptables', ['-w', '-t', 'nat', '-D', 'PREROUTING', '-i', bridge, '-j', chain]);
    });
    await attempt('NAT chain', async () => {
      const chains = await sh('iptables', ['-w', '-t', 'nat', '-S']);
      if (chains.includes(`-N ${chain}`)) {
        await sh('iptables', ['-w', '-t', 'nat', '-F', chain]);
        await sh('iptables', ['-w', '-t', 'nat', '-X', chain]);
      }
    });
  }
  if (host.bridge) {
    const bridge = host.bridge;
    // Pods' network namespaces still attached to the bridge (a run that ended without the
    // kubelet stopping its Pods): containerd keeps them outside the node's folder.
    await attempt('network namespaces', () => deleteNetnsOnBridge(bridge));
    await attempt(`bridge ${bridge}`, async () => {
      if (existsSync(`/sys/class/net/${bridge}`)) await sh('ip', ['link', 'del', bridge]);
    });
  }
  if (host.cgroupRoot) {
    // Containers whose shim died with a killed run are still in the node's cgroups.
    await attempt('container processes', () => killCgroupTree(host.cgroupRoot!));
    for (const h of cgroupHierarchies()) {
      await attempt(`cgroup ${h}${host.cgroupRoot}`, () => removeCgroupTree(join(h, host.cgroupRoot!)));
    }
  }
  await attempt(`folder ${host.dir}`, async () => {
    // Never delete through a mount that is still there (a hostPath bind of the repository).
    const left = mountsUnder(host.dir);
    if (left.length > 0) throw new Error(`still mounted: ${left.join(', ')}`);
    await rm(host.dir, { recursive: true, force: true, maxRetries: 3 });
  });
  if (errors.length > 0) throw new Error(`node teardown left things behind:\n${errors.join('\n')}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Undoes the nodes of test processes that died without tearing them down. */
export async function sweepStaleNodes(): Promise<void> {
  if (!existsSync(NODES_ROOT)) return;
  for (const id of readdirSync(NODES_ROOT)) {
    const file = join(NODES_ROOT, id, 'host.json');
    let host: HostRecord;
    try {
      host = JSON.parse(await readFile(file, 'utf8')) as HostRecord;
    } catch {
      continue;
    }
    if (alive(host.owner)) continue;
    await killProcessesUsing(host.dir);
    await undoHost(host);
  }
}

/** SIGKILLs every process whose command line names `dir` (the node's daemons and shims). */
export async function killProcessesUsing(dir: string): Promise<number[]> {
  const killed: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.split('\0').some((arg) => arg.includes(dir))) {
      try {
        process.kill(Number(entry), 'SIGKILL');
        killed.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
  }
  // SIGKILL is delivered asynchronously: wait until they are gone, or they may still write.
  for (let round = 0; round < 50 && killed.some((pid) => existsSync(`/proc/${pid}`)); round++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return killed;
}
