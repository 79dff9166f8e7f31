// Why bench:peers and an independent run disagree on the AWS peer (issue #30): each candidate
// measured side by side on one kube-apiserver, CPU per review of the server process for
//   - the corpus: bench:peers' generated Pods (mean 26 KB; as sent, a third without identity, and
//     all with identity) against real charts' Pods (mean 2 KB),
//   - the client: in this process, in a process of its own, over one HTTP/2 connection,
//   - the Go peer's GOMAXPROCS: 1 and pinned after start (bench:peers), unset and pinned after
//     start (Go then runs 2 Ps on one core), started under taskset (Go reads the affinity: 1),
// and what each server negotiates (TLS, protocol), its threads, and whether the client's
// connections are reused. docs/figures.md has the figures and what they showed.
//
//   node bench/peers-hypotheses.ts [--seconds 5]   (as root, after scripts/dev.sh bench-peers built the bundle: WIW_CLI)
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { TENANT as AZURE_TENANT } from '../test/support/identities.ts';
import { providePeers, servingCertificate, startPeer, type TlsFiles } from '../test/support/peer-diff.ts';
import { startWebhook } from '../test/support/webhook.ts';
import { chartMemory, memoryCgroup } from '../test/support/cgroup.ts';
import type { ControlPlane } from '../test/harness/control-plane.ts';
import { createAll } from './support/cluster.ts';
import { chartObjects, NAMESPACES, serviceAccount, streamReviews } from './support/corpora.ts';
import { cpuSecondsOf, foreignLoad, pin } from './support/host.ts';
import { closedLoop, type Target } from './support/load.ts';
import { makeReviews } from './support/reviews.ts';

const { values: opts } = parseArgs({ options: { seconds: { type: 'string', default: '5' } } });
const SECONDS = Number(opts.seconds);
const SERVER_CPU = '0';
const LOAD_CPU = '1';
const SAS = 2000;

const threads = (pid: number) => Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
const children = (pid: number) => {
  try {
    return execFileSync('pgrep', ['-P', String(pid)])
      .toString()
      .trim()
      .split('\n')
      .filter(Boolean).length;
  } catch {
    return 0;
  }
};

interface Subject {
  label: string;
  pid: number;
  target: Target;
  clients: Client[];
  stop(): Promise<void>;
}
type Client = 'in-process' | 'own process' | 'own process, h2';

async function serve(cp: ControlPlane, tls: TlsFiles): Promise<Subject> {
  const cgroup = memoryCgroup('peers-hypotheses', chartMemory().limit);
  const wh = await startWebhook(cp, ['--azure-tenant-id', AZURE_TENANT, '--log-level', 'info'], {
    tls,
    wrap: (command, args) => {
      const [inCgroup, rest] = cgroup.wrap(command, args);
      return ['taskset', ['-c', SERVER_CPU, inCgroup, ...rest]];
    },
    env: { NODE_OPTIONS: chartMemory().nodeOptions },
    readyTimeoutMs: 120_000,
  });
  return {
    label: 'serve',
    pid: wh.process.pid,
    target: { url: `${wh.url}/mutate`, caPem: tls.caPem },
    clients: ['in-process', 'own process', 'own process, h2'],
    async stop() {
      await wh.stop();
      cgroup.remove();
    },
  };
}

async function awsPeer(cp: ControlPlane, tls: TlsFiles, binary: string, variant: number): Promise<Subject> {
  const [label, env, atStart] = [
    ['AWS peer, GOMAXPROCS=1, pinned after start (bench:peers)', { GOMAXPROCS: '1' }, false],
    ['AWS peer, GOMAXPROCS unset, pinned after start', {}, false],
    ['AWS peer, started under taskset', {}, true],
  ][variant] as [string, Record<string, string>, boolean];
  let command = binary;
  if (atStart) {
    command = join(cp.dir, 'aws-peer-pinned.sh');
    writeFileSync(command, `#!/bin/sh\nexec taskset -c ${SERVER_CPU} "${binary}" "$@"\n`, { mode: 0o755 });
  }
  const peer = await startPeer(
    cp,
    { id: `aws/hypothesis-${variant}`, peer: 'aws', peerArgs: [], peerEnv: env, ourArgs: [] },
    command,
    tls,
    '/tmp',
  );
  pin(peer.proc.pid, SERVER_CPU);
  await sleep(3000); // its informer lists the ServiceAccounts
  pin(peer.proc.pid, SERVER_CPU);
  return {
    label,
    pid: peer.proc.pid,
    target: { url: peer.url, caPem: tls.caPem },
    clients: variant === 0 ? ['in-process', 'own process', 'own process, h2'] : ['own process'],
    stop: () => peer.proc.stop(),
  };
}

async function measure(cp: ControlPlane, s: Subject, corpus: string, reviews: Buffer[], client: Client) {
  await closedLoop(s.target, reviews, 16, 2);
  const port = new URL(s.target.url).port;
  let open = -1;
  const sampler = setTimeout(() => {
    open = execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`])
      .toString()
      .split('\n')
      .filter(Boolean).length;
  }, 2000);
  const cpu0 = cpuSecondsOf(s.pid);
  const { result, foreign } = await foreignLoad(Number(SERVER_CPU), s.pid, async () => {
    if (client === 'in-process') {
      const u0 = process.cpuUsage();
      const r = await closedLoop(s.target, reviews, 16, SECONDS);
      const u = process.cpuUsage(u0);
      return { n: r.latencies.length, seconds: r.seconds, opened: r.opened, cpu: (u.user + u.system) / 1e6 };
    }
    const file = join(cp.dir, `reviews-${corpus}.json`);
    writeFileSync(file, JSON.stringify(reviews.map((b) => b.toString())));
    const script = join(import.meta.dirname, 'support/load-process.ts');
    const protocol = client === 'own process, h2' ? 'h2' : 'http1';
    const args = ['-c', LOAD_CPU, process.execPath, script, s.target.url, file, '16', String(SECONDS), protocol];
    const out = await new Promise<string>((resolve) => {
      const child = spawn('taskset', args, {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, CA: s.target.caPem },
      });
      let text = '';
      child.stdout.on('data', (d) => (text += d));
      child.on('exit', () => resolve(text));
    });
    return JSON.parse(out) as { n: number; seconds: number; opened: number; cpu: number };
  });
  clearTimeout(sampler);
  const cpu = cpuSecondsOf(s.pid) - cpu0;
  const us = (x: number) => ((x / result.n) * 1e6).toFixed(0).padStart(5);
  console.log(
    `| ${s.label} | ${corpus} | ${client} | ${us(cpu)} | ${(result.n / result.seconds).toFixed(0)} | ${((cpu / result.seconds) * 100).toFixed(0)} % | ${us(result.cpu)} | ${open} open, ${result.opened} opened in the run | ${threads(s.pid)}, ${children(s.pid)} | ${(foreign * 100).toFixed(0)} % |`,
  );
}

pin(process.pid, LOAD_CPU);
const vars = providePeers(['aws']);
const cp = await startControlPlane({ name: 'peers-hypotheses' });
try {
  const tls = await servingCertificate(join(cp.dir, 'tls'));
  await createAll(
    cp,
    Array.from({ length: NAMESPACES }, (_, i) => ({
      path: '/api/v1/namespaces',
      body: { metadata: { name: `team-${i}` } },
    })),
  );
  await createAll(
    cp,
    Array.from({ length: SAS }, (_, i) => serviceAccount(i)).map(({ namespace, body }) => ({
      path: `/api/v1/namespaces/${namespace}/serviceaccounts`,
      body,
    })),
  );
  for (const items of chartObjects(['aws'])) await createAll(cp, items);
  for (const pid of Object.values(cp.pids)) pin(pid, LOAD_CPU);
  const corpora: Record<string, Buffer[]> = {
    'bench (as sent)': streamReviews('aws', 'bench', SAS).reviews,
    'bench, all with identity': makeReviews(300, (i) => ({
      namespace: `team-${(3 * i) % NAMESPACES}`,
      serviceAccount: `sa-${3 * i}`,
    })),
    charts: streamReviews('aws', 'charts', SAS).reviews,
  };
  for (const [name, reviews] of Object.entries(corpora)) {
    const kb = reviews.reduce((a, b) => a + b.length, 0) / reviews.length / 1000;
    console.log(`corpus ${name}: ${reviews.length} reviews, mean ${kb.toFixed(1)} KB`);
  }
  console.log(
    '\n| server | corpus | client | server µs CPU per review | reviews/s | server CPU, of a core | client µs CPU per review | client connections | threads, children | CPU 0 busy with others |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  const subjects = [() => serve(cp, tls), ...[0, 1, 2].map((v) => () => awsPeer(cp, tls, vars.AWS_PEER, v))];
  for (const start of subjects) {
    const s = await start();
    try {
      for (const [name, reviews] of Object.entries(corpora))
        for (const client of s.clients) await measure(cp, s, name, reviews, client);
    } finally {
      await s.stop();
    }
  }
} finally {
  await cp.stop();
}
