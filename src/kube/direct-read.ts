// Direct API reads on a cache miss, shared by the caches: one read in flight per key (a burst of
// Pods for a new ServiceAccount or namespace makes one request), each with a short timeout so an
// admission never waits on a slow API server for long.

export class TimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer in ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

export class DirectReads<T> {
  readonly #inflight = new Map<string, Promise<T>>();
  readonly #timeoutMs: number;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** The read in flight for `key`, or a new one; rejects with TimeoutError after the timeout. */
  read(key: string, request: () => Promise<T>): Promise<T> {
    const pending = this.#inflight.get(key);
    if (pending) return pending;
    const read = this.#withTimeout(request()).finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, read);
    return read;
  }

  /** Whether a read for `key` is in flight (a caller joining it spends no rate-limit token). */
  has(key: string): boolean {
    return this.#inflight.has(key);
  }

  async #withTimeout(request: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(this.#timeoutMs)), this.#timeoutMs);
    });
    try {
      return await Promise.race([request, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
