/**
 * ERC-7579 `execute(bytes32 mode, bytes executionCalldata)` (0xe9ae5c53): Kernel v3, Nexus and
 * Safe7579. The mode's 32 bytes are
 *
 *   [0]       call type: 0x00 single, 0x01 batch, 0xfe static, 0xff delegatecall
 *   [1]       exec type: 0x00 revert on failure, 0x01 try (failures are reported, not reverted)
 *   [2:6)     unused
 *   [6:10)    mode selector
 *   [10:32)   mode payload
 *
 * Single: executionCalldata = abi.encodePacked(target (20), value (32), callData).
 * Batch:  executionCalldata = abi.encode((address target, uint256 value, bytes callData)[]).
 *
 * Both exec types run the same calls, so both are accepted. A delegatecall runs arbitrary code
 * as the account and a static call is a different kind of call from the one allowlisted, so
 * both are refused. A non-zero mode selector or payload asks the account for behaviour beyond
 * the standard modes (ERC-7821's opData batches, for one), which we cannot vouch for: refused,
 * as are non-zero unused bytes.
 */
import type { Hex } from "viem";
import type { DecodeResult } from "../decoded.ts";
import { byteLength } from "./layout.ts";
import {
  declaredArrayLength,
  decodeCanonical,
  finishCalls,
  type RawCall,
  refuse,
  tooManyCalls,
} from "./shared.ts";

const executeParams = [
  { name: "mode", type: "bytes32" },
  { name: "executionCalldata", type: "bytes" },
] as const;

const executionBatchParams = [
  {
    name: "executions",
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "callData", type: "bytes" },
    ],
  },
] as const;

const CALL_TYPE_SINGLE = "00";
const CALL_TYPE_BATCH = "01";
const EXEC_TYPES = new Set(["00", "01"]);
const REFUSED_CALL_TYPES = new Map([
  ["fe", "static call"],
  ["ff", "delegatecall"],
]);

/** Bytes 2 to 31 of the mode, which must all be zero: unused, mode selector and payload. */
const ZERO_MODE_TAIL = "0".repeat(60);

/** 20 bytes of target and 32 of value precede a single call's data. */
const SINGLE_HEADER_BYTES = 52;

export function decodeErc7579Execute(args: Hex, maxCalls: number): DecodeResult {
  // The outer re-encoding check also covers the packed single form: trailing bytes or dirty
  // padding after executionCalldata would make it fail. Inside, every string of 52 bytes or
  // more is exactly one (target, value, callData), so the packed form has nothing to check.
  const decoded = decodeCanonical(executeParams, args);
  if (!decoded) {
    return refuse(
      "malformed_call_data",
      "the arguments of execute(bytes32,bytes) are not its canonical ABI encoding",
    );
  }
  const [mode, executionCalldata] = decoded;
  const refusal = modeRefusal(mode);
  if (refusal) return refuse("unsupported_call", refusal);
  return mode.slice(2, 4) === CALL_TYPE_SINGLE
    ? decodeSingle(executionCalldata, maxCalls)
    : decodeBatch(executionCalldata, maxCalls);
}

/** Why a mode is refused, or undefined for a default single or batch call of either exec type. */
function modeRefusal(mode: Hex): string | undefined {
  const callType = mode.slice(2, 4);
  const execType = mode.slice(4, 6);
  const refusedCallType = REFUSED_CALL_TYPES.get(callType);
  if (refusedCallType) return `ERC-7579 call type 0x${callType} (${refusedCallType})`;
  if (callType !== CALL_TYPE_SINGLE && callType !== CALL_TYPE_BATCH) {
    return `unknown ERC-7579 call type 0x${callType}`;
  }
  if (!EXEC_TYPES.has(execType)) return `unknown ERC-7579 exec type 0x${execType}`;
  if (mode.slice(6) !== ZERO_MODE_TAIL) {
    return `ERC-7579 mode ${mode} has a non-default mode selector or payload`;
  }
  return undefined;
}

function decodeSingle(executionCalldata: Hex, maxCalls: number): DecodeResult {
  if (byteLength(executionCalldata) < SINGLE_HEADER_BYTES) {
    return refuse(
      "malformed_call_data",
      `a single ERC-7579 execution is ${byteLength(executionCalldata)} bytes, shorter than target and value`,
    );
  }
  const call: RawCall = {
    target: `0x${executionCalldata.slice(2, 42)}`,
    valueWei: BigInt(`0x${executionCalldata.slice(42, 106)}`),
    data: `0x${executionCalldata.slice(106)}`,
  };
  return finishCalls("erc7579_single", [call], maxCalls);
}

function decodeBatch(executionCalldata: Hex, maxCalls: number): DecodeResult {
  const declared = declaredArrayLength(executionCalldata, 0);
  if (declared !== undefined && declared > BigInt(maxCalls)) return tooManyCalls(maxCalls, declared);
  const decoded = decodeCanonical(executionBatchParams, executionCalldata);
  if (!decoded) {
    return refuse("malformed_call_data", "the ERC-7579 batch is not a canonical abi.encode(Execution[])");
  }
  const raw = decoded[0].map(
    ({ target, value, callData }): RawCall => ({ target, valueWei: value, data: callData }),
  );
  return finishCalls("erc7579_batch", raw, maxCalls);
}
