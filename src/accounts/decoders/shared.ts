/**
 * What every decoder shares: strict ABI decoding, the cheap look at an array's declared length
 * before decoding it, and the checks every decoded call list goes through.
 */
import {
  type AbiParameter,
  type Address,
  BaseError,
  type DecodeAbiParametersReturnType,
  decodeAbiParameters,
  encodeAbiParameters,
  type Hex,
} from "viem";
import type { AccountEncoding, DecodedCall, DecodeRefusalCode, DecodeResult } from "../decoded.ts";
import { byteLength, hasCanonicalLayout, wordAt } from "./layout.ts";

export interface RawCall {
  target: Address;
  valueWei: bigint;
  data: Hex;
}

export function refuse(code: DecodeRefusalCode, detail: string, callIndex?: number): DecodeResult {
  return callIndex === undefined
    ? { kind: "refused", code, detail }
    : { kind: "refused", code, detail, callIndex };
}

/**
 * Decodes `args` (lowercase hex, no selector) and accepts only the canonical encoding: offsets
 * in canonical order with nothing after (checked before decoding, see layout.ts), then values
 * that re-encode to the same bytes. viem tolerates trailing bytes, dirty high bits in addresses
 * and small integers, non-zero padding and unusual offsets, and so do the hand-written assembly
 * decoders of several accounts. Each of those is a second way to write the same calls, and a
 * second way is where our reading and the account's can differ; requiring the canonical form
 * removes the question. Returns undefined for anything that does not decode or is not canonical.
 */
export function decodeCanonical<const params extends readonly AbiParameter[]>(
  params: params,
  args: Hex,
): DecodeAbiParametersReturnType<params> | undefined {
  if (!hasCanonicalLayout(params, args)) return undefined;
  try {
    const values = decodeAbiParameters(params, args);
    return encodeAbiParameters(params, values as never) === args ? values : undefined;
  } catch (error) {
    // viem reports every decoding and range failure as a BaseError; anything else is a bug here.
    if (error instanceof BaseError) return undefined;
    throw error;
  }
}

/**
 * The length a dynamic array declares, read from its head slot without decoding it: lets a
 * decoder refuse a batch of a million calls before materialising any of them. Undefined when
 * the offset or the length word falls outside `args`.
 */
export function declaredArrayLength(args: Hex, slot: number): bigint | undefined {
  const offset = wordAt(args, slot * 32);
  if (offset === undefined || offset > BigInt(byteLength(args))) return undefined;
  return wordAt(args, Number(offset));
}

/** `declared` is the count when it is known without decoding the rest. */
export function tooManyCalls(maxCalls: number, declared?: bigint): DecodeResult {
  const count = declared === undefined ? `more than ${maxCalls}` : `${declared}`;
  return refuse("too_many_calls", `the operation declares ${count} calls; at most ${maxCalls} are sponsored`);
}

/**
 * The checks every call list passes, whatever the encoding: not empty (nothing to allowlist),
 * within the bound, no call to the zero address, and every call starting with a selector. A call with less than 4 bytes of
 * data is a plain transfer or a fallback call, which a selector allowlist cannot describe.
 */
export function finishCalls(
  encoding: AccountEncoding,
  raw: readonly RawCall[],
  maxCalls: number,
): DecodeResult {
  if (raw.length === 0) {
    return refuse("unsupported_call", "the operation makes no calls: nothing to allowlist");
  }
  if (raw.length > maxCalls) return tooManyCalls(maxCalls, BigInt(raw.length));
  const calls: DecodedCall[] = [];
  for (const [index, call] of raw.entries()) {
    // ERC-7579 accounts (OpenZeppelin's, Solady's) run a call to address(0) on the account
    // itself: the allowlist cannot say what that call does, so it is never sponsored.
    if (BigInt(call.target) === 0n) {
      return refuse("unsupported_call", `call ${index} targets the zero address`, index);
    }
    if (call.data.length < 10) {
      return refuse(
        "unsupported_call",
        `call ${index} carries ${byteLength(call.data)} bytes of data, less than a selector: a plain transfer cannot be allowlisted by selector`,
        index,
      );
    }
    const data = call.data.toLowerCase() as Hex;
    calls.push({
      target: call.target.toLowerCase() as Address,
      valueWei: call.valueWei,
      data,
      selector: data.slice(0, 10) as Hex,
    });
  }
  return { kind: "calls", encoding, calls };
}
