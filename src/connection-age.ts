// Connections end after an age, so a Service spreads kube-apiserver's reviews over the replicas.
// A Service (kube-proxy) balances connections, not requests, and kube-apiserver keeps a working
// HTTP/2 connection for as long as it lives, sending every review over it: with two replicas one
// gets them all, and a replica started later (a scale-up, a rolling update) gets none until
// something closes the connection (kubernetes/kubernetes#75791). Past its age (less a random share
// of up to AGE_JITTER, so connections opened together do not all redial at once):
// - HTTP/2: GOAWAY. Streams in progress finish; the client opens its next one on a new connection,
//   which the Service balances afresh. Nothing is refused: a stream the client sent after the
//   GOAWAY left is one it knows was not processed, and retries.
// - HTTP/1.1: the next answer says `Connection: close` and the connection closes after it; one
//   idle past its age is left to the keep-alive timeout (closing it could race a request on the
//   way, which kube-apiserver would not retry).
import type { ServerHttp2Session } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:net';
import type { TLSSocket } from 'node:tls';

/** The largest share of the age a connection may end early. */
export const AGE_JITTER = 0.1;

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
    const timer = setTimeout(() => {
      if (session.closed || session.destroyed) return;
      closed();
      session.close(); // GOAWAY; streams in progress finish
    }, ageOf());
    timer.unref();
    session.once('close', () => clearTimeout(timer));
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
