// The admission server's resource limits. Each bounds one way a caller could make a replica hold
// memory or connections; together they keep a replica inside the chart's 256 MiB with margin.
// How each default was derived (measured on Node 24, see docs/hardening.md):
// - requests: kube-apiserver refuses request bodies over 3 MiB, and an UPDATE review carries
//   `object` and `oldObject`: 6 MiB.
// - in flight: a review holds its request body, a 16 KiB share, and twice its encoded answer (the
//   buffer and its TLS records) until the answer is written (src/http/review-budget.ts); a parsed
//   review costs ~2x its size in heap (measured: 12 MiB for a 6 MiB review); 32 MiB at once
//   fits next to the caches (measured: 300 answers of 943 KB at once peaked at 142 MiB of 256).
// - streams: an HTTP/2 connection carries at most 100 reviews at once (SETTINGS, and reviews
//   whose stream was reset still count until their work is done); their bytes are in the budget.
// - containers: each costs ~1.5 KB of patch with three clouds; 500 containers give a 0.75 MiB
//   patch, and etcd stores no object over 1.5 MiB, so beyond that the Pod could not be stored.
// - patch: 1 MiB of JSON Patch (1.4 MiB base64) is the most any legitimate Pod needs.
// - connections: an idle TLS connection costs ~60 KB; 512 of them ~30 MiB. One source holds at
//   most a quarter doing nothing (idle, or silent past its first second; connections with a
//   review in progress are not counted, so kube-apiserver's bursts are not refused): one client
//   cannot hold the others out (src/http/connection-limits.ts). Idle and silent connections are held
//   longer than kube-apiserver keeps one (90 s), so it closes them, never the server mid-send.
// - connection age: a connection ends after 5 minutes (HTTP/2 GOAWAY, HTTP/1.1 `Connection:
//   close` on an answer), so kube-apiserver redials and a Service spreads its reviews over the
//   replicas (src/http/connection-age.ts; measured with `npm run bench:apiserver`).
export interface ServerLimits {
  /** Largest request body accepted (413 beyond). */
  maxRequestBytes: number;
  /** Bytes of reviews in progress (request, answer until written, a share each) across connections (503, retry, beyond). */
  maxInflightRequestBytes: number;
  /** Reviews in progress on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Containers, init containers and ephemeral containers of one Pod (denied beyond). */
  maxContainers: number;
  /** Largest JSON Patch answered (the object is denied beyond). */
  maxPatchBytes: number;
  /** Open connections at once; more are refused at accept. */
  maxConnections: number;
  /** Connections doing nothing one source address keeps once the overall cap is reached. */
  maxConnectionsPerSource: number;
  /** Time from accept to the first request's headers, TLS handshake included. */
  firstRequestTimeoutMs: number;
  /** Time to receive a request's headers. */
  headersTimeoutMs: number;
  /** Time to receive a whole request, body included. */
  requestTimeoutMs: number;
  /** Time to complete the TLS handshake. */
  handshakeTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long (longer than kube-apiserver keeps one). */
  keepAliveTimeoutMs: number;
  /** Time for a client to take a whole answer; a client that does not read is cut off. */
  responseTimeoutMs: number;
  /** A connection is ended after this long, less up to a tenth (connection-age.ts); 0: never. */
  maxConnectionAgeMs: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxRequestBytes: 6 * 1024 * 1024,
  maxInflightRequestBytes: 32 * 1024 * 1024,
  maxConcurrentStreams: 100,
  maxContainers: 500,
  maxPatchBytes: 1024 * 1024,
  maxConnections: 512,
  maxConnectionsPerSource: 128,
  // kube-apiserver keeps a connection it dialled for a review another connection took first idle in
  // its pool, and sends a later review on it: closing it before kube-apiserver would drop it (90 s)
  // races that send. A silent connection is held as an idle one; the caps bound how many.
  firstRequestTimeoutMs: 120_000,
  headersTimeoutMs: 10_000,
  // kube-apiserver gives a webhook at most 30 s; a body still arriving after 15 s is an attack.
  requestTimeoutMs: 15_000,
  handshakeTimeoutMs: 10_000,
  // kube-apiserver's webhook client (Go's http.Transport via client-go) drops an idle connection
  // after 90 s; held longer here, the client always closes first. A server closing an idle
  // HTTP/1.1 connection races the client's next POST on it, which kube-apiserver does not retry.
  keepAliveTimeoutMs: 120_000,
  responseTimeoutMs: 10_000,
  // Long enough that redialling costs nothing measurable (a handshake every few minutes), short
  // enough that a replica started by a scale-up or a rolling update gets its share within minutes.
  maxConnectionAgeMs: 300_000,
};
