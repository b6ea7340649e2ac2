import type { ChainConfig } from "../config.ts";

/**
 * The pure part of authorize: given the request and the chain, decide whether to go on and at
 * what price and window. No I/O, no clock of its own.
 */
export const MAX_ESTIMATED_GAS = 30_000_000n;

export type Quote =
  | {
      kind: "quote";
      maxGasCostWei: bigint;
      validAfterSec: number;
      validUntilSec: number;
      paymaster: `0x${string}`;
    }
  | { kind: "denied"; status: 400 | 503; code: "unsupported_chain" | "chain_not_configured"; detail: string };

export function quote(input: {
  chain: ChainConfig | undefined;
  chainId: number;
  estimatedGas: bigint;
  ttlSec: number;
  nowMs: number;
}): Quote {
  const { chain } = input;
  if (!chain?.active) {
    return {
      kind: "denied",
      status: 400,
      code: "unsupported_chain",
      detail: `chain ${input.chainId} is not supported`,
    };
  }
  if (!chain.paymaster) {
    return {
      kind: "denied",
      status: 503,
      code: "chain_not_configured",
      detail: `no paymaster is configured for chain ${chain.chainId}`,
    };
  }
  const validAfterSec = Math.floor(input.nowMs / 1000);
  return {
    kind: "quote",
    maxGasCostWei: input.estimatedGas * chain.maxFeePerGasWei,
    validAfterSec,
    validUntilSec: validAfterSec + input.ttlSec,
    paymaster: chain.paymaster,
  };
}
