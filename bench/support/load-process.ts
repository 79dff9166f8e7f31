// A closed-loop load generator in a process of its own (bench/peers-hypotheses.ts starts it on the
// load's CPU): HTTP/1.1 over node:https keep-alive connections (load.ts), or one HTTP/2 connection
// with as many streams in flight (node:http2, as kube-apiserver talks to a Go webhook). Prints
// {"n": answers with status 200, "seconds", "opened": connections opened, "cpu": its own CPU seconds}.
//
//   node bench/support/load-process.ts URL REVIEWS.json CONCURRENCY SECONDS http1|h2   (CA PEM in $CA)
import { readFileSync } from 'node:fs';
import { connect } from 'node:http2';
import { closedLoop } from './load.ts';

const [url, file, concurrency, secs, protocol] = process.argv.slice(2);
const reviews = (JSON.parse(readFileSync(file, 'utf8')) as string[]).map((s) => Buffer.from(s));
const caPem = process.env.CA ?? '';
const cpu0 = process.cpuUsage();

async function overH2(): Promise<{ n: number; seconds: number; opened: number }> {
  const u = new URL(url);
  const session = connect(u.origin, { ca: caPem });
  let failed: Error | undefined;
  session.on('error', (err) => {
    failed = err;
  });
  let next = 0;
  let n = 0;
  const t0 = performance.now();
  const deadline = t0 + Number(secs) * 1000;
  const one = (body: Buffer) =>
    new Promise<void>((resolve) => {
      // As kube-apiserver sends it: serve answers 411 to a review without a length.
      const req = session.request({
        ':method': 'POST',
        ':path': u.pathname,
        'content-type': 'application/json',
        'content-length': body.length,
      });
      req.on('response', (headers) => {
        if (headers[':status'] === 200) n++;
      });
      req.on('data', () => {});
      req.on('end', resolve);
      req.on('error', () => resolve());
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: Number(concurrency) }, async () => {
      while (performance.now() < deadline && !failed) await one(reviews[next++ % reviews.length]);
    }),
  );
  session.close();
  if (failed) throw new Error(`the HTTP/2 session failed after ${n} answers: ${failed.message}`);
  return { n, seconds: (performance.now() - t0) / 1000, opened: 1 };
}

const run =
  protocol === 'h2'
    ? await overH2()
    : await closedLoop({ url, caPem }, reviews, Number(concurrency), Number(secs)).then((r) => ({
        n: r.latencies.length,
        seconds: r.seconds,
        opened: r.opened,
      }));
const cpu = process.cpuUsage(cpu0);
process.stdout.write(JSON.stringify({ ...run, cpu: (cpu.user + cpu.system) / 1e6 }));
