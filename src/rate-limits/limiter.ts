import { RateLimiterMemory, RateLimiterRes } from "rate-limiter-flexible";
import { batchPerKey } from "../batching.ts";
import { type RedisClient, redisHealthy } from "../redis/client.ts";

/**
 * Per-key request budgets: `rateLimit` requests per minute (DESIGN.md §3), counted in Redis when
 * it is configured so that every instance shares one exact count (one atomic Lua script, batched
 * per key), in memory otherwise (rate-limiter-flexible). If Redis stops answering, counting
 * continues in this process's memory until it comes back, and readiness reports the
 * degradation; money checks never depend on this. The same counter serves the per-developer
 * budget (DEVELOPER_RATE_LIMIT) and the per-address budget of failed authentications
 * (failed-auth.ts), each in its own namespace.
 */
export interface RateLimiter {
  readonly shared: boolean;
  /**
   * Counts one request of `id` (a key id, a developer id, a client address: one namespace per
   * limiter); null when it may pass, or the refusal when `id` is over its budget.
   */
  consume(id: number | string, perMinute: number): Promise<RateLimitRefusal | null>;
  /** Takes back one counted request of `id` (one that turned out not to count); best effort. */
  refund(id: number | string, perMinute: number): Promise<void>;
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
  const limiterFor = (perMinute: number) => {
    let limiter = byBudget.get(perMinute);
    if (!limiter) {
      limiter = new RateLimiterMemory({ points: perMinute, duration: WINDOW_SEC });
      byBudget.set(perMinute, limiter);
    }
    return limiter;
  };
  return {
    shared: false,
    healthy: async () => true,
    async consume(id, perMinute) {
      try {
        await limiterFor(perMinute).consume(String(id), 1);
        return null;
      } catch (res) {
        if (!(res instanceof RateLimiterRes)) throw res;
        return tooMany(perMinute, res.msBeforeNext);
      }
    },
    async refund(id, perMinute) {
      await limiterFor(perMinute)
        .reward(String(id), 1)
        .catch(() => {});
    },
  };
}

/**
 * Counts in Redis, exactly across instances, with one round trip per batch: requests of the same
 * key that arrive while that key's previous call is in flight are counted together by a single
 * INCRBY, and each learns its own position in the window from the total. A fixed window starts
 * at a key's first request and lasts WINDOW_SEC (the key's TTL in Redis). If Redis fails (down,
 * timing out, or a cluster in the middle of a failover: CLUSTERDOWN, TRYAGAIN, MOVED past the
 * client's retries, READONLY from a demoted master), the requests are counted in this process's
 * memory instead; the next batch tries Redis again, so counting returns there once it answers.
 */
export function redisRateLimiter(redis: RedisClient, prefix = "gss:rl"): RateLimiter {
  const insurance = memoryRateLimiter();
  const key = (id: number | string) => counterKey(prefix, id);
  const scripts = rateScripts(redis);
  // One result per request: null when it may pass, or the refusal.
  const count = batchPerKey(
    async (id: number | string, budgets: number[]): Promise<(RateLimitRefusal | null)[]> => {
      try {
        const [total, ttlMs] = await scripts.gssRateCount(key(id), budgets.length, WINDOW_SEC * 1000);
        const first = total - budgets.length + 1;
        return budgets.map((perMinute, i) =>
          first + i <= perMinute ? null : tooMany(perMinute, Math.max(ttlMs, 1)),
        );
      } catch {
        return Promise.all(budgets.map((perMinute) => insurance.consume(id, perMinute)));
      }
    },
  );

  return {
    shared: true,
    healthy: () => redisHealthy(redis),
    consume: (id, perMinute) => count(id, perMinute),
    async refund(id, perMinute) {
      try {
        await scripts.gssRateRefund(key(id));
      } catch {
        await insurance.refund(id, perMinute);
      }
    },
  };
}

/** The two scripts below as commands of the client. */
interface RateScripts {
  gssRateCount(key: string, count: number, windowMs: number): Promise<[number, number]>;
  gssRateRefund(key: string): Promise<number>;
}

/**
 * The scripts as ioredis commands (defineCommand): each call sends EVALSHA with the script's
 * digest instead of EVAL with its text, and Redis looks the script up instead of hashing the text
 * again; a server that does not have it (restarted, or a replica promoted in a failover) answers
 * NOSCRIPT and ioredis sends the text once. Defining them again on the same client (a second
 * limiter) replaces them with the same.
 */
function rateScripts(redis: RedisClient): RateScripts {
  redis.defineCommand("gssRateCount", { numberOfKeys: 1, lua: COUNT_SCRIPT });
  redis.defineCommand("gssRateRefund", { numberOfKeys: 1, lua: REFUND_SCRIPT });
  return redis as unknown as RateScripts;
}

/**
 * The counter of `id`: `{gss:rl:42}`. Each script takes exactly this one key and no other. That is
 * what makes it run on a Redis Cluster at all: a script's keys must all hash to one slot (else
 * CROSSSLOT), and a cluster routes the script to the master of that slot, which runs it
 * atomically. The braces make the whole name a hash tag, so the slot is chosen by the id (ids
 * spread over the masters), and any key a later script adds for the same id, such as
 * `{gss:rl:42}:extra`, lands in the same slot as the counter. On one server the braces are
 * only part of the name.
 */
export function counterKey(prefix: string, id: number | string): string {
  return `{${prefix}:${id}}`;
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

// Takes one request back from a window that is still open (never below zero, never reopening one).
const REFUND_SCRIPT = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n > 0 then return redis.call('DECR', KEYS[1]) end
return 0
`;

function tooMany(perMinute: number, msBeforeNext: number): RateLimitRefusal {
  return { perMinute, windowSec: WINDOW_SEC, retryAfterSec: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
}
