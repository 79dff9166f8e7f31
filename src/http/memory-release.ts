// Memory handed back once a burst is over. V8 keeps the pages a garbage collection frees in a
// pool for reuse, resident, and returns them only in a memory-reducing collection; its memory
// reducer, which would run one once the process idles, never starts in Node (it judges the
// allocation rate high however idle the process is). So after a burst of reviews or the first
// list of a large cluster, the RSS stayed at its peak: 29 MiB above idle after a load of reviews
// (issue 30, item 3). Here, once the server has been idle for a while after work, one
// memory-reducing collection ("last resort": full collections until nothing more is freed, then
// the pool released) returns those pages. It runs as a task of the event loop, at most once per
// quiet period, and costs some 10 to 50 ms of the main thread with a heap of tens of MiB.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Gc = (options: { type: 'major'; execution: 'async'; flavor: 'last-resort' }) => void;

/**
 * V8's own collector entry point, without --expose-gc on the command line: the flag set now
 * exposes `gc` in contexts created afterwards (only this one; the main context keeps no `gc`).
 */
export function memoryReducingGc(): () => void {
  const exposed = typeof (globalThis as { gc?: unknown }).gc === 'function';
  if (!exposed) setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Gc;
  if (!exposed) setFlagsFromString('--no-expose-gc');
  return () => gc({ type: 'major', execution: 'async', flavor: 'last-resort' });
}

interface MemoryRelease {
  /** Work was done (a review answered, a list read): memory may be held that idling returns. */
  worked(): void;
  stop(): void;
}

/**
 * Calls `release` once no work has been seen for `quietMs` after some was: checked every
 * `quietMs / 2` by a timer that keeps no process alive, so each `worked()` costs one assignment.
 */
export function releaseWhenQuiet(quietMs: number, release: () => void): MemoryRelease {
  let work = 0;
  let seen = 0;
  let quietSince = Date.now();
  const timer = setInterval(
    () => {
      const now = Date.now();
      if (work !== seen) {
        seen = work;
        quietSince = now;
        return;
      }
      if (quietSince > 0 && now - quietSince >= quietMs) {
        quietSince = 0; // released: nothing more until new work
        release();
      }
    },
    Math.max(1, quietMs / 2),
  );
  timer.unref();
  return {
    worked: () => {
      work++;
    },
    stop: () => clearInterval(timer),
  };
}
