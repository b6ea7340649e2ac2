import { EventEmitter } from "node:events";

/**
 * The deadline of one outgoing webhook request (an event delivery or an approval call): a signal
 * that aborts once `ms` have passed, or as soon as `also` aborts (the worker stopping).
 *
 * Why not `AbortSignal.any([AbortSignal.timeout(ms), other])`: on Node 20 the combined signal
 * holds its sources only weakly, and nothing else holds the timeout signal, so a garbage
 * collection while the request is pending takes the timer with it. The request then waits for
 * undici's own header timeout (300 s), and a receiver that never answers holds a worker slot for
 * five minutes instead of WEBHOOK_TIMEOUT_MS. Here the timer is ours: the pending setTimeout
 * keeps the signal alive whatever the collector does, and `clear()` (in a `finally`) frees it.
 *
 * Why not an AbortController: undici takes an EventEmitter as a request's signal too (it listens
 * for `abort` and reads `reason`), and an AbortSignal's listener, added and removed through
 * EventTarget, cost about 10 µs of CPU per request, a third of the request itself (measured with
 * undici 7.30 on Node 20, 2026-11-30: 32 against 22 µs a POST to a local receiver). Every event
 * delivery and every approval call pays it. For the same reason a deadline does not listen on
 * `also` itself: one listener per `also` aborts every deadline still open under it.
 */
export interface Deadline {
  signal: DeadlineSignal;
  /** Stops the timer and lets go of `also`; call it once the exchange is over, whatever its end. */
  clear(): void;
}

/** A signal as undici reads one from an EventEmitter: `aborted`, `reason`, and an `abort` event. */
export class DeadlineSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

/** The deadlines open under each `also` signal, which its one listener aborts together. */
const openUnder = new WeakMap<AbortSignal, Set<DeadlineSignal>>();

function under(also: AbortSignal): Set<DeadlineSignal> {
  let open = openUnder.get(also);
  if (!open) {
    const set = new Set<DeadlineSignal>();
    open = set;
    openUnder.set(also, set);
    also.addEventListener(
      "abort",
      () => {
        for (const signal of set) signal.abort(also.reason);
        set.clear();
      },
      { once: true },
    );
  }
  return open;
}

export function deadline(ms: number, also?: AbortSignal): Deadline {
  const signal = new DeadlineSignal();
  // A TimeoutError, as AbortSignal.timeout gives, so that egress.ts's sendFailure reads it as one.
  const timer = setTimeout(
    () => signal.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError")),
    ms,
  );
  const open = also && !also.aborted ? under(also) : null;
  if (also?.aborted) signal.abort(also.reason);
  else open?.add(signal);
  return {
    signal,
    clear() {
      clearTimeout(timer);
      open?.delete(signal);
    },
  };
}
