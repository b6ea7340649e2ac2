/** Polling with a generous deadline, for tests that wait on servers of their own; no timing claim. */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

/** Polls `check` until it returns a value (not undefined) or `timeoutMs` passes; a thrown error counts as not yet. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown = null;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    assert.ok(
      Date.now() < end,
      `${what} within ${timeoutMs / 1000} s${last ? ` (last error: ${last})` : ""}`,
    );
    await sleep(100);
  }
}

/** Waits until `holds` is true (a thrown error counts as not yet). */
export function until(what: string, holds: () => Promise<boolean>, timeoutMs = 60_000): Promise<true> {
  return waitFor(what, async () => ((await holds()) ? true : undefined), timeoutMs);
}
