// Waiting for something to become true: polls, never sleeps a fixed time in place of a check.
import { setTimeout as sleep } from 'node:timers/promises';

/** Thrown from an `until` check to stop waiting at once (the awaited thing can no longer happen). */
export class GiveUp extends Error {}

/** Polls `check` every 50 ms until it returns a value; throws with `what` after the deadline. */
export async function until<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}`);
    await sleep(50);
  }
}
