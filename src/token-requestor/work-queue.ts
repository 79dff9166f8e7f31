interface Task {
  priority: number;
  seq: number;
  run: () => Promise<void>;
}

/**
 * At most `concurrency` tasks at once, the one with the lowest priority first. A new leader lists
 * 20,000 Secrets at once: without a bound each would read its ServiceAccount and request a token
 * together (20,000 requests in flight, as many connections); ordered by when each token is due,
 * the ones closest to expiry are renewed first.
 */
export class WorkQueue {
  readonly #concurrency: number;
  /** A binary min-heap on priority; `seq` keeps equal priorities in arrival order. */
  readonly #heap: Task[] = [];
  #running = 0;
  #seq = 0;
  #stopped = false;

  constructor(concurrency: number) {
    this.#concurrency = concurrency;
  }

  /** Tasks waiting (not yet started). */
  get waiting(): number {
    return this.#heap.length;
  }

  get running(): number {
    return this.#running;
  }

  add(priority: number, run: () => Promise<void>): void {
    if (this.#stopped) return;
    this.#push({ priority, seq: this.#seq++, run });
    this.#next();
  }

  /** Drops every waiting task; running ones finish. */
  stop(): void {
    this.#stopped = true;
    this.#heap.length = 0;
  }

  #next(): void {
    while (this.#running < this.#concurrency) {
      const task = this.#pop();
      if (task === undefined) return;
      this.#running++;
      void task
        .run()
        .catch(() => {})
        .finally(() => {
          this.#running--;
          this.#next();
        });
    }
  }

  #less(a: number, b: number): boolean {
    const x = this.#heap[a];
    const y = this.#heap[b];
    return x.priority < y.priority || (x.priority === y.priority && x.seq < y.seq);
  }

  #swap(a: number, b: number): void {
    [this.#heap[a], this.#heap[b]] = [this.#heap[b], this.#heap[a]];
  }

  #push(item: Task): void {
    this.#heap.push(item);
    let i = this.#heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
  }

  /** The first task, undefined when none waits; the last one takes its place and sinks. */
  #pop(): Task | undefined {
    const top = this.#heap[0];
    const last = this.#heap.pop();
    // Empty, or the only task: it is the first one.
    if (last === undefined || !this.#heap.length) return last;
    this.#heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.#heap.length && this.#less(l, m)) m = l;
      if (r < this.#heap.length && this.#less(r, m)) m = r;
      if (m === i) break;
      this.#swap(i, m);
      i = m;
    }
    return top;
  }
}
