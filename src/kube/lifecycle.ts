// What runs beside the admission server: caches and watches, each started once, synced once its
// first list is in, and stopped on shutdown. server.ts starts and stops them as one list.

export interface Lifecycle {
  /** The first list is in (and stays so): admissions are judged as they should be. */
  readonly synced: boolean;
  /** Starts list-and-watch; resolves once the first list is in. */
  start(): Promise<void>;
  stop(): void;
}

/** A view over a list-watched source that starts, stops and syncs as the source does. */
export abstract class Watched implements Lifecycle {
  protected abstract readonly source: Lifecycle;

  get synced(): boolean {
    return this.source.synced;
  }

  start(): Promise<void> {
    return this.source.start();
  }

  stop(): void {
    this.source.stop();
  }
}

/** Several as one: started together, synced when all are, stopped in reverse order. */
export function together(parts: readonly Lifecycle[]): Lifecycle {
  return {
    get synced() {
      return parts.every((p) => p.synced);
    },
    start: async () => {
      await Promise.all(parts.map((p) => p.start()));
    },
    stop: () => {
      for (const p of [...parts].reverse()) p.stop();
    },
  };
}
