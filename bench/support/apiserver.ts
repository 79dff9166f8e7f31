// What bench/apiserver.ts measures through kube-apiserver: Pods created at a fixed rate (open
// loop, dry run), kube-apiserver's own webhook histogram read from /metrics, the connections a
// webhook holds (from /proc/net/tcp, at its side), and the protocol ALPN picks for what
// kube-apiserver offers it.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { connect } from 'node:tls';
import type { ControlPlane } from '../../test/harness/control-plane.ts';

// ------------------------------------------------------------------ Prometheus histograms

export interface Histogram {
  /** Cumulative counts by upper bound (+Inf included), ascending. */
  buckets: [number, number][];
  sum: number;
  count: number;
}

/** The series of `name` whose labels pass `match`, added up (a histogram over several label sets). */
export function histogramOf(text: string, name: string, match: (labels: string) => boolean): Histogram {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  const line = new RegExp(`^${name}_(bucket|sum|count)\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const [, part, labels, value] of text.matchAll(line)) {
    if (!match(labels)) continue;
    if (part === 'sum') sum += Number(value);
    else if (part === 'count') count += Number(value);
    else {
      const le = /(?:^|,)le="([^"]+)"/.exec(labels)?.[1] ?? '+Inf';
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      buckets.set(bound, (buckets.get(bound) ?? 0) + Number(value));
    }
  }
  return { buckets: [...buckets].sort((a, b) => a[0] - b[0]), sum, count };
}

/** What was observed between two scrapes. */
export function since(before: Histogram, after: Histogram): Histogram {
  const old = new Map(before.buckets);
  return {
    buckets: after.buckets.map(([le, n]) => [le, n - (old.get(le) ?? 0)]),
    sum: after.sum - before.sum,
    count: after.count - before.count,
  };
}

/** histogram_quantile's estimate: linear within the bucket the quantile falls in. */
export function quantile(h: Histogram, q: number): number {
  const total = h.buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, n] of h.buckets) {
    if (n >= rank) {
      if (le === Number.POSITIVE_INFINITY) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(1, n - below);
    }
    [lower, below] = [le, n];
  }
  return lower;
}

// ------------------------------------------------------------------ Pods through kube-apiserver

export interface PodToCreate {
  namespace: string;
  body: Buffer;
}

export interface CreateRun {
  /** Latencies of the creates answered 201, ms, sorted. */
  latencies: Float64Array;
  /** Failed creates by message (ports and numbers of a kind kept, so the same cause counts once). */
  failures: Map<string, number>;
  sent: number;
  seconds: number;
}

/** A message of a failure, its run-specific parts (ports, uids) blanked so one cause is one key. */
function failureKey(status: number, body: string): string {
  let message = body;
  try {
    message = (JSON.parse(body) as { message?: string }).message ?? body;
  } catch {}
  const clean = message
    .replace(/\b(\d{1,3}(?:\.\d{1,3}){3}):\d+/g, '$1:PORT')
    .replace(/timeout=\d+s/g, 'timeout=Ns')
    .replace(/team-\d+\/sa-[\w-]+/g, 'NAMESPACE/NAME')
    .replace(/"sa-[\w-]+"/g, '"NAME"')
    .replace(/bench-spread-\d+/g, 'bench-spread-N')
    .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, 'UID')
    .slice(0, 240);
  return `HTTP ${status}: ${clean}`;
}

function createPod(agent: Agent, cp: ControlPlane, pod: PodToCreate): Promise<{ ms: number; failure?: string }> {
  const start = performance.now();
  return new Promise((resolve) => {
    const req = request(
      new URL(`/api/v1/namespaces/${pod.namespace}/pods?dryRun=All`, cp.server),
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': pod.body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        const ok = res.statusCode === 201;
        res.on('data', (c: Buffer) => ok || chunks.push(c));
        res.on('end', () =>
          resolve({
            ms: performance.now() - start,
            failure: ok ? undefined : failureKey(res.statusCode ?? 0, Buffer.concat(chunks).toString()),
          }),
        );
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error('no answer in 60 s')));
    req.on('error', (err) => resolve({ ms: performance.now() - start, failure: `client: ${err.message}` }));
    req.end(pod.body);
  });
}

/** An HTTPS agent of the cluster's admin, as a controller's client holds its connections. */
export function adminAgent(cp: ControlPlane, connections: number): Agent {
  return new Agent({
    keepAlive: true,
    maxSockets: connections,
    ca: cp.caPem,
    cert: cp.clientCertPem,
    key: cp.clientKeyPem,
  });
}

/** `rate` creates a second for `seconds`, each sent on schedule whatever the answers before it (open loop). */
export async function createAtRate(
  agent: Agent,
  cp: ControlPlane,
  pods: PodToCreate[],
  rate: number,
  seconds: number,
): Promise<CreateRun> {
  const pending: Promise<{ ms: number; failure?: string }>[] = [];
  const t0 = performance.now();
  let sent = 0;
  while (performance.now() - t0 < seconds * 1000) {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    for (; sent < due; sent++) pending.push(createPod(agent, cp, pods[sent % pods.length]));
    await new Promise((r) => setTimeout(r, 1));
  }
  const answers = await Promise.all(pending);
  const failures = new Map<string, number>();
  for (const a of answers) if (a.failure) failures.set(a.failure, (failures.get(a.failure) ?? 0) + 1);
  const latencies = Float64Array.from(answers.filter((a) => !a.failure).map((a) => a.ms)).sort();
  return { latencies, failures, sent, seconds: (performance.now() - t0) / 1000 };
}

/**
 * `n` creates, `inflight` at a time (closed loop: as fast as kube-apiserver answers). The warm-up
 * before a server is measured: a webhook that has served for a while, as one in a cluster has.
 */
export async function createMany(agent: Agent, cp: ControlPlane, pods: PodToCreate[], n: number, inflight = 16) {
  let next = 0;
  let failed = 0;
  const worker = async () => {
    while (next < n) if ((await createPod(agent, cp, pods[next++ % pods.length])).failure) failed++;
  };
  await Promise.all(Array.from({ length: Math.min(inflight, n) }, worker));
  return { created: n - failed, failed };
}

// ------------------------------------------------------------------ the webhook's connections

/** Established connections to local `port` now, by their remote end (IPv4 and IPv6 tables). */
function established(port: number): string[] {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const out: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 3 && f[1].endsWith(hex) && f[3] === '01') out.push(f[2]);
    }
  }
  return out;
}

/**
 * Counts the connections to `port` the webhook accepted, at its side: sampled every 100 ms, each
 * remote end seen counts once (a connection opened and closed between two samples is missed).
 */
export function watchConnections(port: number) {
  const seen = new Set<string>();
  let most = 0;
  const sample = () => {
    const now = established(port);
    most = Math.max(most, now.length);
    for (const remote of now) seen.add(remote);
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { accepted: seen.size, mostAtOnce: most };
    },
  };
}

/**
 * What kube-apiserver offers a webhook at `url` by ALPN (k8s.io/apiserver pkg/util/webhook/client.go):
 * h2 and HTTP/1.1 to a localhost or loopback host only; HTTP/1.1 alone to any other URL and to
 * every Service (kubernetes/kubernetes#75791). test/e2e/kube-apiserver-alpn.test.ts pins it.
 */
export function offeredBy(url: string): string[] {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  const loopback = host.toLowerCase() === 'localhost' || /^127\./.test(host) || host === '::1';
  return loopback ? ['h2', 'http/1.1'] : ['http/1.1'];
}

/** The protocol the webhook at `url` picks for what kube-apiserver offers it. */
export function negotiated(url: string, caPem: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ port: Number(port), host: hostname, ca: caPem, ALPNProtocols: offeredBy(url) });
    socket.once('secureConnect', () => {
      resolve(socket.alpnProtocol || 'http/1.1');
      socket.destroy();
    });
    socket.once('error', (err) => resolve(`? (${err.message})`));
  });
}
