import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { loadConfig } from "../config.ts";
import { type FeeBounds, feeCeilings } from "./pricing.ts";

const GWEI = 1_000_000_000n;
const defaults = loadConfig({}).chains[0]!;

describe("feeCeilings", () => {
  it("adds the margin to the base fee only and passes the priority fee through", () => {
    const c = feeCeilings({ baseFeePerGasWei: 100n * GWEI, priorityFeePerGasWei: 2n * GWEI }, defaults);
    assert.deepEqual(c, {
      maxFeePerGasWei: 152n * GWEI,
      maxPriorityFeePerGasWei: 2n * GWEI,
      clampedTo: null,
    });
  });

  it("with the default margin, still covers the base fee after three full blocks (12.5 % each)", () => {
    const baseFee = 40n * GWEI;
    const afterThreeBlocks = (baseFee * 1125n ** 3n) / 1000n ** 3n;
    const c = feeCeilings({ baseFeePerGasWei: baseFee, priorityFeePerGasWei: GWEI }, defaults);
    assert.ok(c.maxFeePerGasWei >= afterThreeBlocks + c.maxPriorityFeePerGasWei);
  });

  it("rounds the margin up rather than losing a wei", () => {
    const c = feeCeilings(
      { baseFeePerGasWei: 3n, priorityFeePerGasWei: 0n },
      { ...defaults, feeMarginPercent: 50 },
    );
    assert.equal(c.maxFeePerGasWei, 5n);
  });

  it("stops at the ceiling in a fee spike, and cuts the priority fee to it", () => {
    const c = feeCeilings(
      { baseFeePerGasWei: 500n * GWEI, priorityFeePerGasWei: 300n * GWEI },
      defaults, // ceiling 200 gwei
    );
    assert.deepEqual(c, {
      maxFeePerGasWei: 200n * GWEI,
      maxPriorityFeePerGasWei: 200n * GWEI,
      clampedTo: "ceiling",
    });
  });

  it("lifts a reading of zero to the floor", () => {
    const c = feeCeilings({ baseFeePerGasWei: 0n, priorityFeePerGasWei: 0n }, defaults);
    assert.deepEqual(c, { maxFeePerGasWei: 1n, maxPriorityFeePerGasWei: 0n, clampedTo: "floor" });
  });

  it("refuses bounds that config validation would have refused", () => {
    assert.throws(() =>
      feeCeilings(
        { baseFeePerGasWei: 1n, priorityFeePerGasWei: 1n },
        { minFeePerGasWei: 2n, maxFeePerGasWei: 1n, feeMarginPercent: 50 },
      ),
    );
  });
});

// Amounts from a few wei to 10,000 gwei, spread over magnitudes so that every branch is taken
// often (about a third of the cases land inside the bounds, the rest on the floor or ceiling).
const wei = () =>
  fc.oneof(...[10n ** 3n, 10n ** 9n, 10n ** 11n, 10n ** 13n].map((max) => fc.bigInt({ min: 0n, max })));
const boundsArb: fc.Arbitrary<FeeBounds> = fc
  .tuple(wei(), wei(), fc.integer({ min: 0, max: 1000 }))
  .map(([a, b, feeMarginPercent]) => ({
    minFeePerGasWei: a < b ? a + 1n : b + 1n,
    maxFeePerGasWei: a < b ? b + 1n : a + 1n,
    feeMarginPercent,
  }));
const RUNS = { numRuns: 2000 };
const feesArb = fc.record({ baseFeePerGasWei: wei(), priorityFeePerGasWei: wei() });

describe("feeCeilings, properties", () => {
  it("the fee ceiling always lies within [floor, ceiling]", () => {
    fc.assert(
      fc.property(feesArb, boundsArb, (fees, bounds) => {
        const c = feeCeilings(fees, bounds);
        return bounds.minFeePerGasWei <= c.maxFeePerGasWei && c.maxFeePerGasWei <= bounds.maxFeePerGasWei;
      }),
      RUNS,
    );
  });

  it("the priority fee ceiling is never padded and never above the fee ceiling", () => {
    fc.assert(
      fc.property(feesArb, boundsArb, (fees, bounds) => {
        const c = feeCeilings(fees, bounds);
        return (
          c.maxPriorityFeePerGasWei >= 0n &&
          c.maxPriorityFeePerGasWei <= fees.priorityFeePerGasWei &&
          c.maxPriorityFeePerGasWei <= c.maxFeePerGasWei
        );
      }),
      RUNS,
    );
  });

  it("inside the bounds, the ceilings are exactly the market with its margin (and say so)", () => {
    fc.assert(
      fc.property(feesArb, boundsArb, (fees, bounds) => {
        const c = feeCeilings(fees, bounds);
        const scaled = fees.baseFeePerGasWei * BigInt(100 + bounds.feeMarginPercent);
        const market = (scaled + 99n) / 100n + fees.priorityFeePerGasWei;
        if (market < bounds.minFeePerGasWei) return c.clampedTo === "floor";
        if (market > bounds.maxFeePerGasWei) return c.clampedTo === "ceiling";
        return (
          c.clampedTo === null &&
          c.maxFeePerGasWei === market &&
          c.maxPriorityFeePerGasWei === fees.priorityFeePerGasWei &&
          // The headroom covers the base fee grown by the margin, with the whole priority fee on top.
          c.maxFeePerGasWei * 100n >= scaled + fees.priorityFeePerGasWei * 100n
        );
      }),
      RUNS,
    );
  });

  it("never falls when the chain's fees rise", () => {
    fc.assert(
      fc.property(feesArb, wei(), wei(), boundsArb, (fees, dBase, dPriority, bounds) => {
        const low = feeCeilings(fees, bounds);
        const high = feeCeilings(
          {
            baseFeePerGasWei: fees.baseFeePerGasWei + dBase,
            priorityFeePerGasWei: fees.priorityFeePerGasWei + dPriority,
          },
          bounds,
        );
        return (
          high.maxFeePerGasWei >= low.maxFeePerGasWei &&
          high.maxPriorityFeePerGasWei >= low.maxPriorityFeePerGasWei
        );
      }),
      RUNS,
    );
  });
});
