import type { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { batchPerKey } from "../batching.ts";
import { ApiError } from "../http/problem.ts";

/**
 * Per-key request budgets: `rateLimit` requests per minute (DESIGN.md §3), counted in Redis when
 * it is configured so that every instance shares one exact count (one atomic Lua script, batched
 * per key), in memory otherwise (rate-limiter-flexible). If Redis stops answering, counting
 * continues in this process's memory until it comes back, and readiness reports the
 * degradation; money checks never depend on this.
 */
export interface RateLimiter {
  readonly shared: boolean;
  /** Counts one request; throws a 429 ApiError when the key is over its budget. */
  consume(keyId: number, perMinute: number): Promise<void>;
  /** True when the shared store answered its last probe (always true when in memory). */
  healthy(): Promise<boolean>;
}

export const WINDOW_SEC = 60;

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
      } catch (res) {
        if (!(res instanceof RateLimiterRes)) throw res;
        throw tooMany(perMinute, res.msBeforeNext);
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
  // One result per request: null when it may pass, or the 429 to answer.
  const count = batchPerKey(async (keyId: number, budgets: number[]): Promise<(ApiError | null)[]> => {
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
      const counted = await Promise.allSettled(
        budgets.map((perMinute) => insurance.consume(keyId, perMinute)),
      );
      return counted.map((c) => (c.status === "fulfilled" ? null : (c.reason as ApiError)));
    }
  });

  return {
    shared: true,
    async healthy() {
      try {
        return (await redis.ping()) === "PONG";
      } catch {
        return false;
      }
    },
    async consume(keyId, perMinute) {
      const refusal = await count(keyId, perMinute);
      if (refusal) throw refusal;
    },
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

function tooMany(perMinute: number, msBeforeNext: number): ApiError {
  const resetSec = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new ApiError(429, "rate_limited", `this API key allows ${perMinute} requests per minute`, {
    "retry-after": String(resetSec),
    "ratelimit-policy": `${perMinute};w=${WINDOW_SEC}`,
    ratelimit: `limit=${perMinute}, remaining=0, reset=${resetSec}`,
  });
}
