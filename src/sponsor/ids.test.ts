import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { randomAuthId } from "./ids.ts";

describe("authorization ids", () => {
  it("are 32 bytes of hex, all different across several refills of the pool", () => {
    const ids = Array.from({ length: 2_000 }, randomAuthId);
    for (const id of ids) assert.match(id, /^0x[0-9a-f]{64}$/);
    assert.equal(new Set(ids).size, ids.length);
    // No id repeats a slice of the one before it (the pool moves by whole ids).
    assert.ok(ids.every((id, i) => i === 0 || id.slice(2, 34) !== ids[i - 1]!.slice(34)));
  });
});
