// HTTP/2's own limits, beside the connection rules (connection-limits.ts) and the review budget
// (review-budget.ts). Two ways an HTTP/2 client costs more than its streams show:
// - Rapid reset (CVE-2023-44487): a stream the client resets frees its slot under
//   SETTINGS_MAX_CONCURRENT_STREAMS at once, while the review it started still runs, so a client
//   could keep any number of reviews running. Here a session counts the reviews it started until
//   their work is done, reset or not, and starts none beyond the streams it may have open.
// - Reset in a loop: Node 24's nghttp2 ends a session only after 1,000 resets (33 a second after
//   that), each of which may have started a review (measured: 1,051 reviews worked out for 5,000
//   streams opened and reset on one connection). Here a stream the client resets within
//   RAPID_RESET_MS of opening it, before its answer is written, costs the session a token;
//   RESET_BURST tokens, RESET_RATE more a second, and a session out of tokens is ended with GOAWAY
//   ENHANCE_YOUR_CALM. kube-apiserver resets a stream when its call times out (after the
//   webhook's timeoutSeconds, at least 1 s: a burst of slow reviews times out by the hundred) or
//   its own client goes away: never in a loop of fresh streams.
import { constants, type Http2SecureServer, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';

/** Streams a session may reset before their answer, at once. */
export const RESET_BURST = 100;
/** Tokens a session gets back each second. */
const RESET_RATE = 10;
/** A reset this soon after the stream opened is rapid; kube-apiserver's timeouts come later (1 s at least). */
const RAPID_RESET_MS = 500;

interface SessionState {
  /** Reviews started on this session whose work is not done (their stream may be gone). */
  working: number;
  tokens: number;
  at: number;
}

export interface StreamLimiter {
  /** A review starts on `stream`: its release, or undefined when its session has no room for more work. */
  start(stream: ServerHttp2Stream): (() => void) | undefined;
  /** Closes a stream for the server's own reasons (a deadline): not counted as the client's reset. */
  cancel(stream: ServerHttp2Stream): void;
}

export function limitStreams(
  server: Http2SecureServer,
  maxConcurrentStreams: number,
  closed: (reason: 'rapid_reset') => void,
): StreamLimiter {
  const sessions = new WeakMap<ServerHttp2Session, SessionState>();
  const ours = new WeakSet<ServerHttp2Stream>();
  const charge = (session: ServerHttp2Session, state: SessionState) => {
    const now = performance.now();
    state.tokens = Math.min(RESET_BURST, state.tokens + ((now - state.at) / 1000) * RESET_RATE) - 1;
    state.at = now;
    if (state.tokens >= 0 || session.destroyed) return;
    closed('rapid_reset');
    // GOAWAY, then the connection goes (with an error: without one Node only ends the socket,
    // and a client that keeps writing keeps it).
    session.destroy(new Error('rapid reset'), constants.NGHTTP2_ENHANCE_YOUR_CALM);
  };
  server.on('session', (session: ServerHttp2Session) => {
    const state: SessionState = { working: 0, tokens: RESET_BURST, at: performance.now() };
    sessions.set(session, state);
    session.on('stream', (stream: ServerHttp2Stream) => {
      const opened = performance.now();
      stream.once('aborted', () => {
        if (!ours.has(stream) && performance.now() - opened < RAPID_RESET_MS) charge(session, state);
      });
    });
  });
  return {
    start(stream) {
      const state = sessions.get(stream.session as ServerHttp2Session);
      if (!state) return () => {};
      if (state.working >= maxConcurrentStreams) return undefined;
      state.working++;
      let done = false;
      return () => {
        if (done) return;
        done = true;
        state.working--;
      };
    },
    cancel(stream) {
      ours.add(stream);
      if (!stream.closed) stream.close(constants.NGHTTP2_CANCEL);
    },
  };
}
