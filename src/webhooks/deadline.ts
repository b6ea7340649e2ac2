/**
 * The deadline of one outgoing webhook request (an event delivery or an approval call): a signal
 * that aborts once `ms` have passed, or as soon as `also` aborts (the worker stopping).
 *
 * Why not `AbortSignal.any([AbortSignal.timeout(ms), other])`: on Node 20 the combined signal
 * holds its sources only weakly, and nothing else holds the timeout signal, so a garbage
 * collection while the request is pending takes the timer with it. The request then waits for
 * undici's own header timeout (300 s), and a receiver that never answers holds a worker slot for
 * five minutes instead of WEBHOOK_TIMEOUT_MS. Here the timer is ours: the pending setTimeout
 * keeps the controller alive whatever the collector does, and `clear()` (in a `finally`) frees it.
 */
export interface Deadline {
  signal: AbortSignal;
  /** Stops the timer and lets go of `also`; call it once the exchange is over, whatever its end. */
  clear(): void;
}

export function deadline(ms: number, also?: AbortSignal): Deadline {
  const controller = new AbortController();
  // A TimeoutError, as AbortSignal.timeout gives, so that egress.ts's sendFailure reads it as one.
  const timer = setTimeout(
    () => controller.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError")),
    ms,
  );
  const follow = () => controller.abort(also?.reason);
  if (also?.aborted) follow();
  else also?.addEventListener("abort", follow, { once: true });
  return {
    signal: controller.signal,
    clear() {
      clearTimeout(timer);
      also?.removeEventListener("abort", follow);
    },
  };
}
