import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { formatEther, formatGwei } from "viem";
import { parseWei } from "./amount.ts";

const wei = (text: string) => {
  const parsed = parseWei(text);
  assert.ok(parsed.ok, text);
  return parsed.wei;
};

describe("parseWei", () => {
  it("reads wei integers and decimal ether or gwei exactly, never through a float", () => {
    assert.equal(wei("0"), 0n);
    assert.equal(wei("1500000000000000000"), 1_500_000_000_000_000_000n);
    assert.equal(wei("0.5ether"), 500_000_000_000_000_000n);
    assert.equal(wei("0.1 ether"), 100_000_000_000_000_000n);
    assert.equal(wei("2gwei"), 2_000_000_000n);
    assert.equal(wei("1.000000001 GWEI"), 1_000_000_001n);
    assert.equal(wei("0.000000000000000001ether"), 1n);
    assert.equal(wei("7wei"), 7n);
  });

  it("is the inverse of formatting: any wei amount written in ether or gwei reads back to itself", () => {
    fc.assert(
      fc.property(fc.bigInt(0n, 2n ** 200n), (amount) => {
        assert.equal(wei(`${formatEther(amount)}ether`), amount);
        assert.equal(wei(amount.toString()), amount);
        assert.equal(wei(`${formatGwei(amount)}gwei`), amount);
      }),
    );
  });

  it("refuses what is not an exact amount instead of rounding it", () => {
    for (const text of [
      "",
      "1e18",
      "-1",
      "0x10",
      "1.5",
      "0.1wei",
      "1.0000000001gwei",
      "1 eth",
      ".5ether",
      "1,000",
    ]) {
      assert.equal(parseWei(text).ok, false, text);
    }
    assert.equal(parseWei((2n ** 256n).toString()).ok, false);
    assert.equal(wei((2n ** 256n - 1n).toString()), 2n ** 256n - 1n);
  });
});
