/**
 * When a failed delivery is tried again: exponential backoff with jitter, up to a bound on
 * attempts, after which the delivery is marked failed (and can still be redelivered by hand).
 * Pure: the attempt number and a random number in, a delay out.
 */
export interface RetryPolicy {
  /** The delay after the first failure; each further failure doubles it. */
  baseDelayMs: number;
  /** No delay exceeds this. */
  maxDelayMs: number;
  /** Attempts in all, the first one included. */
  maxAttempts: number;
}

export type AfterFailure = { kind: "retry"; delayMs: number } | { kind: "give_up" };

/**
 * After failed attempt number `attempt` (1-based): the delay is base × 2^(attempt−1), capped, then
 * drawn uniformly from its upper half ("equal jitter"), so that the deliveries a receiver's outage
 * failed together do not all come back at the same instant, yet none comes back much sooner than
 * planned.
 */
export function afterFailure(policy: RetryPolicy, attempt: number, random: number): AfterFailure {
  if (attempt >= policy.maxAttempts) return { kind: "give_up" };
  const planned = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt - 1, 30));
  return { kind: "retry", delayMs: Math.round(planned / 2 + (planned / 2) * random) };
}

/** A response counts as delivered only when it is 2xx; redirects are not followed. */
export function delivered(statusCode: number): boolean {
  return statusCode >= 200 && statusCode < 300;
}
