import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { batchPerKey } from "../batching.ts";

/**
 * Per-key request budgets: `rateLimit` requests per minute (DESIGN.md §3), counted in Redis when
 * it is configured so that every instance shares one exact count (one atomic Lua script, batched
 * per key), in memory otherwise (rate-limiter-flexible). If Redis stops answering, counting
 * continues in this process's memory until it comes back, and readiness reports the
 * degradation; money checks never depend on this.
 */
export interface RateLimiter {
  readonly shared: boolean;
  /** Counts one request; null when it may pass, or the refusal when the key is over its budget. */
  consume(keyId: number, perMinute: number): Promise<RateLimitRefusal | null>;
  /** True when the shared store answered its last probe (always true when in memory). */
  healthy(): Promise<boolean>;
}

export const WINDOW_SEC = 60;

/** A request over its budget: the budget, and when the window resets. */
export interface RateLimitRefusal {
  perMinute: number;
  windowSec: number;
  retryAfterSec: number;
}

export function memoryRateLimiter(): RateLimiter {
  // One limiter per distinct budget: keys created with the same rateLimit share the instance.
  const byBudget = new Map<number, RateLimiterMemory>();
  return {
    shared: false,
    healthy: async () => true,
    async consume(keyId, perMinute) {
      let limiter = byBudget.get(perMinute);
      if (!limiter) {
        limiter = new RateLimiterMemory({ points: perMinute, duration: WINDOW_SEC });
        byBudget.set(perMinute, limiter);
      }
      try {
        await limiter.consume(String(keyId), 1);
        return null;
      } catch (res) {
        if (!(res instanceof RateLimiterRes)) throw res;
        return tooMany(perMinute, res.msBeforeNext);
      }
    },
  };
}

/**
 * Counts in Redis, exactly across instances, with one round trip per batch: requests of the same
 * key that arrive while that key's previous call is in flight are counted together by a single
 * INCRBY, and each learns its own position in the window from the total. A fixed window starts
 * at a key's first request and lasts WINDOW_SEC (the key's TTL in Redis). If Redis fails, the
 * requests are counted in this process's memory instead.
 */
export function redisRateLimiter(redis: Redis, prefix = "gss:rl"): RateLimiter {
  const insurance = memoryRateLimiter();
  // One result per request: null when it may pass, or the refusal.
  const count = batchPerKey(
    async (keyId: number, budgets: number[]): Promise<(RateLimitRefusal | null)[]> => {
      try {
        const [total, ttlMs] = (await redis.eval(
          COUNT_SCRIPT,
          1,
          `${prefix}:${keyId}`,
          budgets.length,
          WINDOW_SEC * 1000,
        )) as [number, number];
        const first = total - budgets.length + 1;
        return budgets.map((perMinute, i) =>
          first + i <= perMinute ? null : tooMany(perMinute, Math.max(ttlMs, 1)),
        );
      } catch {
        return Promise.all(budgets.map((perMinute) => insurance.consume(keyId, perMinute)));
      }
    },
  );

  return {
    shared: true,
    async healthy() {
      try {
        return (await redis.ping()) === "PONG";
      } catch {
        return false;
      }
    },
    consume: (keyId, perMinute) => count(keyId, perMinute),
  };
}

// INCRBY and the window's expiry in one atomic step; returns the new count and the window's
// remaining milliseconds.
const COUNT_SCRIPT = `
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if total == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]); ttl = tonumber(ARGV[2]) end
return {total, ttl}
`;

function tooMany(perMinute: number, msBeforeNext: number): RateLimitRefusal {
  return { perMinute, windowSec: WINDOW_SEC, retryAfterSec: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
}
