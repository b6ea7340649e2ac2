/**
 * Whether a chain's paymasters can pay what the service has promised. Every sponsored operation
 * is paid from its paymaster's deposit in the EntryPoint, never from the gas tanks (those are
 * bookkeeping): so the deposits must cover the reservations already signed (operations that may
 * land at any moment) and, to keep authorizing, the tanks' balances.
 *
 * - short (the serious case): one paymaster's deposit is below the open reservations signed for
 *   it. Operations already authorized can fail on chain (AA31) and bundlers will refuse them.
 * - low: the chain's deposits together are below the open reservations plus `warnPercent` % of
 *   the tanks (PAYMASTER_DEPOSIT_WARN_PERCENT): a warning before it runs short, time to top up.
 * - unknown: a deposit could not be read (the RPC is away).
 *
 * Each chain is compared with its own tanks only (migration 035: a tank per project and chain,
 * TANKS_ON_CHAIN_SQL) and the open reservations signed on it.
 */
import type { Address } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import type { ChainClient } from "../chains/rpc.ts";
import type { ChainConfig } from "../config.ts";
import { type EntryPointVersion, type LiveEntryPoint, liveEntryPoints } from "../config.ts";
import type { Queryable } from "../db/db.ts";
import { TANKS_ON_CHAIN_SQL } from "../ledger/ledger.ts";

export type CoverageState = "ok" | "low" | "short" | "unknown";

export interface PaymasterFunds {
  version: EntryPointVersion;
  paymaster: Address;
  /** Its deposit in its EntryPoint; null when it could not be read. */
  depositWei: bigint | null;
  /** Open reservations of authorizations signed for this paymaster. */
  reservedWei: bigint;
}

export interface DepositCoverage {
  state: CoverageState;
  /** The live paymasters' deposits added up; null when one could not be read. */
  depositWei: bigint | null;
  tanksWei: bigint;
  /** Every open reservation on the chain (including any of a paymaster no longer configured). */
  reservedWei: bigint;
  /** Below this the state is "low": open reservations + warnPercent % of the tanks. */
  warnBelowWei: bigint;
  warnPercent: number;
  paymasters: PaymasterFunds[];
  detail: string;
}

/** Pure: the coverage of a chain's deposits, from what was read. */
export function depositCoverage(input: {
  paymasters: PaymasterFunds[];
  tanksWei: bigint;
  reservedWei: bigint;
  warnPercent: number;
}): DepositCoverage {
  const { paymasters, tanksWei, reservedWei, warnPercent } = input;
  const warnBelowWei = reservedWei + (tanksWei * BigInt(warnPercent)) / 100n;
  const base = { tanksWei, reservedWei, warnBelowWei, warnPercent, paymasters };
  const unread = paymasters.filter((p) => p.depositWei === null);
  if (unread.length > 0) {
    const which = unread.map((p) => `v${p.version}`).join(" and ");
    return {
      ...base,
      state: "unknown",
      depositWei: null,
      detail: `the ${which} paymaster's EntryPoint deposit could not be read`,
    };
  }
  const depositWei = paymasters.reduce((sum, p) => sum + p.depositWei!, 0n);
  const short = paymasters.filter((p) => p.depositWei! < p.reservedWei);
  if (short.length > 0) {
    const parts = short.map(
      (p) =>
        `the v${p.version} paymaster's EntryPoint deposit (${p.depositWei} wei) is below its open reservations (${p.reservedWei} wei)`,
    );
    return {
      ...base,
      state: "short",
      depositWei,
      detail: `deposit short: ${parts.join("; ")}: operations already authorized can fail on chain (AA31); deposit now`,
    };
  }
  const terms = `open reservations ${reservedWei} wei + ${warnPercent}% of the gas tanks' ${tanksWei} wei = ${warnBelowWei} wei`;
  if (depositWei < warnBelowWei) {
    return {
      ...base,
      state: "low",
      depositWei,
      detail: `deposit low: the paymasters' EntryPoint deposits (${depositWei} wei) are below ${terms}; top them up before they run short`,
    };
  }
  return {
    ...base,
    state: "ok",
    depositWei,
    detail: `the paymasters' EntryPoint deposits (${depositWei} wei) cover ${terms}`,
  };
}

/** Reads a chain's deposits (live, over RPC) and what the tanks promise (the database), then judges. */
export async function readDepositCoverage(
  db: Queryable,
  client: ChainClient,
  chain: ChainConfig,
  warnPercent: number,
): Promise<DepositCoverage> {
  const live = liveEntryPoints(chain);
  const [promised, deposits] = await Promise.all([
    promisedOnChain(db, chain.chainId),
    Promise.all(live.map((pair) => entryPointDeposit(client, pair))),
  ]);
  return depositCoverage({
    paymasters: live.map((pair, i) => ({
      version: pair.version,
      paymaster: pair.paymaster,
      depositWei: deposits[i]!,
      reservedWei: promised.reservedByPaymaster.get(pair.paymaster.toLowerCase()) ?? 0n,
    })),
    tanksWei: promised.tanksWei,
    reservedWei: promised.reservedWei,
    warnPercent,
  });
}

async function promisedOnChain(db: Queryable, chainId: number) {
  const [tanks, reserved] = await Promise.all([
    db.query<{ tanks: string }>(`SELECT (${TANKS_ON_CHAIN_SQL})::text AS tanks`, [chainId]),
    // The running sums of migration 054, a row per project: the pending rows themselves are as
    // many as the authorizations of the last minutes, and every instance asks every few seconds.
    db.query<{ paymaster: string; reserved: string }>(
      `SELECT paymaster, sum(reserved_wei)::text AS reserved FROM open_reservations
       WHERE chain_id = $1 GROUP BY paymaster`,
      [chainId],
    ),
  ]);
  const reservedByPaymaster = new Map<string, bigint>();
  let reservedWei = 0n;
  for (const row of reserved) {
    const wei = BigInt(row.reserved);
    reservedWei += wei;
    if (row.paymaster) reservedByPaymaster.set(row.paymaster, wei);
  }
  return { tanksWei: BigInt(tanks[0]!.tanks), reservedWei, reservedByPaymaster };
}

async function entryPointDeposit(client: ChainClient, pair: LiveEntryPoint): Promise<bigint | null> {
  try {
    return await client.readContract({
      address: pair.entryPoint,
      abi: entryPoint07Abi,
      functionName: "balanceOf",
      args: [pair.paymaster],
    });
  } catch {
    return null;
  }
}
