import assert from "node:assert/strict";
import type { FeeLevels, FeeOracle } from "../chains/fee-oracle.ts";
import type { ChainConfig } from "../config.ts";

/**
 * The fee ceilings an authorization binds, from the chain's current fees (the fee oracle's
 * reading) and the chain's configured margin, floor and ceiling. Pure: no I/O, no clock.
 *
 * Why the margin goes on the base fee and only there:
 * - An operation is included a few blocks after it was authorized, and under EIP-1559 the base
 *   fee can rise by 12.5 % per full block. The default margin of 50 % covers three full blocks in
 *   a row (1.125³ ≈ 1.42) on top of a reading that is itself up to a refresh interval old.
 * - The base fee is burned, so headroom on it cannot be pocketed: the EntryPoint charges
 *   min(maxFeePerGas, basefee + maxPriorityFeePerGas) per gas, and with the priority fee capped
 *   at the market's, what the paymaster pays stays close to what the block really cost.
 * - The priority fee is not padded, because it is the part someone keeps: a player who is their
 *   own bundler and beneficiary collects every wei of priority fee the operation pays. Padding
 *   it would hand them the padding.
 *
 * The result is clamped to [floor, ceiling]: the ceiling bounds a reservation whatever the chain
 * charges (a fee spike above it means operations wait rather than drain a tank), and the floor
 * keeps a ceiling usable where the chain reports less than it really takes. The priority fee
 * ceiling never exceeds the fee ceiling, as the EIP-1559 rules and the contract expect.
 */

export interface FeeCeilings {
  maxFeePerGasWei: bigint;
  maxPriorityFeePerGasWei: bigint;
  /** Which bound, if any, decided maxFeePerGasWei instead of the market: worth a log line. */
  clampedTo: "floor" | "ceiling" | null;
}

export type FeeBounds = Pick<ChainConfig, "minFeePerGasWei" | "maxFeePerGasWei" | "feeMarginPercent">;

export function feeCeilings(fees: FeeLevels, bounds: FeeBounds): FeeCeilings {
  const { baseFeePerGasWei: baseFee, priorityFeePerGasWei: priority } = fees;
  const { minFeePerGasWei: floor, maxFeePerGasWei: ceiling, feeMarginPercent: marginPct } = bounds;
  assert.ok(baseFee >= 0n && priority >= 0n, "negative fee reading");
  assert.ok(floor <= ceiling, "fee floor above the fee ceiling");
  assert.ok(Number.isSafeInteger(marginPct) && marginPct >= 0, "fee margin must be a non-negative integer");

  // Rounded up, so the ceiling is never below baseFee × (1 + margin) by a truncated wei.
  const market = ceilDiv(baseFee * BigInt(100 + marginPct), 100n) + priority;
  const maxFeePerGasWei = smaller(larger(market, floor), ceiling);
  return {
    maxFeePerGasWei,
    maxPriorityFeePerGasWei: smaller(priority, maxFeePerGasWei),
    clampedTo: market < floor ? "floor" : market > ceiling ? "ceiling" : null,
  };
}

// Math.min and Math.max take numbers only.
function smaller(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

function larger(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/**
 * A chain's fee ceilings now, from the oracle's cached reading: null without a fresh one (the
 * refusal is then 503 fee_oracle_stale). The one way every sponsorship route prices.
 */
export function currentFeeCeilings(
  oracle: Pick<FeeOracle, "current">,
  chains: readonly ChainConfig[],
  chainId: number,
): FeeCeilings | null {
  const reading = oracle.current(chainId);
  const chain = chains.find((c) => c.chainId === chainId);
  return reading.kind === "fresh" && chain ? feeCeilings(reading.fees, chain) : null;
}
