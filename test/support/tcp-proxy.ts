// A TCP proxy for tests that need to break the network between two parts: cut every connection
// (a reset), or freeze (connections stay open and silent, new ones are accepted and never
// answered, as on a partition). `upstream` picks the port each new connection goes to.
import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Destroys every open connection, both sides. */
  cut(): void;
  /** Connections stop carrying anything; new ones hang. */
  freeze(): void;
  close(): void;
}

export async function startTcpProxy(upstream: () => number | undefined, host = '127.0.0.1'): Promise<TcpProxy> {
  let frozen = false;
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const server = createServer((client) => {
    track(client);
    if (frozen) return; // accepted, never answered
    const port = upstream();
    if (port === undefined) return void client.destroy();
    const target = connect(port, host);
    track(target);
    client.on('close', () => target.destroy());
    target.on('close', () => client.destroy());
    client.pipe(target).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      for (const s of sockets) s.destroy();
    },
    freeze() {
      frozen = true;
      for (const s of sockets) s.pause();
    },
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** A proxy to one URL's host and port. */
export function proxyTo(url: string): Promise<TcpProxy> {
  const target = new URL(url);
  return startTcpProxy(() => Number(target.port), target.hostname);
}
