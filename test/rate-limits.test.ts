import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Redis } from "ioredis";
import { redisRateLimiter } from "../src/rate-limits/limiter.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { startRedisServer } from "./support/redis-server.ts";

/**
 * With REDIS_URL (CI's second pass) two instances share one Redis and must count one budget
 * exactly. Without it each instance counts in memory, and the same test checks one instance.
 */
const shared = Boolean(process.env.REDIS_URL);
let store: TestDb;
let a: TestApp;
let b: TestApp;

before(async () => {
  store = await openTestDb();
  const prefix = `rl-test:${randomBytes(6).toString("hex")}`;
  a = await startTestApp({ db: store, rateLimitPrefix: prefix });
  b = shared ? await startTestApp({ db: store, rateLimitPrefix: prefix }) : a;
});
after(async () => {
  if (b !== a) await b.close();
  await a.close();
  await store.drop();
});

describe(`rate limits (${shared ? "shared through Redis across two instances" : "in memory, one instance"})`, () => {
  it("allows exactly N requests per minute per key, then 429 with Retry-After and RateLimit headers", async () => {
    const N = 7;
    const p = await seedProject(a, { rateLimit: N, scopes: ["read"] });
    const statuses: number[] = [];
    for (let i = 0; i < N; i++) {
      const app = i % 2 === 0 ? a : b;
      statuses.push(
        (await app.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey })).statusCode,
      );
    }
    assert.deepEqual(statuses, Array(N).fill(200));
    for (const app of [a, b]) {
      const res = await app.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey });
      assert.equal(res.statusCode, 429);
      assert.equal(res.json().code, "rate_limited");
      assert.ok(Number(res.headers["retry-after"]) >= 1 && Number(res.headers["retry-after"]) <= 60);
      assert.equal(res.headers["ratelimit-policy"], `${N};w=60`);
    }
  });

  it("counts concurrent requests exactly: N of 3N concurrent requests pass", async () => {
    const N = 20;
    const p = await seedProject(a, { rateLimit: N, scopes: ["read"] });
    const results = await Promise.all(
      Array.from({ length: 3 * N }, (_, i) =>
        (i % 2 === 0 ? a : b).request({
          method: "GET",
          url: `/projects/${p.projectId}/balance`,
          token: p.apiKey,
        }),
      ),
    );
    assert.equal(results.filter((r) => r.statusCode === 200).length, N);
    assert.equal(results.filter((r) => r.statusCode === 429).length, 2 * N);
  });

  it("each key has its own budget", async () => {
    const p = await seedProject(a, { rateLimit: 1, scopes: ["read"] });
    const q = await seedProject(a, { rateLimit: 1, scopes: ["read"] });
    assert.equal(
      (await a.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey })).statusCode,
      200,
    );
    assert.equal(
      (await a.request({ method: "GET", url: `/projects/${q.projectId}`, token: q.apiKey })).statusCode,
      200,
    );
    assert.equal(
      (await a.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey })).statusCode,
      429,
    );
  });
});

describe("Redis unreachable", () => {
  it("falls back to in-memory limits, keeps serving, and says so in /health/ready", async () => {
    const degraded = await startTestApp({ env: { REDIS_URL: "redis://127.0.0.1:1" } });
    try {
      const p = await seedProject(degraded, { rateLimit: 2, scopes: ["read"] });
      const codes = [];
      for (let i = 0; i < 3; i++) {
        codes.push(
          (await degraded.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey }))
            .statusCode,
        );
      }
      assert.deepEqual(codes, [200, 200, 429]);
      const ready = await degraded.request({ method: "GET", url: "/health/ready" });
      assert.equal(ready.statusCode, 200);
      assert.equal(ready.json().status, "degraded");
      assert.equal(ready.json().checks.redis.status, "degraded");
    } finally {
      await degraded.close();
    }
  });
});

describe("the counting scripts on a Redis of the test's own", () => {
  it("go as EVALSHA, and count on exactly when Redis has forgotten them (SCRIPT FLUSH, as a restart leaves it)", async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      const limiter = redisRateLimiter(redis, `rl-scripts:${randomBytes(4).toString("hex")}`);
      const calls = async (command: string) => {
        const line = (await redis.info("commandstats"))
          .split("\r\n")
          .find((l) => l.startsWith(`cmdstat_${command}:`));
        return Number(/calls=(\d+)/.exec(line ?? "")?.[1] ?? 0);
      };
      assert.equal(await limiter.consume("k", 4), null);
      assert.equal(await limiter.consume("k", 4), null);
      await redis.script("FLUSH");
      // Two more pass, through the script sent again after NOSCRIPT; the fifth of the window is over.
      assert.equal(await limiter.consume("k", 4), null);
      assert.equal(await limiter.consume("k", 4), null);
      assert.equal((await limiter.consume("k", 4))?.perMinute, 4);
      // A refused request counts too (five in the window): two refunds leave three.
      await redis.script("FLUSH");
      await limiter.refund("k", 4);
      await limiter.refund("k", 4);
      assert.equal(await limiter.consume("k", 4), null, "the refunds gave one back");
      assert.ok(await limiter.consume("k", 4));
      // A script's text went to Redis only when Redis did not have it: the count script on its first
      // call and after each flush, the refund script after the second flush.
      assert.equal(await calls("eval"), 4);
      assert.ok((await calls("evalsha")) >= 6);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
