/**
 * What decoding an account's `callData` yields (calls.ts decodes; decoders/ read each encoding).
 * Kept apart from calls.ts so that the decoders and the registry that dispatches to them do not
 * import each other.
 */
import type { Address, Hex } from "viem";

export interface DecodedCall {
  /** Lowercase. */
  target: Address;
  valueWei: bigint;
  /** Lowercase. */
  data: Hex;
  /** The first 4 bytes of `data`, lowercase. */
  selector: Hex;
}

/** The shape of `callData`, named by encoding: one selector can serve several account families. */
export type AccountEncoding =
  /** `execute(address,uint256,bytes)`: SimpleAccount, Coinbase Smart Wallet, Solady, Simple7702Account. */
  | "single_execute"
  /** `executeBatch(address[],bytes[])`: SimpleAccount for EntryPoint v0.6. */
  | "batch_targets_datas"
  /** `executeBatch(address[],uint256[],bytes[])`: SimpleAccount for EntryPoint v0.7. */
  | "batch_targets_values_datas"
  /** `executeBatch((address,uint256,bytes)[])`: SimpleAccount v0.8, Coinbase, Solady, Simple7702Account. */
  | "batch_calls"
  /** ERC-7579 `execute(bytes32,bytes)`, single call type: Kernel v3, Nexus, Safe7579. */
  | "erc7579_single"
  /** ERC-7579 `execute(bytes32,bytes)`, batch call type. */
  | "erc7579_batch"
  /** Safe4337Module `executeUserOp[WithErrorString]` with operation 0 (call). */
  | "safe_call"
  /** The same with operation 1: a delegatecall into a canonical MultiSendCallOnly. */
  | "safe_multisend";

export type DecodeRefusalCode =
  | "unsupported_account"
  | "unsupported_call"
  | "malformed_call_data"
  | "too_many_calls";

export type DecodeResult =
  | { kind: "calls"; encoding: AccountEncoding; calls: DecodedCall[] }
  | { kind: "refused"; code: DecodeRefusalCode; detail: string; callIndex?: number };
