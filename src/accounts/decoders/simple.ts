/**
 * The `execute` / `executeBatch` family of eth-infinitism's SimpleAccount, which Coinbase Smart
 * Wallet, Solady's ERC4337 and Simple7702Account follow:
 *
 *   execute(address,uint256,bytes)                   0xb61d27f6  every one of them
 *   executeBatch(address[],bytes[])                  0x18dfb3c7  SimpleAccount, EntryPoint v0.6
 *   executeBatch(address[],uint256[],bytes[])        0x47e1da2a  SimpleAccount, EntryPoint v0.7
 *   executeBatch((address,uint256,bytes)[])          0x34fcd5be  SimpleAccount v0.8, Coinbase,
 *                                                                Solady, Simple7702Account
 *
 * The parameter lists are the accounts' own (as in permissionless's and viem's account helpers).
 */
import type { Hex } from "viem";
import type { DecodeResult } from "../decoded.ts";
import {
  declaredArrayLength,
  decodeCanonical,
  finishCalls,
  type RawCall,
  refuse,
  tooManyCalls,
} from "./shared.ts";

const executeParams = [
  { name: "dest", type: "address" },
  { name: "value", type: "uint256" },
  { name: "func", type: "bytes" },
] as const;

const batchArraysParams = [
  { name: "dest", type: "address[]" },
  { name: "func", type: "bytes[]" },
] as const;

const batchValueArraysParams = [
  { name: "dest", type: "address[]" },
  { name: "value", type: "uint256[]" },
  { name: "func", type: "bytes[]" },
] as const;

const batchCallsParams = [
  {
    name: "calls",
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "data", type: "bytes" },
    ],
  },
] as const;

export function decodeExecute(args: Hex, maxCalls: number): DecodeResult {
  const decoded = decodeCanonical(executeParams, args);
  if (!decoded) return notCanonical("execute(address,uint256,bytes)");
  const [target, valueWei, data] = decoded;
  return finishCalls("single_execute", [{ target, valueWei, data }], maxCalls);
}

/** SimpleAccount v0.6 has no values in its batch: every call sends 0. */
export function decodeBatchArrays(args: Hex, maxCalls: number): DecodeResult {
  const bounded = checkDeclaredLengths(args, [0, 1], maxCalls);
  if (bounded) return bounded;
  const decoded = decodeCanonical(batchArraysParams, args);
  if (!decoded) return notCanonical("executeBatch(address[],bytes[])");
  const [targets, datas] = decoded;
  if (targets.length !== datas.length) {
    return refuse("malformed_call_data", `${targets.length} targets but ${datas.length} call data`);
  }
  const raw = targets.map((target, i): RawCall => ({ target, valueWei: 0n, data: datas[i]! }));
  return finishCalls("batch_targets_datas", raw, maxCalls);
}

/**
 * SimpleAccount v0.7 (and Solady's older ERC4337) accept an empty `value` array and then send 0
 * with every call, to save calldata when no call carries value; any other length must match.
 */
export function decodeBatchValueArrays(args: Hex, maxCalls: number): DecodeResult {
  const bounded = checkDeclaredLengths(args, [0, 1, 2], maxCalls);
  if (bounded) return bounded;
  const decoded = decodeCanonical(batchValueArraysParams, args);
  if (!decoded) return notCanonical("executeBatch(address[],uint256[],bytes[])");
  const [targets, values, datas] = decoded;
  if (targets.length !== datas.length || (values.length !== 0 && values.length !== targets.length)) {
    return refuse(
      "malformed_call_data",
      `${targets.length} targets, ${values.length} values and ${datas.length} call data do not line up`,
    );
  }
  const raw = targets.map((target, i): RawCall => ({ target, valueWei: values[i] ?? 0n, data: datas[i]! }));
  return finishCalls("batch_targets_values_datas", raw, maxCalls);
}

export function decodeBatchCalls(args: Hex, maxCalls: number): DecodeResult {
  const bounded = checkDeclaredLengths(args, [0], maxCalls);
  if (bounded) return bounded;
  const decoded = decodeCanonical(batchCallsParams, args);
  if (!decoded) return notCanonical("executeBatch((address,uint256,bytes)[])");
  const raw = decoded[0].map(({ target, value, data }): RawCall => ({ target, valueWei: value, data }));
  return finishCalls("batch_calls", raw, maxCalls);
}

/**
 * Refuses before decoding when an array declares more elements than calls are allowed. The
 * first array holds the targets, so its length is the number of calls; another array over the
 * bound cannot match it and is malformed. Lengths that cannot be read are left to the decoder.
 */
function checkDeclaredLengths(
  args: Hex,
  slots: readonly number[],
  maxCalls: number,
): DecodeResult | undefined {
  for (const slot of slots) {
    const declared = declaredArrayLength(args, slot);
    if (declared === undefined || declared <= BigInt(maxCalls)) continue;
    return slot === 0
      ? tooManyCalls(maxCalls, declared)
      : refuse("malformed_call_data", `argument ${slot} declares ${declared} elements, more than the calls`);
  }
  return undefined;
}

function notCanonical(signature: string): DecodeResult {
  return refuse("malformed_call_data", `the arguments of ${signature} are not its canonical ABI encoding`);
}
