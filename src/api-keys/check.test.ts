import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Db } from "../db/db.ts";
import { authFailureLimiter } from "../rate-limits/failed-auth.ts";
import { memoryRateLimiter } from "../rate-limits/limiter.ts";
import { checkApiKey } from "./check.ts";
import { apiKeyDigest, generateApiKey } from "./format.ts";
import { Lru } from "./lru.ts";
import { apiKeyResolver } from "./resolver.ts";

/** A database holding the given keys, counting the reads of api_keys. */
function fakeDb(keys: string[]) {
  const digests = new Map(keys.map((k, i) => [apiKeyDigest(k), i + 1]));
  const reads = { count: 0 };
  const db = {
    kind: "pglite",
    async query(sql: string, params: unknown[] = []) {
      if (!sql.includes("FROM api_keys WHERE digest")) return [];
      reads.count++;
      await new Promise((r) => setImmediate(r));
      const id = digests.get(String(params[0]));
      return id ? [{ id, project_id: `p${id}`, rate_limit: 10, scopes: ["sponsor"] }] : [];
    },
    transaction: async () => {
      throw new Error("unused");
    },
    close: async () => {},
  } as unknown as Db;
  return { db, reads, revoke: (k: string) => digests.delete(apiKeyDigest(k)) };
}

function setup(keys: string[], opts: { perMinute?: number; ttlMs?: number } = {}) {
  let t = 1_000_000;
  const clock = { advance: (ms: number) => (t += ms) };
  const { db, reads, revoke } = fakeDb(keys);
  const apiKeys = apiKeyResolver(db, opts.ttlMs ?? 2000, () => t);
  const authFailures = authFailureLimiter(memoryRateLimiter(), opts.perMinute ?? 10);
  const check = (key: string, ip = "10.0.0.1") => checkApiKey({ apiKeys, authFailures }, key, ip);
  return { apiKeys, check, reads, revoke, clock };
}

describe("checkApiKey", () => {
  it("reads at most the address's budget of unknown keys, then refuses them unread; a known key still passes", async () => {
    const valid = generateApiKey();
    const s = setup([valid], { perMinute: 10 });
    assert.equal((await s.check(valid)).kind, "valid");
    const outcomes = await Promise.all(Array.from({ length: 500 }, () => s.check(generateApiKey())));
    assert.equal(outcomes.filter((o) => o.kind === "invalid").length, 10);
    assert.equal(outcomes.filter((o) => o.kind === "throttled").length, 490);
    assert.equal(s.reads.count, 1 + 10, "one read for the valid key, then only the budget's worth");
    s.clock.advance(5000); // past the cache lifetime: the valid key is re-read, budget or not
    assert.equal((await s.check(valid)).kind, "valid");
    assert.equal(s.reads.count, 12);
    await s.apiKeys.close();
  });

  it("a valid key gives its count back, so valid traffic never uses up the budget", async () => {
    const keys = Array.from({ length: 30 }, generateApiKey);
    const s = setup(keys, { perMinute: 2 });
    for (const key of keys) assert.equal((await s.check(key)).kind, "valid");
    assert.equal((await s.check(generateApiKey())).kind, "invalid");
    await s.apiKeys.close();
  });

  it("concurrent first requests of one valid key are one read and one count", async () => {
    const valid = generateApiKey();
    const s = setup([valid], { perMinute: 1 });
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => s.check(valid)));
    assert.deepEqual(new Set(outcomes.map((o) => o.kind)), new Set(["valid"]));
    assert.equal(s.reads.count, 1);
    await s.apiKeys.close();
  });

  it("a repeated miss and a malformed key are refused without a read; a revoked key is read once more", async () => {
    const valid = generateApiKey();
    const unknown = generateApiKey();
    const s = setup([valid], { perMinute: 1000 });
    for (let i = 0; i < 20; i++) assert.equal((await s.check(unknown)).kind, "invalid");
    assert.equal((await s.check(`${unknown.slice(0, -1)}x`)).kind, "invalid");
    assert.equal(s.reads.count, 1);
    assert.equal((await s.check(valid)).kind, "valid");
    s.revoke(valid);
    s.clock.advance(2000);
    assert.equal((await s.check(valid)).kind, "invalid");
    assert.equal((await s.check(valid)).kind, "invalid");
    assert.equal(s.reads.count, 3);
    await s.apiKeys.close();
  });

  it("misses never evict valid keys", async () => {
    const valid = generateApiKey();
    const s = setup([valid], { perMinute: 1_000_000, ttlMs: 60_000 });
    assert.equal((await s.check(valid)).kind, "valid");
    for (let i = 0; i < 25_000; i++) await s.check(generateApiKey());
    const reads = s.reads.count;
    assert.equal((await s.check(valid)).kind, "valid");
    assert.equal(s.reads.count, reads, "the valid key was still cached");
    await s.apiKeys.close();
  });
});

describe("Lru", () => {
  it("forgets the least recently used entry when full", () => {
    const lru = new Lru<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    assert.equal(lru.get("a"), 1);
    lru.set("c", 3);
    assert.equal(lru.get("b"), undefined);
    assert.deepEqual(
      [...lru.entries()],
      [
        ["a", 1],
        ["c", 3],
      ],
    );
    assert.equal(lru.size, 2);
  });
});
