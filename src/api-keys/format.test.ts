import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { apiKeyPreview, generateApiKey, isWellFormedApiKey } from "./format.ts";

describe("API key format", () => {
  it("generates well-formed, distinct keys with a 12-character preview", () => {
    const keys = new Set(Array.from({ length: 200 }, generateApiKey));
    assert.equal(keys.size, 200);
    for (const key of keys) {
      assert.match(key, /^gsk_[0-9A-Za-z]{46}$/);
      assert.ok(isWellFormedApiKey(key));
      assert.equal(apiKeyPreview(key).length, 12);
    }
  });

  it("the checksum catches any single-character change", () => {
    const key = generateApiKey();
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: key.length - 1 }),
        fc.constantFrom(..."0123456789abcXYZ"),
        (i, c) => {
          fc.pre(key[i] !== c);
          return !isWellFormedApiKey(key.slice(0, i) + c + key.slice(i + 1));
        },
      ),
    );
  });
});
