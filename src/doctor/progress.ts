// What doctor waits for, shown while it waits (an HTTP read can take up to its 10 s timeout): one
// line on a terminal, rewritten in place with the time so far, and gone when doctor is done.
// Nothing at all when the stream is not a terminal, so that logs and pipes stay clean.

interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(text: string): unknown;
}

export interface Progress {
  /** Now waiting for `what`. */
  update(what: string): void;
  /** Clears the line. */
  done(): void;
}

const CLEAR = '\r\x1b[2K';

export function progressLine(stream: ProgressStream, everyMs = 200, now = () => performance.now()): Progress {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  let what: string | undefined;
  let started = 0;
  const render = () => {
    if (what === undefined) return;
    // The time stays in view: a long URL is cut instead.
    const head = 'doctor: waiting for ';
    const tail = ` (${((now() - started) / 1000).toFixed(1)} s)`;
    const room = Math.max(1, (stream.columns ?? 80) - 1 - head.length - tail.length);
    stream.write(CLEAR + head + (what.length > room ? `${what.slice(0, room - 1)}…` : what) + tail);
  };
  const timer = setInterval(render, everyMs);
  timer.unref();
  return {
    update(next) {
      what = next;
      started = now();
      render();
    },
    done() {
      clearInterval(timer);
      if (what !== undefined) stream.write(CLEAR);
      what = undefined;
    },
  };
}
