// Connections end after an age, so a Service spreads kube-apiserver's reviews over the replicas.
// A Service (kube-proxy) balances connections, not requests. Behind one, kube-apiserver speaks
// HTTP/1.1 and reuses each pooled connection until it idles out (90 s): after a scale-up or a
// rolling update its connections to the old replicas keep carrying the reviews, and the new
// replica gets reviews only as connections are redialled. Over HTTP/2 (a localhost URL, other
// clients) one connection carries every review for as long as it lives
// (kubernetes/kubernetes#75791). Past its age (less a random share of up to AGE_JITTER, so
// connections opened together do not all redial at once):
// - HTTP/2: GOAWAY. Streams in progress finish; the client opens its next one on a new connection,
//   which the Service balances afresh, and closes this one once its streams are done. Nothing is
//   refused: a stream the client sent after the GOAWAY left is one it knows was not processed,
//   and retries.
// - HTTP/1.1: the next answer says `Connection: close` and the connection closes after it; one
//   idle past its age is left to the keep-alive timeout (closing it could race a request on the
//   way, which kube-apiserver would not retry).
import { constants, type ServerHttp2Session } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:net';
import type { TLSSocket } from 'node:tls';

/** The largest share of the age a connection may end early. */
const AGE_JITTER = 0.1;
/** After GOAWAY, how long a client may keep the connection before the server closes it (its streams finish first). */
const GOAWAY_GRACE_MS = 30_000;

/** Applies the age to `server` (HTTPS, HTTP/2 with HTTP/1.1); 0 never ends a connection; `closed` counts each one ended. */
export function limitConnectionAge(
  server: Server,
  maxAgeMs: number,
  closed: () => void,
  random: () => number = Math.random,
): void {
  if (maxAgeMs <= 0) return;
  const ageOf = () => maxAgeMs * (1 - AGE_JITTER * random());
  // HTTP/1.1: the deadline of each socket (an HTTP/2 session's socket is a proxy: it has its timer).
  const deadlines = new WeakMap<TLSSocket, number>();
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol !== 'h2') deadlines.set(socket, performance.now() + ageOf());
  });
  server.on('session', (session: ServerHttp2Session) => {
    let grace: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => {
      if (session.closed || session.destroyed) return;
      closed();
      // GOAWAY only: the client finishes its streams and closes the connection itself (Go does
      // once it is idle). session.close() would close it from here as soon as the streams are
      // done, while the client may still be sending a stream it opened before the GOAWAY came:
      // the unread bytes turn the close into a reset, and kube-apiserver fails the reviews whose
      // answers were still on the wire ("client connection force closed"; measured with
      // bench:apiserver). A client that keeps the connection is closed after GOAWAY_GRACE_MS.
      session.goaway(constants.NGHTTP2_NO_ERROR);
      grace = setTimeout(() => session.close(), GOAWAY_GRACE_MS);
      grace.unref();
    }, ageOf());
    timer.unref();
    session.once('close', () => {
      clearTimeout(timer);
      clearTimeout(grace);
    });
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.httpVersionMajor !== 1) return;
    const deadline = deadlines.get(req.socket as TLSSocket);
    if (deadline === undefined || performance.now() < deadline || res.headersSent) return;
    // Counted once: the connection ends after this answer.
    if (!res.hasHeader('connection')) closed();
    res.setHeader('connection', 'close');
  });
}
