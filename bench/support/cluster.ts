// The benchmarks' cluster contents: namespaces and ServiceAccounts POSTed as the admin over
// keep-alive connections, many at a time (creating 50,000 one by one would take minutes).
import { Agent, request } from 'node:https';
import type { ControlPlane } from '../../test/harness/control-plane.ts';

/** POSTs each body to its path, `concurrency` at a time; an object that exists already is fine. */
export async function createAll(cp: ControlPlane, items: { path: string; body: unknown }[], concurrency = 32) {
  const agent = new Agent({
    keepAlive: true,
    maxSockets: concurrency,
    ca: cp.caPem,
    cert: cp.clientCertPem,
    key: cp.clientKeyPem,
  });
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < items.length) {
          const item = items[next++];
          const status = await new Promise<number>((resolve, reject) => {
            const req = request(
              new URL(item.path, cp.server),
              { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
              (res) => {
                res.resume();
                res.on('end', () => resolve(res.statusCode ?? 0));
              },
            );
            req.on('error', reject);
            req.end(JSON.stringify(item.body));
          });
          if (status !== 201 && status !== 409) throw new Error(`POST ${item.path}: HTTP ${status}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
}
