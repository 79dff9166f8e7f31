// One HTTPS server for the clouds' token services, on port 443 of a random 127.x.y.z address so
// parallel test files never collide. It answers for the real host names (the SDK child processes
// resolve them to this address) with a certificate from a test CA that only those children trust.
import { randomInt } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCa, createServingCert } from '../harness/certs.ts';

export interface StandInRequest {
  method: string;
  host: string;
  /** Path without the query. */
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface StandInResponse {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

/** A cloud service behind one or more host names. */
export interface StandInService {
  readonly hosts: readonly string[];
  handle(req: StandInRequest): StandInResponse | Promise<StandInResponse>;
}

export interface StandInServer {
  /** The loopback address the SDK children resolve every service host to. */
  address: string;
  /** PEM file of the CA that signed the serving certificate. */
  caFile: string;
  hosts: string[];
  /** Every request seen, in order (method, host, path), for diagnostics. */
  log: { method: string; host: string; path: string; status: number }[];
  stop(): Promise<void>;
}

const MAX_BODY = 1 << 20;

/** `address`: where to listen (port 443); default a random 127.x.y.z. */
export async function startStandInServer(
  dir: string,
  services: StandInService[],
  options: { address?: string } = {},
): Promise<StandInServer> {
  const byHost = new Map<string, StandInService>();
  for (const service of services) for (const host of service.hosts) byHost.set(host, service);
  const hosts = [...byHost.keys()];

  const ca = await createCa('sdk-proof-ca');
  const serving = await createServingCert(ca, 'cloud-stand-ins', { dns: hosts });
  const caFile = join(dir, 'stand-in-ca.pem');
  await writeFile(caFile, ca.cert);

  const log: StandInServer['log'] = [];
  const server = createServer({ cert: serving.cert, key: serving.key, minVersion: 'TLSv1.2' }, (req, res) => {
    void dispatch(byHost, req, res, log);
  });

  // Port 443 on a random 127.x.y.z: the real URLs carry no port, so the stand-in must sit on 443.
  for (let attempt = 1; ; attempt++) {
    const address = options.address ?? `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
    try {
      await listen(server, address);
      return {
        address,
        caFile,
        hosts,
        log,
        stop: () =>
          new Promise((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
          }),
      };
    } catch (err) {
      if (attempt >= 5 || options.address || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
}

function listen(server: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(443, address, () => {
      server.removeListener('error', onError);
      resolve();
    });
  });
}

async function dispatch(
  byHost: Map<string, StandInService>,
  req: IncomingMessage,
  res: ServerResponse,
  log: StandInServer['log'],
): Promise<void> {
  const host = (req.headers.host ?? '').replace(/:443$/, '').toLowerCase();
  const url = new URL(req.url ?? '/', `https://${host || 'unknown'}`);
  let answer: StandInResponse;
  try {
    const body = await readBody(req);
    const service = byHost.get(host);
    answer = service
      ? await service.handle({
          method: req.method ?? 'GET',
          host,
          path: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          body,
        })
      : { status: 404, body: `no stand-in for host ${host}` };
  } catch (err) {
    answer = { status: 500, body: `stand-in failure: ${(err as Error).stack ?? err}` };
  }
  log.push({ method: req.method ?? '', host, path: url.pathname, status: answer.status });
  res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
  res.end(answer.body);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) req.destroy(new Error('request body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
