import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { moneySummary, SPEND_WINDOW_DAYS } from "./money.ts";

const week = (spent: bigint[]) =>
  spent.map((spentWei, i) => ({ day: `2026-11-${String(20 + i).padStart(2, "0")}`, spentWei }));

describe("moneySummary", () => {
  it("divides the available balance by the average daily spend of the last 7 days, rounded down", () => {
    const s = moneySummary({
      availableWei: 1_000n,
      reservedWei: 30n,
      spentTotalWei: 5_000n,
      spentByDay: week([0n, 10n, 20n, 0n, 30n, 0n, 10n]),
    });
    // 70 wei in 7 days is 10 a day: 1,000 wei last 100 days.
    assert.equal(s.daysOfGasLeft, 100);
    assert.equal(s.averageDailySpend, "10");
    assert.equal(s.spentLast7Days, "70");
    assert.equal(s.spentToday, "10");
    assert.deepEqual([s.available, s.reserved, s.spentTotal], ["1000", "30", "5000"]);
    assert.equal(s.last7Days.length, SPEND_WINDOW_DAYS);
  });

  it("never rounds the days up", () => {
    // 3 wei a week for 1 wei: 7/3 = 2.333… days, shown as 2.3.
    const s = moneySummary({
      availableWei: 1n,
      reservedWei: 0n,
      spentTotalWei: 3n,
      spentByDay: week([3n, 0n, 0n, 0n, 0n, 0n, 0n]),
    });
    assert.equal(s.daysOfGasLeft, 2.3);
  });

  it("has no days left to tell when nothing was spent in the window", () => {
    const s = moneySummary({
      availableWei: 5n,
      reservedWei: 0n,
      spentTotalWei: 9n,
      spentByDay: week(Array(7).fill(0n)),
    });
    assert.equal(s.daysOfGasLeft, null);
    assert.equal(s.averageDailySpend, "0");
  });

  it("keeps amounts past 2^64 exact", () => {
    const big = 123_456_789_012_345_678_901_234_567n;
    const s = moneySummary({
      availableWei: big,
      reservedWei: big,
      spentTotalWei: big,
      spentByDay: week([big, 0n, 0n, 0n, 0n, 0n, 0n]),
    });
    assert.equal(s.available, "123456789012345678901234567");
    assert.equal(s.spentLast7Days, "123456789012345678901234567");
    assert.equal(s.daysOfGasLeft, 7);
  });
});
