import type { RateLimiter, RateLimitRefusal } from "./limiter.ts";

/**
 * A budget of failed authentications per client address and minute. Checking an API key the
 * service does not already know costs a database read, and anyone can make well-formed keys
 * (the checksum is public), so an address may only have so many credentials checked that turn
 * out to be bad. Counted like the per-key budgets: in Redis when configured (every instance
 * shares the count), in memory otherwise.
 *
 * The count is taken before the check, so that concurrent requests cannot all slip under the
 * budget while their lookups are in flight; a credential that turns out valid gives its count
 * back. A credential the service already knows to be valid never touches this budget.
 */
export interface AuthFailureLimiter {
  readonly perMinute: number;
  /** Counts one credential about to be checked; null when it may be, or the refusal. */
  reserve(clientAddress: string): Promise<RateLimitRefusal | null>;
  /** The credential was valid after all: its count is given back. */
  release(clientAddress: string): Promise<void>;
}

export function authFailureLimiter(limiter: RateLimiter, perMinute: number): AuthFailureLimiter {
  return {
    perMinute,
    reserve: (clientAddress) => limiter.consume(clientAddress, perMinute),
    release: (clientAddress) => limiter.refund(clientAddress, perMinute),
  };
}
