// Who gets a connection when connections run short. The global cap alone let one client that
// holds every connection lock out all others, kube-apiserver included (issue #19 §4). The rules:
// - one source address holds at most `maxConnectionsPerSource` connections that are doing
//   nothing: not yet sent a request, or idle between requests. A connection with a request in
//   progress is not counted: kube-apiserver's bursts come from one address (behind a proxy, all
//   of a cluster's), and it does not retry a POST whose connection was cut (issue #28 §5). At the
//   cap, a newcomer closes that source's own connection idle the longest (an HTTP/2 one with
//   GOAWAY, which the client's retry covers); only when none is idle is the newcomer closed;
// - connections with a verified client certificate, and those from `exemptSources` (a proxy
//   kube-apiserver comes through), are not counted per source;
// - a connection must finish TLS and send its first request within `firstRequestTimeoutMs`
//   (kube-apiserver sends its request at once); later ones are Node's keep-alive timeout's;
// - with client authentication, unauthenticated connections make room for authenticated ones:
//   at the cap, a new connection evicts the oldest established unauthenticated one, and room
//   for HANDSHAKE_RESERVE handshakes above the cap lets an authenticated client get in at all.
import { BlockList, type Server, type Socket } from 'node:net';
import type { ServerHttp2Session } from 'node:http2';
import type { TLSSocket } from 'node:tls';

export interface ConnectionLimits {
  maxConnections: number;
  maxConnectionsPerSource: number;
  firstRequestTimeoutMs: number;
  /** Client certificates are checked: authenticated connections are kept before others. */
  preferAuthenticated: boolean;
  /** Source addresses not held to the per-source cap (a proxy in front of the webhook). */
  exemptSources?: BlockList;
}

/** Why the server closed a connection (a metric label: a closed set). */
export type ConnectionCloseReason =
  | 'limit'
  | 'per_source_limit'
  | 'per_source_idle'
  | 'evicted'
  | 'first_request_timeout';

/** Handshakes admitted above the cap with client authentication, until they show a certificate. */
export const HANDSHAKE_RESERVE = 64;

interface Tracked {
  socket: Socket;
  source: string;
  /** Set once TLS is established with client authentication. */
  authenticated?: boolean;
  /** Not counted per source: authenticated, or from an exempt source. */
  exempt: boolean;
  firstRequest?: NodeJS.Timeout;
  requested: boolean;
  /** Requests (HTTP/2: streams) in progress. */
  active: number;
  idleSince: number;
  session?: ServerHttp2Session;
}

/** An IPv4 peer on a dual-stack socket is reported as ::ffff:a.b.c.d: one source either way. */
const sourceOf = (socket: Socket) => (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
const keyOf = (socket: { remoteAddress?: string; remotePort?: number }) =>
  `${socket.remoteAddress}|${socket.remotePort}`;
const familyOf = (address: string) => (address.includes(':') ? 'ipv6' : 'ipv4');

/** The connections of each source that count against its cap (doing nothing, not exempt). */
class SourceCounts {
  readonly #bySource = new Map<string, Set<Tracked>>();
  readonly #counted = new Map<string, number>();
  add(t: Tracked) {
    const set = this.#bySource.get(t.source) ?? new Set<Tracked>();
    this.#bySource.set(t.source, set.add(t));
  }
  remove(t: Tracked) {
    const set = this.#bySource.get(t.source);
    set?.delete(t);
    if (set?.size === 0) this.#bySource.delete(t.source);
  }
  /** Whether `t` counts now; call around every change of its state. */
  static counts(t: Tracked): boolean {
    return !t.exempt && t.active === 0;
  }
  adjust(t: Tracked, delta: number) {
    const n = (this.#counted.get(t.source) ?? 0) + delta;
    if (n > 0) this.#counted.set(t.source, n);
    else this.#counted.delete(t.source);
  }
  counted(source: string): number {
    return this.#counted.get(source) ?? 0;
  }
  /** The source's connection idle the longest (it has served a request and serves none now). */
  longestIdle(source: string): Tracked | undefined {
    let best: Tracked | undefined;
    for (const t of this.#bySource.get(source) ?? [])
      if (t.requested && SourceCounts.counts(t) && (!best || t.idleSince < best.idleSince)) best = t;
    return best;
  }
}

/** The addresses and CIDRs of --proxy-sources (validated by config.ts) as a list to check sources against. */
export function sourceList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, prefix] = entry.split('/');
    const family = familyOf(address);
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  return list;
}

/** Applies the rules to `server` (HTTPS, HTTP/2 with HTTP/1.1); `closed` is told each connection it closes. */
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
  const sources = new SourceCounts();
  const close = (t: Tracked | Socket, reason: ConnectionCloseReason) => {
    // An idle HTTP/2 connection is closed with GOAWAY: a stream the client sent meanwhile is
    // answered, or the client knows it was not processed and retries it elsewhere.
    if (reason === 'per_source_idle' && 'source' in t && t.session) t.session.close();
    else ('source' in t ? t.socket : t).destroy();
    closed(reason);
  };
  /** Changes `t`'s state, keeping its source's count. */
  const update = (t: Tracked, change: (t: Tracked) => void) => {
    const before = SourceCounts.counts(t);
    change(t);
    const after = SourceCounts.counts(t);
    if (before !== after) sources.adjust(t, after ? 1 : -1);
  };

  const evictUnauthenticated = (): boolean => {
    for (const t of open.values())
      if (t.authenticated === false) {
        close(t, 'evicted');
        return true;
      }
    return false;
  };

  /** Room for one more of `source`'s connections: its idle one goes, or false. */
  const roomInSource = (source: string): boolean => {
    if (limits.exemptSources?.check(source, familyOf(source))) return true;
    if (sources.counted(source) < limits.maxConnectionsPerSource) return true;
    const idle = sources.longestIdle(source);
    if (!idle) return false;
    // It no longer counts from now: its close may take a moment (GOAWAY).
    update(idle, (t) => {
      t.exempt = true;
    });
    close(idle, 'per_source_idle');
    return true;
  };

  server.on('connection', (socket: Socket) => {
    const source = sourceOf(socket);
    if (!roomInSource(source)) {
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
    const exempt = limits.exemptSources?.check(source, familyOf(source)) ?? false;
    const tracked: Tracked = { socket, source, exempt, requested: false, active: 0, idleSince: performance.now() };
    tracked.firstRequest = setTimeout(() => close(tracked, 'first_request_timeout'), limits.firstRequestTimeoutMs);
    tracked.firstRequest.unref();
    open.set(key, tracked);
    sources.add(tracked);
    if (SourceCounts.counts(tracked)) sources.adjust(tracked, 1);
    socket.once('close', () => {
      clearTimeout(tracked.firstRequest);
      open.delete(key);
      sources.remove(tracked);
      // Gone: it counts no more, whatever its requests' ends change later.
      update(tracked, (t) => {
        t.exempt = true;
      });
    });
  });

  server.on('secureConnection', (socket: TLSSocket) => {
    if (!limits.preferAuthenticated) return;
    const tracked = open.get(keyOf(socket));
    if (!tracked) return;
    tracked.authenticated = socket.authorized;
    if (socket.authorized)
      update(tracked, (t) => {
        t.exempt = true;
      });
    // Over the cap (in the handshake reserve): only an authenticated client stays.
    if (!socket.authorized && open.size > limits.maxConnections) close(tracked, 'limit');
  });

  server.on('session', (session: ServerHttp2Session) => {
    const tracked = open.get(keyOf(session.socket));
    if (tracked) tracked.session = session;
  });

  server.on('request', (req: { socket: Socket }, res: { once(e: 'close', f: () => void): void }) => {
    const tracked = open.get(keyOf(req.socket));
    if (!tracked) return;
    clearTimeout(tracked.firstRequest);
    tracked.firstRequest = undefined;
    update(tracked, (t) => {
      t.requested = true;
      t.active++;
    });
    res.once('close', () =>
      update(tracked, (t) => {
        t.active--;
        t.idleSince = performance.now();
      }),
    );
  });
}
