// The Kubernetes API as `serve` uses it: JSON over HTTPS on keep-alive connections (node:https),
// list pages, watches (one JSON event per line), get, replace and patch. @kubernetes/client-node
// loads its whole generated API, tens of MiB of heap whatever is used; the serving path needs
// these few calls. client-node stays where it earns its keep: kubeconfig plugins, the CLI, doctor,
// the token requestor and the tests (connect.ts hands its credentials over).

import type { Readable } from 'node:stream';
import { Agent, request, type RequestOptions } from 'node:https';
import { Http2Pool } from './http2-pool.ts';

/** How to reach and authenticate to the API server. */
export interface KubeCredentials {
  /** https://host:port, maybe with a path prefix. */
  server: string;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** A bearer token, asked for on each request (a projected token is rotated by the kubelet). */
  token?: () => string | undefined;
  insecureSkipTlsVerify?: boolean;
  tlsServerName?: string;
  /** Per request, from elsewhere (client-node for kubeconfig plugins): headers and TLS material. */
  authenticate?: () => Promise<{ headers?: Record<string, string>; ca?: unknown; cert?: unknown; key?: unknown }>;
}

/** An answer other than 2xx: the status and the API server's Status message, never the body itself. */
export class KubeApiError extends Error {
  /** The HTTP status (what statusOf() reads). */
  readonly code: number;
  readonly reason: string | undefined;

  constructor(code: number, reason: string | undefined, message: string | undefined) {
    super(`HTTP ${code}${reason ? ` ${reason}` : ''}: ${message ?? 'the response body is not logged'}`);
    this.name = 'KubeApiError';
    this.code = code;
    this.reason = reason;
  }
}

/** An answer longer than the caller's maxBytes: its reading stopped there (the rest is not read). */
export class KubeResponseTooLarge extends Error {
  constructor(what: string, maxBytes: number) {
    super(`${what}: the answer is longer than ${maxBytes} bytes`);
    this.name = 'KubeResponseTooLarge';
  }
}

/** A request that got no answer in time; a watch's normal end is not one. */
class KubeTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: no answer from the API server in ${ms} ms`);
    this.name = 'KubeTimeoutError';
  }
}

type Query = Record<string, string | number | boolean | undefined>;

interface CallOptions {
  query?: Query;
  body?: unknown;
  /** application/json unless said (application/json-patch+json, merge-patch+json). */
  contentType?: string;
  timeoutMs?: number;
  /** Reject with KubeResponseTooLarge, and stop reading, once the answer's body is longer. */
  maxBytes?: number;
}

type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface OpenWatch {
  abort(): void;
  /** Settles when the stream ends: undefined for a normal end (the API server's timeout), else the error (AbortError after abort()). */
  ended: Promise<Error | undefined>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

export interface KubeApiOptions {
  /**
   * Every call as a stream of a few HTTP/2 connections (http2-pool.ts) instead of one HTTP/1.1
   * connection per call in flight: for a client that holds many watches at once.
   */
  http2?: boolean;
}

/** An answer: its status and its body (an HTTP/1.1 response or an HTTP/2 stream). */
interface Answer {
  statusCode: number | undefined;
  body: Readable;
  /** The body was read to its end. */
  complete(): boolean;
}

/**
 * A path from segments, each encoded: a name from a request (a Pod's serviceAccountName) cannot
 * reach another resource. "." and ".." would be resolved away by URL parsing, and no object can
 * be named so (the API server refuses such names): they are answered as not found, unasked.
 */
export function apiPath(...segments: string[]): string {
  for (const s of segments)
    if (s === '' || s === '.' || s === '..') throw new KubeApiError(404, 'NotFound', 'no object can have this name');
  return `/${segments.map(encodeURIComponent).join('/')}`;
}

export class KubeApi {
  readonly #c: KubeCredentials;
  readonly #base: URL;
  readonly #agent: Agent;
  readonly #http2: Http2Pool | undefined;
  #streamsLists: Promise<boolean> | undefined;

  constructor(credentials: KubeCredentials, options: KubeApiOptions = {}) {
    this.#c = credentials;
    this.#base = new URL(credentials.server.endsWith('/') ? credentials.server : `${credentials.server}/`);
    this.#agent = new Agent({ keepAlive: true, maxSockets: 16, maxFreeSockets: 4 });
    if (options.http2) this.#http2 = new Http2Pool(this.#base.origin, () => this.#tls());
  }

  /** Connections of the HTTP/2 pool (undefined over HTTP/1.1). */
  get http2Connections(): number | undefined {
    return this.#http2?.connections;
  }

  get server(): string {
    return this.#c.server;
  }

  /** One call; resolves with the parsed JSON answer, rejects with KubeApiError, KubeTimeoutError or the network's error. */
  async request<T = unknown>(method: string, path: string, options: CallOptions = {}): Promise<T> {
    const res = await this.#send(method, path, options);
    const text = await readBody(res.body, options.maxBytes, `${method} ${path}`);
    if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300)
      return (text ? JSON.parse(text) : undefined) as T;
    throw apiError(res.statusCode ?? 0, text);
  }

  /**
   * Opens a watch (watch=true); resolves once the API server answered 200, rejects with its error
   * otherwise. Each event is parsed as its line arrives and handed to `onEvent`.
   */
  async watch(
    path: string,
    query: Query,
    onEvent: (type: WatchEventType, object: unknown) => void,
  ): Promise<OpenWatch> {
    // No timeout on a watch: the API server ends it (timeoutSeconds), the caller's watchdog judges silence.
    const res = await this.#send('GET', path, { query: { ...query, watch: true }, timeoutMs: 0 });
    if (res.statusCode !== 200) throw apiError(res.statusCode ?? 0, await readBody(res.body));
    const body = res.body;
    let settle: (err: Error | undefined) => void = () => {};
    const ended = new Promise<Error | undefined>((resolve) => {
      settle = (err) => {
        settle = () => {};
        resolve(err);
      };
    });
    let buffered = '';
    body.setEncoding('utf8');
    body.on('data', (chunk: string) => {
      buffered += chunk;
      let nl = buffered.indexOf('\n');
      while (nl !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf('\n');
        if (!line.trim()) continue;
        let event: { type: WatchEventType; object: unknown };
        try {
          event = JSON.parse(line);
        } catch {
          body.destroy(new Error('the watch sent a line that is not JSON'));
          return;
        }
        onEvent(event.type, event.object);
      }
    });
    body.on('end', () => settle(undefined));
    body.on('error', (err) => settle(err));
    body.on('close', () => settle(res.complete() ? undefined : new Error('the watch connection closed')));
    return {
      abort: () => {
        const err = new Error('the watch was stopped');
        err.name = 'AbortError';
        settle(err);
        body.destroy();
      },
      ended,
    };
  }

  /**
   * Whether the API server may stream lists (sendInitialEvents, Kubernetes 1.27+; on by default
   * since 1.32, refused with 4xx where switched off). An older one ignores the parameter and
   * never sends the end of the list, so its version is asked first (once).
   */
  streamsLists(): Promise<boolean> {
    this.#streamsLists ??= this.request<{ major?: string; minor?: string }>('GET', '/version').then(
      (v) => Number(v.major) > 1 || (Number(v.major) === 1 && Number.parseInt(v.minor ?? '', 10) >= 27),
      () => false,
    );
    return this.#streamsLists;
  }

  /** Closes idle keep-alive connections (the process is stopping). */
  close(): void {
    this.#agent.destroy();
    this.#http2?.close();
  }

  /** TLS material of a new connection: the credentials', or what `authenticate` gives. */
  async #tls(given?: Awaited<ReturnType<NonNullable<KubeCredentials['authenticate']>>>) {
    const extra = given ?? (this.#c.authenticate ? await this.#c.authenticate() : undefined);
    return {
      ca: (extra?.ca as string) ?? this.#c.ca,
      cert: (extra?.cert as string) ?? this.#c.cert,
      key: (extra?.key as string) ?? this.#c.key,
      rejectUnauthorized: !this.#c.insecureSkipTlsVerify,
      servername: this.#c.tlsServerName,
    };
  }

  async #send(method: string, path: string, options: CallOptions): Promise<Answer> {
    const url = new URL(path.replace(/^\//, ''), this.#base);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const extra = this.#c.authenticate ? await this.#c.authenticate() : undefined;
    const token = this.#c.token?.();
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string | number> = {
      accept: 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...extra?.headers,
      ...(payload !== undefined
        ? { 'content-type': options.contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) }
        : {}),
    };
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (this.#http2) {
      const what = `${method} ${url.pathname}`;
      const answer = await this.#http2
        .request({ ...headers, ':method': method, ':path': `${url.pathname}${url.search}` }, payload, timeoutMs)
        .catch((err: Error) => {
          throw /NGHTTP2_CANCEL|code 8\)/.test(err.message) ? new KubeTimeoutError(what, timeoutMs) : err;
        });
      return { statusCode: answer.statusCode, body: answer.stream, complete: answer.complete };
    }
    const req: RequestOptions = { method, agent: this.#agent, ...(await this.#tls(extra)), headers };
    return new Promise((resolve, reject) => {
      const r = request(url, req, (res) =>
        resolve({ statusCode: res.statusCode, body: res, complete: () => res.complete }),
      );
      r.on('error', reject);
      if (timeoutMs > 0)
        r.setTimeout(timeoutMs, () => r.destroy(new KubeTimeoutError(`${method} ${url.pathname}`, timeoutMs)));
      r.end(payload);
    });
  }
}

function readBody(res: Readable, maxBytes = Number.POSITIVE_INFINITY, what = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        chunks.length = 0;
        reject(new KubeResponseTooLarge(what, maxBytes));
        res.destroy();
        return;
      }
      chunks.push(c);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });
}

/** The error for a non-2xx answer: the Status's reason and message when the body is one. */
function apiError(status: number, text: string): KubeApiError {
  let reason: string | undefined;
  let message: string | undefined;
  try {
    const s = JSON.parse(text) as { kind?: unknown; reason?: unknown; message?: unknown };
    if (s?.kind === 'Status') {
      if (typeof s.reason === 'string') reason = s.reason;
      if (typeof s.message === 'string') message = s.message;
    }
  } catch {
    // not JSON: a proxy's page, say; not repeated
  }
  return new KubeApiError(status, reason, message);
}
