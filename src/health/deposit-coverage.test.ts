import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { depositCoverage, type PaymasterFunds } from "./deposit-coverage.ts";

const V07 = "0x00000000000000000000000000000000000000aa";
const V08 = "0x00000000000000000000000000000000000000bb";
const ETH = 10n ** 18n;

const funds = (version: "0.7" | "0.8", depositWei: bigint | null, reservedWei = 0n): PaymasterFunds => ({
  version,
  paymaster: version === "0.7" ? V07 : V08,
  depositWei,
  reservedWei,
});

describe("depositCoverage", () => {
  it("ok when the deposits cover open reservations and the warn share of the tanks", () => {
    const c = depositCoverage({
      paymasters: [funds("0.7", 10n * ETH, ETH), funds("0.8", 10n * ETH)],
      tanksWei: 19n * ETH,
      reservedWei: ETH,
      warnPercent: 100,
    });
    assert.equal(c.state, "ok");
    assert.equal(c.depositWei, 20n * ETH);
    assert.equal(c.warnBelowWei, 20n * ETH);
  });

  it("low one wei below open reservations + warnPercent % of the tanks, and says so with the numbers", () => {
    const c = depositCoverage({
      paymasters: [funds("0.7", 10n * ETH - 1n)],
      tanksWei: 20n * ETH,
      reservedWei: 0n,
      warnPercent: 50,
    });
    assert.equal(c.state, "low");
    assert.equal(c.warnBelowWei, 10n * ETH);
    assert.match(
      c.detail,
      /^deposit low: .*\(9999999999999999999 wei\) are below open reservations 0 wei \+ 50% of the gas tanks' 20000000000000000000 wei = 10000000000000000000 wei/,
    );
  });

  it("short, naming the paymaster, when one deposit is below the reservations signed for it even if the sum covers", () => {
    const c = depositCoverage({
      paymasters: [funds("0.7", 5n, 6n), funds("0.8", 100n * ETH)],
      tanksWei: 0n,
      reservedWei: 6n,
      warnPercent: 100,
    });
    assert.equal(c.state, "short");
    assert.match(
      c.detail,
      /v0\.7 paymaster's EntryPoint deposit \(5 wei\) is below its open reservations \(6 wei\)/,
    );
    assert.doesNotMatch(c.detail, /v0\.8/);
  });

  it("unknown when a deposit could not be read, whatever the others say", () => {
    const c = depositCoverage({
      paymasters: [funds("0.7", 0n, ETH), funds("0.8", null)],
      tanksWei: ETH,
      reservedWei: ETH,
      warnPercent: 100,
    });
    assert.equal(c.state, "unknown");
    assert.equal(c.depositWei, null);
    assert.match(c.detail, /v0\.8/);
  });

  it("is exact in wei beyond 2^53 and never ok below the warn line nor short while every paymaster covers its own", () => {
    const wei = fc.bigInt({ min: 0n, max: 10n ** 30n });
    fc.assert(
      fc.property(wei, wei, wei, wei, fc.integer({ min: 0, max: 1000 }), (d7, d8, r7, tanks, percent) => {
        const c = depositCoverage({
          paymasters: [funds("0.7", d7, r7), funds("0.8", d8)],
          tanksWei: tanks,
          reservedWei: r7,
          warnPercent: percent,
        });
        const warnBelow = r7 + (tanks * BigInt(percent)) / 100n;
        assert.equal(c.warnBelowWei, warnBelow);
        if (d7 < r7) assert.equal(c.state, "short");
        else assert.equal(c.state, d7 + d8 < warnBelow ? "low" : "ok");
      }),
    );
  });
});
