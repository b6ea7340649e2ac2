/**
 * The paymasters' stakes in their EntryPoints, as health/paymaster-stake.ts last read them. Kept
 * apart from metrics.ts so that the stake's gauges read as one unit; createMetrics registers them.
 *
 * A cluster's primary keeps the smallest value of each gauge across the workers (they all read the
 * same chain): for `gss_paymaster_stake_ok` that is the worst. A stake never read has no sample.
 */
import { Gauge, type Registry } from "prom-client";
import { formatEther } from "viem";
import type { StakeState } from "../paymaster/stake.ts";

export interface PaymasterStakeReading {
  stakeWei: bigint;
  unstakeDelaySec: number;
  state: StakeState;
}

/** Registers the stake gauges; the function it returns records one reading of one paymaster. */
export function paymasterStakeGauges(
  registers: Registry[],
): (chainId: number, entryPoint: string, reading: PaymasterStakeReading) => void {
  const labelNames = ["chain_id", "entry_point"];
  const stake = new Gauge({
    aggregator: "min",
    name: "gss_paymaster_stake_ether",
    help: "The paymaster's stake in its EntryPoint (ether: 1e18 wei of the native token), unlocking or not",
    labelNames,
    registers,
  });
  const delay = new Gauge({
    aggregator: "min",
    name: "gss_paymaster_unstake_delay_seconds",
    help: "The unstake delay of the paymaster's stake in its EntryPoint",
    labelNames,
    registers,
  });
  const ok = new Gauge({
    aggregator: "min",
    name: "gss_paymaster_stake_ok",
    help: "1 when the paymaster's stake is locked and at least the chain's minimum stake and unstake delay (CHAIN_<id>_PAYMASTER_MIN_STAKE_WEI, _MIN_UNSTAKE_DELAY_SEC); 0 when it is unstaked, unlocking or below a minimum: public bundlers refuse its operations",
    labelNames,
    registers,
  });
  return (chainId, entryPoint, reading) => {
    const labels = { chain_id: String(chainId), entry_point: entryPoint };
    // Ether from the exact decimal string, as metrics.ts's weiToEther does for every amount.
    stake.set(labels, Number(formatEther(reading.stakeWei)));
    delay.set(labels, reading.unstakeDelaySec);
    ok.set(labels, reading.state === "staked" ? 1 : 0);
  };
}
