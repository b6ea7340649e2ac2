import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, describe, it } from "node:test";
import { Redis } from "ioredis";
import { authFailureLimiter } from "./failed-auth.ts";
import { memoryRateLimiter, type RateLimiter, redisRateLimiter } from "./limiter.ts";

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : null;
after(() => redis?.disconnect());

const limiters: [string, () => RateLimiter][] = [["memory", memoryRateLimiter]];
if (redis) {
  const prefix = `fa-test:${randomBytes(6).toString("hex")}`;
  limiters.push(["redis", () => redisRateLimiter(redis, prefix)]);
}

for (const [name, make] of limiters) {
  describe(`failed authentications per address (${name})`, () => {
    it("admits N checks per address, refuses the next with Retry-After, and a refund gives one back", async () => {
      const limiter = authFailureLimiter(make(), 3);
      const address = `198.51.100.${randomBytes(1)[0]}-${randomBytes(3).toString("hex")}`;
      for (let i = 0; i < 3; i++) assert.equal(await limiter.reserve(address), null);
      const refusal = await limiter.reserve(address);
      assert.ok(refusal);
      assert.equal(refusal.perMinute, 3);
      assert.ok(refusal.retryAfterSec >= 1 && refusal.retryAfterSec <= 60);
      await limiter.release(address);
      await limiter.release(address);
      assert.equal(await limiter.reserve(address), null, "a valid credential gave its count back");
      assert.ok(await limiter.reserve(address));
      assert.equal(await limiter.reserve(`${address}-other`), null, "another address has its own budget");
    });

    it("counts concurrent reservations exactly", async () => {
      const limiter = authFailureLimiter(make(), 10);
      const address = `203.0.113.${randomBytes(3).toString("hex")}`;
      const outcomes = await Promise.all(Array.from({ length: 50 }, () => limiter.reserve(address)));
      assert.equal(outcomes.filter((o) => o === null).length, 10);
    });
  });
}
