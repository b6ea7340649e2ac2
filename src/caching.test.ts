import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readThroughCache } from "./caching.ts";

/** A loader whose reads answer when told to, counting them per key. */
function controlledLoad() {
  const reads: { key: string; answer: (value: string) => void; fail: (err: Error) => void }[] = [];
  const load = (key: string) =>
    new Promise<string>((resolve, reject) => reads.push({ key, answer: resolve, fail: reject }));
  return { reads, load };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("readThroughCache", () => {
  it("makes one read for any number of requests that miss together, and answers all of them", async () => {
    const { reads, load } = controlledLoad();
    const cache = readThroughCache({ max: 10, ttlMs: 1000, now: () => 0, load });
    const asked = Array.from({ length: 50 }, () => cache.get("p"));
    await settle();
    assert.equal(reads.length, 1);
    reads[0]!.answer("terms");
    assert.deepEqual(await Promise.all(asked), Array(50).fill("terms"));
    assert.equal(await cache.get("p"), "terms");
    assert.equal(reads.length, 1, "a hit reads nothing");
  });

  it("reads again once the lifetime has passed on its clock, once for all who miss", async () => {
    let t = 1_700_000_000_000;
    let n = 0;
    const cache = readThroughCache({ max: 10, ttlMs: 2000, now: () => t, load: async () => `v${++n}` });
    assert.equal(await cache.get("p"), "v1");
    t += 2000;
    assert.equal(await cache.get("p"), "v1", "still within its lifetime");
    t += 1;
    const again = await Promise.all([cache.get("p"), cache.get("p"), cache.get("p")]);
    assert.deepEqual(again, ["v2", "v2", "v2"]);
    assert.equal(n, 2);
  });

  it("keeps each key apart, a null value included", async () => {
    let reads = 0;
    const cache = readThroughCache<string | null>({
      max: 10,
      ttlMs: 1000,
      now: () => 0,
      load: async (key) => {
        reads++;
        return key === "none" ? null : key.toUpperCase();
      },
    });
    assert.equal(await cache.get("a"), "A");
    assert.equal(await cache.get("none"), null);
    assert.equal(await cache.get("none"), null);
    assert.equal(await cache.get("b"), "B");
    assert.equal(reads, 3, "a cached null is a hit");
  });

  it("after forget, the next request reads anew; a read already under way answers its own waiters and is not kept", async () => {
    const { reads, load } = controlledLoad();
    const cache = readThroughCache({ max: 10, ttlMs: 60_000, now: () => 0, load });
    const before = cache.get("p");
    await settle();
    cache.forget("p");
    const after = cache.get("p");
    await settle();
    assert.equal(reads.length, 2, "a request after forget does not join the earlier read");
    reads[0]!.answer("old");
    reads[1]!.answer("new");
    assert.equal(await before, "old");
    assert.equal(await after, "new");
    assert.equal(await cache.get("p"), "new");
    assert.equal(reads.length, 2);
  });

  it("a read that fails fails everyone waiting on it, keeps nothing, and the next request reads again", async () => {
    const { reads, load } = controlledLoad();
    const cache = readThroughCache({ max: 10, ttlMs: 60_000, now: () => 0, load });
    const asked = [cache.get("p"), cache.get("p")];
    await settle();
    reads[0]!.fail(new Error("database unavailable"));
    for (const r of await Promise.allSettled(asked)) {
      assert.equal(r.status, "rejected");
      assert.equal((r as PromiseRejectedResult).reason.message, "database unavailable");
    }
    const next = cache.get("p");
    await settle();
    assert.equal(reads.length, 2);
    reads[1]!.answer("back");
    assert.equal(await next, "back");
  });

  it("with a lifetime of 0 caches nothing: every request reads", async () => {
    let reads = 0;
    const cache = readThroughCache({
      max: 10,
      ttlMs: 0,
      now: () => 0,
      load: async () => ++reads,
    });
    assert.deepEqual(await Promise.all([cache.get("p"), cache.get("p")]), [1, 2]);
    assert.equal(await cache.get("p"), 3);
  });

  it("holds at most `max` keys, dropping the least recently used", async () => {
    let reads = 0;
    const cache = readThroughCache({
      max: 2,
      ttlMs: 60_000,
      now: () => 0,
      load: async (k) => `${k}${++reads}`,
    });
    await cache.get("a");
    await cache.get("b");
    await cache.get("a");
    await cache.get("c");
    assert.equal(await cache.get("a"), "a1");
    assert.equal(await cache.get("b"), "b4", "b was the least recently used");
  });
});
