// Who gets a connection when connections run short. The global cap alone let one client that
// holds every connection lock out all others, kube-apiserver included (issue #19 §4). Three rules:
// - one source address holds at most `maxConnectionsPerSource` connections;
// - a connection must finish TLS and send its first request within `firstRequestTimeoutMs`
//   (kube-apiserver sends its request at once); later ones are Node's keep-alive timeout's;
// - with client authentication, unauthenticated connections make room for authenticated ones:
//   at the cap, a new connection evicts the oldest established unauthenticated one, and room
//   for HANDSHAKE_RESERVE handshakes above the cap lets an authenticated client get in at all.
import type { Server, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

export interface ConnectionLimits {
  maxConnections: number;
  maxConnectionsPerSource: number;
  firstRequestTimeoutMs: number;
  /** Client certificates are checked: authenticated connections are kept before others. */
  preferAuthenticated: boolean;
}

/** Why the server closed a connection (a metric label: a closed set). */
export type ConnectionCloseReason = 'limit' | 'per_source_limit' | 'evicted' | 'first_request_timeout';

/** Handshakes admitted above the cap with client authentication, until they show a certificate. */
export const HANDSHAKE_RESERVE = 64;

interface Tracked {
  socket: Socket;
  source: string;
  /** Set once TLS is established with client authentication. */
  authenticated?: boolean;
  firstRequest?: NodeJS.Timeout;
}

/** An IPv4 peer on a dual-stack socket is reported as ::ffff:a.b.c.d: one source either way. */
const sourceOf = (socket: Socket) => (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
const keyOf = (socket: Socket) => `${socket.remoteAddress}|${socket.remotePort}`;

/** Applies the rules to `server` (HTTP or HTTPS); `closed` is told each connection it closes. */
export function limitConnections(
  server: Server,
  limits: ConnectionLimits,
  closed: (reason: ConnectionCloseReason) => void,
): void {
  // Node refuses at accept beyond this, before any of the code below runs.
  server.maxConnections = limits.maxConnections + (limits.preferAuthenticated ? HANDSHAKE_RESERVE : 0);
  server.on('drop', () => closed('limit'));
  // Oldest first (insertion order): the first to go when room is needed.
  const open = new Map<string, Tracked>();
  const perSource = new Map<string, number>();
  const close = (socket: Socket, reason: ConnectionCloseReason) => {
    socket.destroy();
    closed(reason);
  };

  const evictUnauthenticated = (): boolean => {
    for (const t of open.values())
      if (t.authenticated === false) {
        close(t.socket, 'evicted');
        return true;
      }
    return false;
  };

  server.on('connection', (socket: Socket) => {
    const source = sourceOf(socket);
    const held = perSource.get(source) ?? 0;
    if (held >= limits.maxConnectionsPerSource) {
      close(socket, 'per_source_limit');
      return;
    }
    if (open.size >= limits.maxConnections) {
      // Without client authentication nothing tells one client from another: the newcomer goes.
      if (!limits.preferAuthenticated) {
        close(socket, 'limit');
        return;
      }
      // With it, an unauthenticated connection makes room; if none can, the newcomer waits in the
      // reserve (the ceiling bounds it) until its certificate is seen.
      evictUnauthenticated();
    }
    const key = keyOf(socket);
    const tracked: Tracked = { socket, source };
    tracked.firstRequest = setTimeout(() => close(socket, 'first_request_timeout'), limits.firstRequestTimeoutMs);
    tracked.firstRequest.unref();
    open.set(key, tracked);
    perSource.set(source, held + 1);
    socket.once('close', () => {
      clearTimeout(tracked.firstRequest);
      open.delete(key);
      const left = (perSource.get(source) ?? 1) - 1;
      if (left > 0) perSource.set(source, left);
      else perSource.delete(source);
    });
  });

  server.on('secureConnection', (socket: TLSSocket) => {
    if (!limits.preferAuthenticated) return;
    const tracked = open.get(keyOf(socket));
    if (!tracked) return;
    tracked.authenticated = socket.authorized;
    // Over the cap (in the handshake reserve): only an authenticated client stays.
    if (!socket.authorized && open.size > limits.maxConnections) close(tracked.socket, 'limit');
  });

  server.on('request', (req: { socket: Socket }) => {
    const tracked = open.get(keyOf(req.socket));
    if (tracked?.firstRequest) {
      clearTimeout(tracked.firstRequest);
      tracked.firstRequest = undefined;
    }
  });
}
