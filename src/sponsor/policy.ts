import type { ChainConfig } from "../config.ts";
import type { FeeCeilings } from "./pricing.ts";
import type { UnknownAccounts } from "./sender-code.ts";

/**
 * The pure part of authorize: given the request, the chain and the fee ceilings the chain's
 * market allows now, decide whether to go on, at what price and for which window. No I/O, no
 * clock of its own.
 */
export const MAX_ESTIMATED_GAS = 30_000_000n;

export type Quote =
  | {
      kind: "quote";
      /** Ceiling on the operation's total gas (every limit, the paymaster's included). */
      maxTotalGas: bigint;
      maxFeePerGasWei: bigint;
      maxPriorityFeePerGasWei: bigint;
      /** The reservation: the most the EntryPoint can take from the paymaster for this operation. */
      maxGasCostWei: bigint;
      validAfterSec: number;
      validUntilSec: number;
      paymaster: `0x${string}`;
    }
  | {
      kind: "denied";
      code: "unsupported_chain" | "chain_not_configured" | "fee_oracle_stale";
      detail: string;
    };

/**
 * The window an authorization is valid in, from now: validAfter backdated by the clock skew (the
 * latest block's timestamp trails the wall clock), never below 0; validUntil `ttlSec` ahead.
 * Every mode and the stub use this one.
 */
export function validityWindow(
  nowMs: number,
  ttlSec: number,
  clockSkewSec: number,
): { validAfterSec: number; validUntilSec: number } {
  const nowSec = Math.floor(nowMs / 1000);
  return { validAfterSec: Math.max(0, nowSec - clockSkewSec), validUntilSec: nowSec + ttlSec };
}

export function quote(input: {
  chain: ChainConfig | undefined;
  chainId: number;
  estimatedGas: bigint;
  ttlSec: number;
  nowMs: number;
  /** How far validAfter is backdated: the latest block's timestamp trails the wall clock. */
  clockSkewSec: number;
  /** The fee ceilings from the chain's fee oracle; null without a fresh reading. */
  fees: Pick<FeeCeilings, "maxFeePerGasWei" | "maxPriorityFeePerGasWei"> | null;
}): Quote {
  const { chain } = input;
  if (!chain?.active) {
    return {
      kind: "denied",
      code: "unsupported_chain",
      detail: `chain ${input.chainId} is not supported`,
    };
  }
  if (!chain.paymaster) {
    return {
      kind: "denied",
      code: "chain_not_configured",
      detail: `no paymaster is configured for chain ${chain.chainId}`,
    };
  }
  if (!input.fees) {
    return {
      kind: "denied",
      code: "fee_oracle_stale",
      detail: `no recent fee reading for chain ${chain.chainId}; retry shortly`,
    };
  }
  return {
    kind: "quote",
    maxTotalGas: input.estimatedGas,
    maxFeePerGasWei: input.fees.maxFeePerGasWei,
    maxPriorityFeePerGasWei: input.fees.maxPriorityFeePerGasWei,
    maxGasCostWei: input.estimatedGas * input.fees.maxFeePerGasWei,
    ...validityWindow(input.nowMs, input.ttlSec, input.clockSkewSec),
    paymaster: chain.paymaster,
  };
}

/** What sponsoring reads of a project on every request (cached, sponsor/deps.ts). */
export interface ProjectSponsorTerms {
  /** Shown to wallets by the ERC-7677 stub. */
  name: string;
  icon: string | null;
  ttlSec: number;
  unknownAccounts: UnknownAccounts;
}
