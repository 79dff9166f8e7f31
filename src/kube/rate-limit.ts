// A token bucket: at most `perSecond` takes per second on average, with a burst of the same size.
// The caches spend one token per direct read, so a flood of Pods for objects the watch has not
// delivered yet cannot turn into a flood of API requests.

export class TokenBucket {
  readonly perSecond: number;
  #tokens: number;
  #lastRefill: number;

  constructor(perSecond: number, now = Date.now()) {
    this.perSecond = perSecond;
    this.#tokens = perSecond;
    this.#lastRefill = now;
  }

  /** Spends a token; false when none is left. */
  take(now = Date.now()): boolean {
    this.#tokens = Math.min(this.perSecond, this.#tokens + ((now - this.#lastRefill) / 1000) * this.perSecond);
    this.#lastRefill = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
