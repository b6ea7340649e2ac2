import assert from "node:assert/strict";

/** The window the average daily spend is taken over, in UTC days (today included). */
export const SPEND_WINDOW_DAYS = 7;

export interface MoneyFigures {
  availableWei: bigint;
  reservedWei: bigint;
  spentTotalWei: bigint;
  /** Settled cost per UTC day of the window, oldest first, today last. */
  spentByDay: { day: string; spentWei: bigint }[];
}

export interface MoneySummary {
  available: string;
  reserved: string;
  spentTotal: string;
  spentToday: string;
  spentLast7Days: string;
  averageDailySpend: string;
  daysOfGasLeft: number | null;
  last7Days: { day: string; spent: string }[];
}

/**
 * The tank in plain words. Days of gas left = available ÷ the average daily spend of the window,
 * computed in wei (available × days ÷ spent), rounded down to a tenth of a day so that it never
 * promises more than the tank holds; null when nothing was spent in the window (no rate to divide
 * by). The average itself is rounded down to a whole wei.
 */
export function moneySummary(f: MoneyFigures): MoneySummary {
  assert.equal(f.spentByDay.length, SPEND_WINDOW_DAYS, "one figure per day of the window");
  assert.ok(f.availableWei >= 0n && f.reservedWei >= 0n, "balances are never negative");
  const windowWei = f.spentByDay.reduce((sum, d) => sum + d.spentWei, 0n);
  const days = BigInt(SPEND_WINDOW_DAYS);
  const tenths = windowWei > 0n ? (f.availableWei * days * 10n) / windowWei : null;
  return {
    available: f.availableWei.toString(),
    reserved: f.reservedWei.toString(),
    spentTotal: f.spentTotalWei.toString(),
    spentToday: f.spentByDay[f.spentByDay.length - 1]!.spentWei.toString(),
    spentLast7Days: windowWei.toString(),
    averageDailySpend: (windowWei / days).toString(),
    // Tenths of a day beyond 2^53 are more than a quadrillion years: a float of them is exact enough.
    daysOfGasLeft: tenths === null ? null : Number(tenths) / 10,
    last7Days: f.spentByDay.map((d) => ({ day: d.day, spent: d.spentWei.toString() })),
  };
}
