import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { randomAuthId, randomHex } from "./ids.ts";

describe("random ids", () => {
  it("authorization ids are 32 bytes of hex, all different across several refills of the pool", () => {
    const ids = Array.from({ length: 2_000 }, randomAuthId);
    for (const id of ids) assert.match(id, /^0x[0-9a-f]{64}$/);
    assert.equal(new Set(ids).size, ids.length);
    // No id repeats a slice of the one before it (the pool moves by whole ids).
    assert.ok(ids.every((id, i) => i === 0 || id.slice(2, 34) !== ids[i - 1]!.slice(34)));
  });

  it("ids of other sizes drawn in between never share bytes with their neighbours", () => {
    // 16-byte approval ids between authorization ids, across refills (an 8 KiB pool, 48 bytes a round).
    const drawn = Array.from({ length: 1_000 }, () => [randomHex(16), randomAuthId().slice(2)]).flat();
    for (const [i, hex] of drawn.entries())
      assert.match(hex, i % 2 === 0 ? /^[0-9a-f]{32}$/ : /^[0-9a-f]{64}$/);
    assert.equal(new Set(drawn).size, drawn.length);
    const joined = drawn.join("");
    // A 16-byte window of any id does not appear anywhere else in what was drawn.
    for (const hex of drawn.slice(0, 200)) assert.equal(joined.split(hex.slice(0, 32)).length, 2);
    assert.throws(() => randomHex(0), RangeError);
    assert.throws(() => randomHex(257), RangeError);
  });
});
