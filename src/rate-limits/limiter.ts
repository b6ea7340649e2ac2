import type { Redis } from "ioredis";
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from "rate-limiter-flexible";
import { ApiError } from "../http/problem.ts";

/**
 * Per-key request budgets: `rateLimit` requests per minute (DESIGN.md §3), counted in Redis when
 * it is configured so that every instance shares one exact count, in memory otherwise. If Redis
 * stops answering, counting continues in this process's memory (an insurance limiter) until it
 * comes back, and readiness reports the degradation; money checks never depend on this.
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
  return limiterWith(
    false,
    (points) => new RateLimiterMemory({ points, duration: WINDOW_SEC }),
    async () => true,
  );
}

export function redisRateLimiter(redis: Redis, prefix = "gss:rl"): RateLimiter {
  return limiterWith(
    true,
    (points) =>
      new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: `${prefix}:${points}`,
        points,
        duration: WINDOW_SEC,
        insuranceLimiter: new RateLimiterMemory({ points, duration: WINDOW_SEC }),
        rejectIfRedisNotReady: true,
      }),
    async () => {
      try {
        return (await redis.ping()) === "PONG";
      } catch {
        return false;
      }
    },
  );
}

function limiterWith(
  shared: boolean,
  make: (points: number) => RateLimiterAbstract,
  healthy: () => Promise<boolean>,
): RateLimiter {
  // One limiter per distinct budget: keys created with the same rateLimit share the instance.
  const byBudget = new Map<number, RateLimiterAbstract>();
  return {
    shared,
    healthy,
    async consume(keyId, perMinute) {
      let limiter = byBudget.get(perMinute);
      if (!limiter) {
        limiter = make(perMinute);
        byBudget.set(perMinute, limiter);
      }
      try {
        await limiter.consume(String(keyId), 1);
      } catch (res) {
        if (!(res instanceof RateLimiterRes)) throw res;
        throw tooMany(perMinute, res);
      }
    },
  };
}

function tooMany(perMinute: number, res: RateLimiterRes): ApiError {
  const resetSec = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  return new ApiError(429, "rate_limited", `this API key allows ${perMinute} requests per minute`, {
    "retry-after": String(resetSec),
    "ratelimit-policy": `${perMinute};w=${WINDOW_SEC}`,
    ratelimit: `limit=${perMinute}, remaining=0, reset=${resetSec}`,
  });
}
