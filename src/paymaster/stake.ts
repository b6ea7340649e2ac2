/**
 * The paymaster's stake in its EntryPoint, judged the way a public bundler judges it. This
 * paymaster reads and writes its own storage during validation (the single-use authorization
 * ids), which ERC-7562 allows only to a staked entity: a bundler that finds it unstaked, unlocking,
 * or staked for less than its own minimums refuses every operation it sponsors, however valid the
 * signature. One rule for `npm run paymaster -- check` and for readiness (health/paymaster-stake.ts).
 */

/** The fields of the EntryPoint's `getDepositInfo(paymaster)` that concern the stake (v0.7 and v0.8 alike). */
export interface StakeInfo {
  staked: boolean;
  stakeWei: bigint;
  unstakeDelaySec: number;
  /** 0 while locked; after `unlockStake()`, the block time from which the stake can be withdrawn. */
  withdrawTimeSec: number;
}

export interface StakeMinimums {
  minStakeWei: bigint;
  minUnstakeDelaySec: number;
}

/**
 * ERC-7562's MIN_UNSTAKE_DELAY: bundlers that follow it (Alto, Rundler, Skandha, Voltaire) treat an
 * entity whose unstake delay is shorter than a day as unstaked.
 */
export const ERC7562_MIN_UNSTAKE_DELAY_SEC = 86_400;

/**
 * ERC-7562 leaves MIN_STAKE_VALUE to each chain; Alto's default `--min-entity-stake` is 1 unit of the
 * native token (10^18 wei), and Rundler's is the same. A chain whose bundlers ask for more is
 * configured with CHAIN_<id>_PAYMASTER_MIN_STAKE_WEI.
 */
export const DEFAULT_MIN_STAKE_WEI = 10n ** 18n;

/**
 * - staked: locked, at or above both minimums.
 * - below_minimum: locked, but the stake or the unstake delay is below a minimum.
 * - unlocking: `unlockStake()` was called (withdrawTime set); bundlers treat it as unstaked at once.
 * - unstaked: never staked, or the stake was withdrawn.
 */
export type StakeState = "staked" | "below_minimum" | "unlocking" | "unstaked";

export const STAKE_STATES: readonly StakeState[] = ["staked", "below_minimum", "unlocking", "unstaked"];

/** Pure: what a bundler with these minimums makes of the stake. */
export function stakeState(info: StakeInfo, min: StakeMinimums): StakeState {
  // unlockStake() clears `staked` and sets the withdraw time: the withdraw time says which it is.
  if (info.withdrawTimeSec !== 0) return "unlocking";
  if (!info.staked) return "unstaked";
  if (info.stakeWei < min.minStakeWei || info.unstakeDelaySec < min.minUnstakeDelaySec)
    return "below_minimum";
  return "staked";
}
