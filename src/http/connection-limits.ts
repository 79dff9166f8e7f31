// Who gets a connection when connections run short. The global cap alone let one client that
// holds every connection lock out all others, kube-apiserver included (issue #19 §4). The rules:
// - below the overall cap no connection is closed to make room: kube-apiserver's bursts come from
//   one address (behind a proxy, all of a cluster's), behind a Service it speaks HTTP/1.1 and dials
//   a connection per review in flight, and from the server's side one it is about to reuse looks
//   idle. Closing such a connection races the POST kube-apiserver writes on it, which it does not
//   retry (issue #30: a per-source cap of 128 idle ones failed 11 to 31 creates at 100 Pods/s);
// - at the overall cap, the source holding the most connections doing nothing (idle between
//   requests, or never asked), if more than `maxConnectionsPerSource`, loses the one idle the
//   longest (an HTTP/2 one with GOAWAY, which the client's retry covers), else its oldest that
//   never sent a request, to the newcomer; else the newcomer is closed. A connection with a
//   request in progress is never counted: one client cannot hold the others out;
// - connections with a verified client certificate, and those from `exemptSources` (a proxy
//   kube-apiserver comes through), are not counted per source;
// - a connection must finish TLS and send its first request within `firstRequestTimeoutMs`
//   (120 s by default: kube-apiserver may dial a connection and first use it much later, see
//   limits.ts); later ones are Node's keep-alive timeout's;
// - with client authentication, unauthenticated connections make room for authenticated ones:
//   at the cap, a new connection evicts the oldest established unauthenticated one, and room
//   for HANDSHAKE_RESERVE handshakes above the cap lets an authenticated client get in at all.
import { BlockList, type Server, type Socket } from 'node:net';
import type { ServerHttp2Session } from 'node:http2';
import type { TLSSocket } from 'node:tls';

interface ConnectionLimits {
  maxConnections: number;
  maxConnectionsPerSource: number;
  firstRequestTimeoutMs: number;
  /** Client certificates are checked: authenticated connections are kept before others. */
  preferAuthenticated: boolean;
  /** Source addresses not held to the per-source cap (a proxy in front of the webhook). */
  exemptSources?: BlockList;
}

/** Why the server closed a connection (a metric label: a closed set): `per_source_limit` makes room at the overall cap for a newcomer. */
type ConnectionCloseReason = 'limit' | 'per_source_limit' | 'evicted' | 'first_request_timeout';

/** Connections admitted above the cap: handshakes until they show a certificate, newcomers while the connection closed for them closes. */
const HANDSHAKE_RESERVE = 64;

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
  opened: number;
  idleSince: number;
  session?: ServerHttp2Session;
}

/** An IPv4 peer on a dual-stack socket is reported as ::ffff:a.b.c.d: one source either way. */
const sourceOf = (socket: Socket) => (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
const keyOf = (socket: { remoteAddress?: string; remotePort?: number }) =>
  `${socket.remoteAddress}|${socket.remotePort}`;
const familyOf = (address: string) => (address.includes(':') ? 'ipv6' : 'ipv4');

/** Doing nothing: not exempt, no request in progress. */
const idleOrFresh = (t: Tracked) => !t.exempt && t.active === 0;

/** The connections of each source, and which of them count against its cap. */
class Sources {
  readonly #bySource = new Map<string, Set<Tracked>>();
  add(t: Tracked) {
    const set = this.#bySource.get(t.source) ?? new Set<Tracked>();
    this.#bySource.set(t.source, set.add(t));
  }
  remove(t: Tracked) {
    const set = this.#bySource.get(t.source);
    set?.delete(t);
    if (set?.size === 0) this.#bySource.delete(t.source);
  }
  /** The one of `source` to close for room: idle the longest, else open the longest without a request. */
  victim(source: string): Tracked | undefined {
    let idle: Tracked | undefined;
    let fresh: Tracked | undefined;
    for (const t of this.#bySource.get(source) ?? []) {
      if (!idleOrFresh(t)) continue;
      if (t.requested) {
        if (!idle || t.idleSince < idle.idleSince) idle = t;
      } else if (!fresh || t.opened < fresh.opened) fresh = t;
    }
    return idle ?? fresh;
  }
  /** The source holding the most connections doing nothing, if more than `cap`. */
  heaviest(cap: number): string | undefined {
    let best: string | undefined;
    let most = cap;
    for (const [source, set] of this.#bySource) {
      let n = 0;
      for (const t of set) if (idleOrFresh(t)) n++;
      if (n > most) [best, most] = [source, n];
    }
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
  // Node refuses at accept beyond this, before any of the code below runs: room above the cap
  // for a newcomer while the connection closed for it is still closing, and for handshakes.
  server.maxConnections = limits.maxConnections + HANDSHAKE_RESERVE;
  server.on('drop', () => closed('limit'));
  const limiter = new Limiter(limits, closed);
  server.on('connection', (socket: Socket) => limiter.accepted(socket));
  server.on('secureConnection', (socket: TLSSocket) => limiter.secured(socket));
  server.on('session', (session: ServerHttp2Session) => {
    const tracked = limiter.tracked(session.socket);
    if (tracked) tracked.session = session;
  });
  server.on('request', (req: { socket: Socket }, res: { once(e: 'close', f: () => void): void }) =>
    limiter.requested(req.socket, res),
  );
}

/** The open connections and the rules, one instance per server. */
class Limiter {
  // Oldest first (insertion order): the first to go when room is needed.
  readonly #open = new Map<string, Tracked>();
  readonly #sources = new Sources();
  readonly #limits: ConnectionLimits;
  readonly #closed: (reason: ConnectionCloseReason) => void;

  constructor(limits: ConnectionLimits, closed: (reason: ConnectionCloseReason) => void) {
    this.#limits = limits;
    this.#closed = closed;
  }

  tracked(socket: { remoteAddress?: string; remotePort?: number }): Tracked | undefined {
    return this.#open.get(keyOf(socket));
  }

  accepted(socket: Socket): void {
    if (this.#open.size >= this.#limits.maxConnections && !this.#makeRoom()) {
      // Without client authentication nothing tells one client from another: the newcomer goes.
      if (!this.#limits.preferAuthenticated) {
        this.#close(socket, 'limit');
        return;
      }
      // With it, an unauthenticated connection makes room; if none can, the newcomer waits in the
      // reserve (the ceiling bounds it) until its certificate is seen.
      this.#evictUnauthenticated();
    }
    this.#track(socket);
  }

  secured(socket: TLSSocket): void {
    if (!this.#limits.preferAuthenticated) return;
    const tracked = this.tracked(socket);
    if (!tracked) return;
    tracked.authenticated = socket.authorized;
    if (socket.authorized) tracked.exempt = true;
    // Over the cap (in the handshake reserve): only an authenticated client stays.
    if (!socket.authorized && this.#open.size > this.#limits.maxConnections) this.#close(tracked, 'limit');
  }

  requested(socket: Socket, res: { once(e: 'close', f: () => void): void }): void {
    const tracked = this.tracked(socket);
    if (!tracked) return;
    clearTimeout(tracked.firstRequest);
    tracked.firstRequest = undefined;
    tracked.requested = true;
    tracked.active++;
    res.once('close', () => {
      tracked.active--;
      tracked.idleSince = performance.now();
    });
  }

  #track(socket: Socket): void {
    const source = sourceOf(socket);
    const key = keyOf(socket);
    const now = performance.now();
    const exempt = this.#limits.exemptSources?.check(source, familyOf(source)) ?? false;
    const tracked: Tracked = { socket, source, exempt, requested: false, active: 0, opened: now, idleSince: now };
    tracked.firstRequest = setTimeout(
      () => this.#close(tracked, 'first_request_timeout'),
      this.#limits.firstRequestTimeoutMs,
    );
    tracked.firstRequest.unref();
    this.#open.set(key, tracked);
    this.#sources.add(tracked);
    socket.once('close', () => {
      clearTimeout(tracked.firstRequest);
      this.#open.delete(key);
      this.#sources.remove(tracked);
    });
  }

  /** At the overall cap: the source most over its own cap gives up a connection, or false. */
  #makeRoom(): boolean {
    const heaviest = this.#sources.heaviest(this.#limits.maxConnectionsPerSource);
    const victim = heaviest === undefined ? undefined : this.#sources.victim(heaviest);
    if (!victim) return false;
    this.#close(victim, 'per_source_limit');
    return true;
  }

  #evictUnauthenticated(): void {
    for (const t of this.#open.values())
      if (t.authenticated === false) {
        this.#close(t, 'evicted');
        return;
      }
  }

  #close(t: Tracked | Socket, reason: ConnectionCloseReason): void {
    if ('source' in t) {
      // Gone from the counts now: its close may take a moment (GOAWAY).
      t.exempt = true;
      // An idle HTTP/2 connection is closed with GOAWAY: a stream the client sent meanwhile is
      // answered, or the client knows it was not processed and retries it elsewhere.
      if (t.session && t.requested) t.session.close();
      else t.socket.destroy();
    } else t.destroy();
    this.#closed(reason);
  }
}
