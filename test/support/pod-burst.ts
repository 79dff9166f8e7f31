// A burst of dry-run Pod creations through kube-apiserver, as a controller scaling out makes one:
// `count` creates, `concurrency` at a time, as the admin over keep-alive connections. Each answer
// is judged: created with the webhook's mutation, or refused (with kube-apiserver's message).
import { Agent, request } from 'node:https';
import type { ControlPlane } from '../harness/control-plane.ts';

export interface BurstResult {
  /** Pods created (dry run) with the webhook's mutation. */
  mutated: number;
  /** Every other answer: status and the start of kube-apiserver's message, counted. */
  refused: Map<string, number>;
}

/** `count` dry-run creates of a Pod of `containers` containers for ServiceAccount `serviceAccount` in `namespace`. */
export async function podBurst(
  cp: ControlPlane,
  namespace: string,
  serviceAccount: string,
  count: number,
  concurrency: number,
  containers = 1,
): Promise<BurstResult> {
  const agent = new Agent({
    keepAlive: true,
    maxSockets: concurrency,
    ca: cp.caPem,
    cert: cp.clientCertPem,
    key: cp.clientKeyPem,
  });
  const result: BurstResult = { mutated: 0, refused: new Map() };
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve) => {
      const body = JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `burst-${i}` },
        spec: {
          serviceAccountName: serviceAccount,
          containers: Array.from({ length: containers }, (_, c) => ({
            name: `container-${c}`,
            image: 'registry.example/team-a/worker:1.0',
            args: ['--shard', String(c), '--config', '/etc/worker/config.yaml'],
          })),
        },
      });
      const req = request(
        new URL(`/api/v1/namespaces/${namespace}/pods?dryRun=All`, cp.server),
        { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c));
          res.on('end', () => {
            const mutated = res.statusCode === 201 && text.includes('AWS_WEB_IDENTITY_TOKEN_FILE');
            if (mutated) result.mutated++;
            else {
              const key = `${res.statusCode} ${String((JSON.parse(text) as { message?: string }).message).slice(0, 400)}`;
              result.refused.set(key, (result.refused.get(key) ?? 0) + 1);
            }
            resolve();
          });
        },
      );
      req.on('error', (err) => {
        const key = `error ${err.message}`;
        result.refused.set(key, (result.refused.get(key) ?? 0) + 1);
        resolve();
      });
      req.end(body);
    });
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < count) await one(next++);
      }),
    );
  } finally {
    agent.destroy();
  }
  return result;
}

/** Refused answers, all kinds together. */
export const refusedCount = (r: BurstResult) => [...r.refused.values()].reduce((a, b) => a + b, 0);
