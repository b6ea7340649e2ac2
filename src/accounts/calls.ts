/**
 * What a user operation will do, read from its `callData`: the list of calls the smart account
 * makes, so that sponsorship can allowlist every one of them (target and selector) instead of
 * guessing from the first. Pure: no I/O, no clock.
 *
 * Only encodings we can decode exactly are accepted; each is recognised by its 4-byte selector
 * and must be the canonical ABI encoding (decoded, re-encoded and compared), so the calls we
 * report are the calls the account's own decoder would see. Anything else is refused with a
 * stable code, never guessed. Nested account calls (an account calling another account's
 * `execute`) are reported as they are, not unwrapped.
 */
import assert from "node:assert/strict";
import type { Hex } from "viem";
import type { DecodeResult } from "./decoded.ts";
import { decodeErc7579Execute } from "./decoders/erc7579.ts";
import { decodeSafeExecuteUserOp } from "./decoders/safe.ts";
import {
  decodeBatchArrays,
  decodeBatchCalls,
  decodeBatchValueArrays,
  decodeExecute,
} from "./decoders/simple.ts";

export type { AccountEncoding, DecodedCall, DecodeRefusalCode, DecodeResult } from "./decoded.ts";

export interface DecodeOptions {
  /** The most calls one operation may make; default {@link DEFAULT_MAX_CALLS}. */
  maxCalls?: number;
  /** The largest `callData` decoded, in bytes; default {@link MAX_CALL_DATA_BYTES}. */
  maxCallDataBytes?: number;
}

export const DEFAULT_MAX_CALLS = 64;

/**
 * Geth's transaction pool drops transactions over 128 KiB, so a bundle carrying a larger
 * operation cannot propagate; nothing bigger is worth decoding.
 */
export const MAX_CALL_DATA_BYTES = 128 * 1024;

/** The entry points decoded, by selector. */
export const ACCOUNT_SELECTORS = {
  execute: "0xb61d27f6",
  executeBatchArrays: "0x18dfb3c7",
  executeBatchValueArrays: "0x47e1da2a",
  executeBatchCalls: "0x34fcd5be",
  erc7579Execute: "0xe9ae5c53",
  safeExecuteUserOp: "0x7bb37428",
  safeExecuteUserOpWithErrorString: "0x541d63c8",
} as const satisfies Record<string, Hex>;

type Decoder = (args: Hex, maxCalls: number) => DecodeResult;

const DECODERS = new Map<string, Decoder>([
  [ACCOUNT_SELECTORS.execute, decodeExecute],
  [ACCOUNT_SELECTORS.executeBatchArrays, decodeBatchArrays],
  [ACCOUNT_SELECTORS.executeBatchValueArrays, decodeBatchValueArrays],
  [ACCOUNT_SELECTORS.executeBatchCalls, decodeBatchCalls],
  [ACCOUNT_SELECTORS.erc7579Execute, decodeErc7579Execute],
  [ACCOUNT_SELECTORS.safeExecuteUserOp, decodeSafeExecuteUserOp],
  [ACCOUNT_SELECTORS.safeExecuteUserOpWithErrorString, decodeSafeExecuteUserOp],
]);

/**
 * Entry points that clients do send but that we refuse on purpose; naming them turns a bare
 * "unknown selector" into a reason.
 */
const KNOWN_REFUSALS = new Map<string, string>([
  [
    "0xd691c964",
    "executeFromExecutor(bytes32,bytes) is the entry point of ERC-7579 executor modules, not of user operations",
  ],
  [
    "0x8dd7712f",
    "executeUserOp(PackedUserOperation,bytes32) hands the whole operation to the account, whose inner call cannot be read from callData alone",
  ],
  [
    "0x2c2abd1e",
    "executeWithoutChainIdValidation(bytes[]) is Coinbase Smart Wallet's cross-chain replayable self-call (owner changes, upgrades)",
  ],
  [
    "0xd9ed0e8f",
    "setupSafe(InitData) is the Safe7579 launchpad's first operation; sponsor the calls once the Safe is deployed",
  ],
  ["0x51945447", "execute(address,uint256,bytes,uint8) is Kernel v2, which is not supported"],
]);

const HEX_BYTES = /^0x(?:[0-9a-fA-F]{2})*$/;

export function decodeCalls(callData: Hex, options: DecodeOptions = {}): DecodeResult {
  const maxCalls = options.maxCalls ?? DEFAULT_MAX_CALLS;
  const maxCallDataBytes = options.maxCallDataBytes ?? MAX_CALL_DATA_BYTES;
  assert.ok(Number.isSafeInteger(maxCalls) && maxCalls >= 1, "maxCalls must be a positive integer");
  assert.ok(Number.isSafeInteger(maxCallDataBytes) && maxCallDataBytes >= 4, "maxCallDataBytes must be >= 4");

  // Callers pass what a client sent; check the shape and the size before reading any of it.
  if (typeof callData !== "string") return malformed("call data is not a hex string");
  if (callData.length > 2 + 2 * maxCallDataBytes) {
    return malformed(`call data is over ${maxCallDataBytes} bytes`);
  }
  if (!HEX_BYTES.test(callData)) return malformed("call data is not 0x-prefixed hex of whole bytes");
  if (callData.length < 10) return malformed("call data is shorter than a 4-byte selector");

  const hex = callData.toLowerCase() as Hex;
  const selector = hex.slice(0, 10);
  const decoder = DECODERS.get(selector);
  if (decoder) return decoder(`0x${hex.slice(10)}`, maxCalls);
  return {
    kind: "refused",
    code: "unsupported_account",
    detail: KNOWN_REFUSALS.get(selector) ?? `no supported account entry point has selector ${selector}`,
  };
}

function malformed(detail: string): DecodeResult {
  return { kind: "refused", code: "malformed_call_data", detail };
}
