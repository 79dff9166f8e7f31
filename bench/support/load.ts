// Load for the benchmarks: AdmissionReviews POSTed over HTTPS keep-alive connections, closed loop
// (as fast as the server answers, N in flight) or open loop (a fixed rate, whatever the server
// does: a slow answer delays no later request, so pauses show in the tail as callers see them).
import { Agent, request } from 'node:https';

export interface Answer {
  status: number;
  ms: number;
  body?: Buffer;
  /** Sent on a connection that answered before (keep-alive), not on a new one. */
  reused?: boolean;
}

export interface Target {
  url: string;
  caPem: string;
}

/** One POST; the answer's body is kept only when asked (reading it costs the load generator). */
export function post(agent: Agent, target: Target, body: Buffer, keepBody = false): Promise<Answer> {
  return new Promise((resolve) => {
    const start = performance.now();
    const req = request(
      target.url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (keepBody) chunks.push(c);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            ms: performance.now() - start,
            body: keepBody ? Buffer.concat(chunks) : undefined,
            reused: req.reusedSocket,
          }),
        );
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('no answer in 30 s')));
    req.on('error', () => resolve({ status: 0, ms: performance.now() - start }));
    req.end(body);
  });
}

export function agentFor(target: Target, connections: number): Agent {
  return new Agent({ keepAlive: true, maxSockets: connections, ca: target.caPem });
}

export interface Run {
  /** Latencies of the answers with status 200, ms. */
  latencies: Float64Array;
  errors: number;
  seconds: number;
  /** Connections opened during the run (the first request on each). */
  opened: number;
}

/** As fast as the server answers, `connections` requests in flight, for `seconds`. */
export async function closedLoop(
  target: Target,
  reviews: Buffer[],
  connections: number,
  seconds: number,
): Promise<Run> {
  const agent = agentFor(target, connections);
  const latencies: number[] = [];
  let errors = 0;
  let opened = 0;
  let next = 0;
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        const a = await post(agent, target, reviews[next++ % reviews.length]);
        if (a.status === 200) latencies.push(a.ms);
        else errors++;
        if (!a.reused) opened++;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  return { latencies: Float64Array.from(latencies).sort(), errors, seconds: elapsed, opened };
}

/** `rate` requests per second for `seconds`, sent on schedule over up to `connections` connections. */
export async function openLoop(
  target: Target,
  reviews: Buffer[],
  rate: number,
  seconds: number,
  connections: number,
): Promise<Run> {
  const agent = agentFor(target, connections);
  const pending: Promise<Answer>[] = [];
  const t0 = performance.now();
  let sent = 0;
  while (performance.now() - t0 < seconds * 1000) {
    const due = Math.floor(((performance.now() - t0) / 1000) * rate);
    for (; sent < due; sent++) pending.push(post(agent, target, reviews[sent % reviews.length]));
    await new Promise((r) => setTimeout(r, 1));
  }
  const answers = await Promise.all(pending);
  agent.destroy();
  const ok = answers.filter((a) => a.status === 200);
  return {
    latencies: Float64Array.from(ok.map((a) => a.ms)).sort(),
    errors: answers.length - ok.length,
    seconds,
    opened: answers.filter((a) => !a.reused).length,
  };
}

export function percentile(sorted: Float64Array, p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : Number.NaN;
}
