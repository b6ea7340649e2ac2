import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseLsn } from "./replicas.ts";

describe("parseLsn", () => {
  it("reads PostgreSQL's hi/lo text form as one 64-bit position, ordered as the server orders them", () => {
    assert.equal(parseLsn("0/0"), 0n);
    assert.equal(parseLsn("0/16B3748"), 0x16b3748n);
    assert.equal(parseLsn("16/B374D848"), (0x16n << 32n) | 0xb374d848n);
    assert.ok(parseLsn("1/0") > parseLsn("0/FFFFFFFF"));
    for (const bad of ["", "16", "16/", "/1", "G/1", "123456789/0", "0/1 "])
      assert.throws(() => parseLsn(bad), bad);
  });
});
