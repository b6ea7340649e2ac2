/**
 * Safe4337Module (v0.3): `executeUserOp(address to, uint256 value, bytes data, uint8 operation)`
 * (0x7bb37428) and `executeUserOpWithErrorString` (0x541d63c8, same arguments, and what
 * permissionless's toSafeSmartAccount sends). The module has the Safe run
 * `execTransactionFromModule(to, value, data, operation)`.
 *
 * Operation 0 is one call. Operation 1 is a delegatecall, which runs `to`'s code as the Safe and
 * can do anything the Safe can; it is decoded only in the one shape permissionless uses for
 * batches: a delegatecall into MultiSendCallOnly's `multiSend(bytes transactions)`, whose
 * packed transactions are each
 *
 *   operation (1) | to (20) | value (32) | data length (32) | data
 *
 * Trust: decoding the payload tells us what MultiSendCallOnly *would* call only if the code at
 * `to` is MultiSendCallOnly. We therefore accept only the canonical deployments listed below.
 * They are deployed deterministically (CREATE2 through the Safe singleton factory), so on any
 * chain each address holds that exact code or none; with none, the delegatecall runs nothing,
 * which executes fewer calls than we decoded, never others. MultiSendCallOnly itself reverts on
 * any inner delegatecall, and we refuse those before it has to.
 */
import type { Address, Hex } from "viem";
import type { DecodeResult } from "../decoded.ts";
import { byteLength, wordAt } from "./layout.ts";
import { decodeCanonical, finishCalls, type RawCall, refuse, tooManyCalls } from "./shared.ts";

/**
 * MultiSendCallOnly as deployed by Safe and used by permissionless 0.4 (lowercase): v1.4.1 and
 * v1.5.0, the Safe versions Safe4337Module supports.
 */
export const MULTI_SEND_CALL_ONLY_ADDRESSES: ReadonlySet<Address> = new Set<Address>([
  "0x9641d764fc13c8b624c04430c7356c1c7c8102e2", // v1.4.1
  "0xa83c336b20401af773b6219ba5027174338d1836", // v1.5.0
]);

const MULTI_SEND_SELECTOR = "0x8d80ff0a"; // multiSend(bytes)

const executeUserOpParams = [
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "data", type: "bytes" },
  { name: "operation", type: "uint8" },
] as const;

const multiSendParams = [{ name: "transactions", type: "bytes" }] as const;

const OPERATION_CALL = 0;
const OPERATION_DELEGATECALL = 1;

/** operation (1) + to (20) + value (32) + data length (32) */
const PACKED_HEADER_BYTES = 85;

const ZERO_ADDRESS_HEX = "0".repeat(40);

export function decodeSafeExecuteUserOp(args: Hex, maxCalls: number): DecodeResult {
  const decoded = decodeCanonical(executeUserOpParams, args);
  if (!decoded) {
    return refuse(
      "malformed_call_data",
      "the arguments of executeUserOp(address,uint256,bytes,uint8) are not its canonical ABI encoding",
    );
  }
  const [to, valueWei, data, operation] = decoded;
  if (operation === OPERATION_CALL) {
    return finishCalls("safe_call", [{ target: to, valueWei, data }], maxCalls);
  }
  if (operation !== OPERATION_DELEGATECALL) {
    return refuse("unsupported_call", `Safe operation ${operation} is neither a call nor a delegatecall`);
  }

  const target = to.toLowerCase() as Address;
  if (!MULTI_SEND_CALL_ONLY_ADDRESSES.has(target)) {
    return refuse(
      "unsupported_call",
      `delegatecall to ${target}, which is not a known MultiSendCallOnly deployment`,
    );
  }
  // A delegatecall carries no value of its own; a non-zero one would be ignored by the Safe, so
  // it is a sign of a client that means something else.
  if (valueWei !== 0n) {
    return refuse("unsupported_call", "a delegatecall into MultiSendCallOnly with a value");
  }
  if (data.slice(0, 10) !== MULTI_SEND_SELECTOR) {
    return refuse("unsupported_call", "a delegatecall into MultiSendCallOnly that is not multiSend(bytes)");
  }
  const multiSend = decodeCanonical(multiSendParams, `0x${data.slice(10)}`);
  if (!multiSend) {
    return refuse(
      "malformed_call_data",
      "the arguments of multiSend(bytes) are not its canonical ABI encoding",
    );
  }
  return decodePackedTransactions(multiSend[0], maxCalls);
}

/**
 * Reads the packed transactions exactly as MultiSendCallOnly walks them, but refuses what the
 * contract would tolerate: a truncated last entry (the contract reads past the end), inner
 * delegatecalls, and the zero address, which MultiSend v1.5.0 replaces with the Safe itself, so
 * the target would not be what it says.
 */
function decodePackedTransactions(transactions: Hex, maxCalls: number): DecodeResult {
  const size = byteLength(transactions);
  const raw: RawCall[] = [];
  let offset = 0;
  while (offset < size) {
    const index = raw.length;
    if (index === maxCalls) return tooManyCalls(maxCalls);
    const remaining = size - offset;
    if (remaining < PACKED_HEADER_BYTES) {
      return refuse("malformed_call_data", `MultiSend transaction ${index} is truncated`, index);
    }
    const at = 2 + 2 * offset;
    const operation = Number.parseInt(transactions.slice(at, at + 2), 16);
    if (operation !== OPERATION_CALL) {
      return refuse("unsupported_call", `MultiSend transaction ${index} has operation ${operation}`, index);
    }
    const toHex = transactions.slice(at + 2, at + 42);
    if (toHex === ZERO_ADDRESS_HEX) {
      return refuse("unsupported_call", `MultiSend transaction ${index} targets the zero address`, index);
    }
    const valueWei = wordAt(transactions, offset + 21)!;
    const dataLength = wordAt(transactions, offset + 53)!;
    if (dataLength > BigInt(remaining - PACKED_HEADER_BYTES)) {
      return refuse(
        "malformed_call_data",
        `MultiSend transaction ${index} declares more data than is left`,
        index,
      );
    }
    const dataStart = at + 2 * PACKED_HEADER_BYTES;
    const dataEnd = dataStart + 2 * Number(dataLength);
    raw.push({ target: `0x${toHex}`, valueWei, data: `0x${transactions.slice(dataStart, dataEnd)}` });
    offset += PACKED_HEADER_BYTES + Number(dataLength);
  }
  return finishCalls("safe_multisend", raw, maxCalls);
}
