// The bytes of reviews in progress, counted from a request's headers until its answer is written.
// A review holds its request body (announced by Content-Length, taken before the body is read), a
// fixed share for what every review costs besides its bytes (the stream's and the request's
// objects), and then its encoded answer (app.ts counts it twice: the buffer and its TLS records):
// a small review can have a large answer (issue #28: a 50 KB Pod of 400 containers gets a 943 KB
// patch), and an answer waiting for a slow reader is memory like any other. Everything comes back when both the answer is written (or the stream is
// gone) and the handler has returned: a stream the client resets does not free its share while
// the work it started still runs.

/** What a review costs besides its bytes: the HTTP/2 stream or HTTP/1.1 request, fastify's objects, buffers. */
export const REVIEW_OVERHEAD_BYTES = 16 * 1024;

export class ReviewBudget {
  #held = 0;
  readonly limit: number;
  readonly #changed: (held: number) => void;
  /** `changed` is told the bytes held after each change (a gauge). */
  constructor(limit: number, changed: (held: number) => void = () => {}) {
    this.limit = limit;
    this.#changed = changed;
  }

  get held(): number {
    return this.#held;
  }

  /** A review's hold of `bytes` (its request and overhead), or undefined when they do not fit; `onRelease` when all is returned. */
  open(bytes: number, onRelease: () => void = () => {}): ReviewHold | undefined {
    return this.take(bytes) ? new ReviewHold(this, bytes, onRelease) : undefined;
  }

  /** Takes `bytes` if they fit under the limit (for ReviewHold). */
  take(bytes: number): boolean {
    if (this.#held + bytes > this.limit) return false;
    this.#held += bytes;
    this.#changed(this.#held);
    return true;
  }

  /** Returns bytes taken (for ReviewHold). */
  give(bytes: number): void {
    this.#held -= bytes;
    this.#changed(this.#held);
  }
}

/** One review's bytes, returned once its answer is done with and its handler has returned. */
export class ReviewHold {
  #bytes: number;
  /** The answer's end (always), and the handler while it runs. */
  #pending = 1;
  readonly #budget: ReviewBudget;
  readonly #onRelease: () => void;
  constructor(budget: ReviewBudget, bytes: number, onRelease: () => void) {
    this.#budget = budget;
    this.#bytes = bytes;
    this.#onRelease = onRelease;
  }

  /** Everything was returned: the answer's stream is gone and no handler runs. */
  get released(): boolean {
    return this.#pending === 0;
  }

  /** Adds the answer's bytes; false (nothing taken) when the budget cannot hold them. */
  grow(bytes: number): boolean {
    if (this.#pending === 0 || !this.#budget.take(bytes)) return false;
    this.#bytes += bytes;
    return true;
  }

  /** The handler starts: the bytes stay held until it returns, whatever the stream does. Undefined once released. */
  working(): (() => void) | undefined {
    if (this.#pending === 0) return undefined;
    this.#pending++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#settle();
    };
  }

  #ended = false;
  /** The answer was written, or the request or stream is gone. Idempotent. */
  ended(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#settle();
  }

  #settle(): void {
    if (--this.#pending > 0) return;
    this.#budget.give(this.#bytes);
    this.#bytes = 0;
    this.#onRelease();
  }
}
