/**
 * Readiness: is each configured paymaster staked the way the chain's bundlers require? It reads
 * the EntryPoint's `getDepositInfo(paymaster)` (the same struct in v0.7 and v0.8) and judges it
 * with paymaster/stake.ts against CHAIN_<id>_PAYMASTER_MIN_STAKE_WEI and
 * CHAIN_<id>_PAYMASTER_MIN_UNSTAKE_DELAY_SEC.
 *
 * Without the stake every operation the service signs is refused by public bundlers, yet nothing
 * else looks wrong: the signer matches and the deposit covers. So an unstaked or unlocking
 * paymaster is degraded and critical (logged at error level); a stake below a minimum is degraded
 * (bundlers with lower minimums still take it). Degraded, not down, for the reason identity
 * mismatches are: every instance shares the configuration.
 *
 * The stake changes only when the operator acts, so it is read at most once per `refreshMs`. An
 * evaluation never waits for the read longer than `waitMs`: past that it answers from the last
 * reading and the read completes for the next one. When the read fails the last reading is kept,
 * said to be stale and how old; a chain never read is degraded (unknown).
 */
import type { Address } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import type { ChainClient } from "../chains/rpc.ts";
import type { LiveEntryPoint } from "../config.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { type StakeInfo, type StakeMinimums, type StakeState, stakeState } from "../paymaster/stake.ts";
import type { CheckResult, ReadinessProbe } from "./readiness.ts";

export const PAYMASTER_STAKE_REFRESH_MS = 15_000;
/** How long an evaluation waits for a read in flight before answering from the last one. */
export const PAYMASTER_STAKE_WAIT_MS = 500;

type Reading = { info: StakeInfo; atMs: number };

export function paymasterStakeProbe(input: {
  chainId: number;
  pair: LiveEntryPoint;
  client: Pick<ChainClient, "readContract">;
  minimums: StakeMinimums;
  metrics?: Metrics;
  now?: () => number;
  refreshMs?: number;
  waitMs?: number;
}): ReadinessProbe {
  const { chainId, pair, client, minimums, metrics } = input;
  const now = input.now ?? Date.now;
  const refreshMs = input.refreshMs ?? PAYMASTER_STAKE_REFRESH_MS;
  const waitMs = input.waitMs ?? PAYMASTER_STAKE_WAIT_MS;
  const suffix = pair.version === "0.7" ? "" : `:${pair.version}`;
  let last: Reading | null = null;
  /** Why the latest read failed; null once one succeeds. */
  let failure: string | null = null;
  let startedAtMs: number | null = null;
  let inFlight: Promise<void> | null = null;

  const refresh = () => {
    startedAtMs = now();
    inFlight = readStake(client, pair)
      .then(
        (info) => {
          last = { info, atMs: now() };
          failure = null;
          metrics?.paymasterStake(chainId, pair.version, {
            stakeWei: info.stakeWei,
            unstakeDelaySec: info.unstakeDelaySec,
            state: stakeState(info, minimums),
          });
        },
        (err: Error) => {
          failure = String(err?.message ?? err).split("\n")[0]!;
        },
      )
      .finally(() => {
        inFlight = null;
      });
  };

  return {
    name: `chain:${chainId}:paymaster-stake${suffix}`,
    async check() {
      // A failed read is tried again at the next evaluation, not after refreshMs.
      const due = startedAtMs === null || failure !== null || now() - startedAtMs >= refreshMs;
      if (!inFlight && due) refresh();
      if (inFlight) await within(inFlight, waitMs);
      return verdict(pair, minimums, last, failure, now());
    },
  };
}

/** Pure: the check's result from the last reading and whether the latest read failed. */
export function verdict(
  pair: LiveEntryPoint,
  minimums: StakeMinimums,
  last: Reading | null,
  failure: string | null,
  nowMs: number,
): CheckResult {
  const who = `the v${pair.version} paymaster ${pair.paymaster}`;
  if (last === null) {
    return {
      status: "degraded",
      detail: `${who}: stake unknown, getDepositInfo has not answered${failure ? ` (${failure})` : " yet"}`,
    };
  }
  const state = stakeState(last.info, minimums);
  const result = judged(who, state, last.info, minimums);
  if (failure === null) return result;
  const ageSec = Math.max(0, Math.round((nowMs - last.atMs) / 1000));
  return { ...result, detail: `${result.detail} (stale: read ${ageSec} s ago; the RPC does not answer now)` };
}

function judged(who: string, state: StakeState, info: StakeInfo, min: StakeMinimums): CheckResult {
  const stake = `${info.stakeWei} wei with an unstake delay of ${info.unstakeDelaySec} s`;
  const minimum = `the minimum ${min.minStakeWei} wei and ${min.minUnstakeDelaySec} s`;
  switch (state) {
    case "staked":
      return { status: "ok", detail: `${who} is staked: ${stake}, locked, at least ${minimum}` };
    case "below_minimum":
      return {
        status: "degraded",
        detail: `${who} is staked below the minimum: ${stake}, below ${minimum}; bundlers that require it refuse its operations`,
      };
    case "unlocking":
      return {
        status: "degraded",
        critical: true,
        detail: `${who} is unlocking its stake (withdrawable at block time ${info.withdrawTimeSec}): bundlers treat it as unstaked and refuse its operations; stake it again`,
      };
    case "unstaked":
      return {
        status: "degraded",
        critical: true,
        detail: `${who} is not staked: bundlers refuse its operations (it uses its storage in validation, ERC-7562); stake it`,
      };
  }
}

async function readStake(
  client: Pick<ChainClient, "readContract">,
  pair: LiveEntryPoint,
): Promise<StakeInfo> {
  const info = await client.readContract({
    address: pair.entryPoint,
    abi: entryPoint07Abi,
    functionName: "getDepositInfo",
    args: [pair.paymaster as Address],
  });
  return {
    staked: info.staked,
    stakeWei: info.stake,
    unstakeDelaySec: Number(info.unstakeDelaySec),
    withdrawTimeSec: Number(info.withdrawTime),
  };
}

/** Waits for `promise`, but at most `ms` (the promise goes on). */
async function within(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const patience = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([promise, patience]);
  clearTimeout(timer);
}
