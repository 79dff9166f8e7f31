// Many watches over few connections: HTTP/2 streams multiplexed on a bounded pool of sessions to
// the API server. Over HTTP/1.1 each open watch holds a connection of its own, so a token
// requestor watching 2,000 namespaces held 2,000 (issue 30); here it holds one per
// MAX_STREAMS_PER_CONNECTION watches.

import {
  connect,
  constants,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type SecureClientSessionOptions,
} from 'node:http2';

/**
 * Streams one session carries at most: kube-apiserver's own limit (--http2-max-streams-per-connection,
 * 100 by default in 1.34) and the least HTTP/2 asks a server to allow (RFC 9113), assumed until the
 * server's SETTINGS say less: a stream over the server's limit would wait for a place, and a watch
 * never gives its place back.
 */
export const MAX_STREAMS_PER_CONNECTION = 100;

/** An answer's status and body stream. */
interface Http2Answer {
  statusCode: number;
  stream: ClientHttp2Stream;
  /** The body was read to its end (not cut by a reset or a closed connection). */
  complete(): boolean;
}

interface Session {
  /** Resolves once the server's SETTINGS are in. */
  ready: Promise<ClientHttp2Session>;
  session?: ClientHttp2Session;
  /** Streams open on it and being opened. */
  streams: number;
  /** The server's limit once its SETTINGS are in, capped. */
  limit: number;
  closed: boolean;
}

export class Http2Pool {
  readonly #origin: string;
  readonly #tls: () => Promise<SecureClientSessionOptions>;
  readonly #sessions = new Set<Session>();

  constructor(origin: string, tls: () => Promise<SecureClientSessionOptions>) {
    this.#origin = origin;
    this.#tls = tls;
  }

  /** Connections open now (a diagnostic and what the benchmark reports). */
  get connections(): number {
    return this.#sessions.size;
  }

  /** Sends one request; resolves once the response headers are in. */
  async request(
    headers: Record<string, string | number>,
    body: string | undefined,
    timeoutMs: number,
  ): Promise<Http2Answer> {
    // Reserved at once, so concurrent callers spread over sessions instead of all opening one.
    const s = this.#reserve();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      s.streams--;
    };
    let stream: ClientHttp2Stream;
    try {
      const session = await s.ready;
      stream = session.request(headers, { endStream: body === undefined });
    } catch (err) {
      release();
      this.#drop(s);
      throw err;
    }
    stream.on('close', release);
    if (body !== undefined) stream.end(body);
    let ended = false;
    stream.on('end', () => {
      ended = true;
    });
    if (timeoutMs > 0) stream.setTimeout(timeoutMs, () => stream.close(constants.NGHTTP2_CANCEL));
    return new Promise((resolve, reject) => {
      stream.once('response', (h) => resolve({ statusCode: Number(h[':status']), stream, complete: () => ended }));
      stream.once('error', reject);
      stream.once('close', () =>
        reject(new Error(`the HTTP/2 stream closed before an answer (code ${stream.rstCode})`)),
      );
    });
  }

  /** Closes every session (the process is stopping): open streams end with an error. */
  close(): void {
    for (const s of [...this.#sessions]) this.#drop(s);
  }

  /** One stream's place on a session with room, a new session when none has any. */
  #reserve(): Session {
    let chosen: Session | undefined;
    for (const s of this.#sessions)
      if (s.streams < s.limit) {
        chosen = s;
        break;
      }
    chosen ??= this.#open();
    chosen.streams++;
    return chosen;
  }

  #open(): Session {
    const s: Session = {
      streams: 0,
      limit: MAX_STREAMS_PER_CONNECTION,
      closed: false,
      // The callbacks below run once `s` is assigned: the TLS material is read first.
      ready: this.#tls().then(
        (tls) =>
          new Promise<ClientHttp2Session>((resolve, reject) => {
            if (s.closed) return reject(new Error('the HTTP/2 connection was closed'));
            const session = connect(this.#origin, { ...tls, ALPNProtocols: ['h2'] });
            s.session = session;
            session.once('remoteSettings', (settings) => {
              s.limit = Math.min(
                MAX_STREAMS_PER_CONNECTION,
                settings.maxConcurrentStreams ?? MAX_STREAMS_PER_CONNECTION,
              );
              resolve(session);
            });
            session.once('error', reject);
            session.once('close', () => reject(new Error('the HTTP/2 connection closed before it was ready')));
            // A failed or closing connection takes no new streams; its open ones end, their owners retry.
            session.on('error', () => this.#drop(s));
            session.on('goaway', () => this.#sessions.delete(s));
            session.on('close', () => this.#drop(s));
            // Open streams keep the process busy, not an idle connection.
            session.unref();
          }),
      ),
    };
    s.ready.catch(() => this.#drop(s));
    this.#sessions.add(s);
    return s;
  }

  #drop(s: Session): void {
    s.closed = true;
    this.#sessions.delete(s);
    if (s.session && !s.session.destroyed) s.session.destroy();
  }
}
