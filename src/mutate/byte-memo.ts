// A memo within a byte budget: the values the mutation core works out again and again (the digest
// of a role ARN, the MAC of a Deployment's record) are remembered, but never more bytes of keys
// than the budget, and no key above its size: a Pod's author cannot make the process keep what
// the Pod carries.
import { MAX_MEMO_BYTES, MAX_MEMO_KEY } from '../bounds.ts';

export class ByteMemo {
  readonly #entries = new Map<string, string>();
  #bytes = 0;
  readonly maxBytes: number;
  readonly maxKey: number;

  constructor(maxBytes = MAX_MEMO_BYTES, maxKey = MAX_MEMO_KEY) {
    this.maxBytes = maxBytes;
    this.maxKey = maxKey;
  }

  get(key: string): string | undefined {
    return this.#entries.get(key);
  }

  /** Keeps `value` under `key` if the key fits; at the budget the memo starts over (the same few keys return). */
  set(key: string, value: string): void {
    if (key.length > this.maxKey || this.#entries.has(key)) return;
    // Two bytes a character: the most a string costs V8, whatever its characters.
    const cost = 2 * (key.length + value.length);
    if (this.#bytes + cost > this.maxBytes) this.clear();
    this.#entries.set(key, value);
    this.#bytes += cost;
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** Bytes of keys and values kept. */
  get bytes(): number {
    return this.#bytes;
  }
}
