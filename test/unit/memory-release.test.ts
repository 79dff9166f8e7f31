// src/http/memory-release.ts: the pooled memory a burst left goes back once the server idles, once per
// quiet period, never while work keeps coming; and V8's collector is reached without exposing
// `gc` to the rest of the process.
import { describe, test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { memoryReducingGc, releaseWhenQuiet } from '../../src/http/memory-release.ts';

describe('releaseWhenQuiet', () => {
  test('releases once after a quiet period that follows work, and not while work keeps coming', () => {
    mock.timers.enable({ apis: ['setInterval', 'Date'] });
    try {
      let released = 0;
      const quiet = releaseWhenQuiet(10_000, () => released++);
      // Work every second for a minute: never quiet for 10 s.
      for (let s = 0; s < 60; s++) {
        quiet.worked();
        mock.timers.tick(1000);
      }
      assert.equal(released, 0, 'no release while reviews keep coming');
      mock.timers.tick(20_000);
      assert.equal(released, 1, 'one release once quiet');
      mock.timers.tick(120_000);
      assert.equal(released, 1, 'none again without new work');
      quiet.worked();
      mock.timers.tick(9_000);
      assert.equal(released, 1, 'not before the quiet period is over');
      mock.timers.tick(11_000);
      assert.equal(released, 2, 'again after the next burst');
      quiet.stop();
      quiet.worked();
      mock.timers.tick(60_000);
      assert.equal(released, 2, 'stopped: no more');
    } finally {
      mock.timers.reset();
    }
  });
});

describe('memoryReducingGc', () => {
  test("runs V8's memory-reducing collection and leaves no gc in the main context", async () => {
    const before = typeof (globalThis as { gc?: unknown }).gc;
    const release = memoryReducingGc();
    assert.equal(typeof release, 'function');
    assert.equal(typeof (globalThis as { gc?: unknown }).gc, before, 'the main context keeps what it had');
    // The collection is asynchronous (a task of the event loop): it must neither throw nor block.
    release();
    await new Promise((resolve) => setImmediate(resolve));
  });
});
