/**
 * SponsorPaymaster's `paymasterAndData` (authorization version 3, the same for the EntryPoint v0.7
 * and v0.8 builds), encoded and decoded in one place. Byte offsets, integers big-endian:
 *
 *   [0:20)    paymaster
 *   [20:36)   paymasterVerificationGasLimit (uint128)
 *   [36:52)   paymasterPostOpGasLimit (uint128)
 *   [52]      mode: 0 = call authorization, 1 = whole-operation authorization
 *   [53:59)   validUntil (uint48)
 *   [59:65)   validAfter (uint48)
 *   [65:97)   authId (bytes32)
 *   [97:129)  senderCodeHash (bytes32; zero: not bound)
 *   mode 0:   [129:145) maxTotalGas, [145:161) maxPreVerificationGas, [161:177) maxFeePerGas,
 *             [177:193) maxPriorityFeePerGas (uint128 each)
 *   last 65   signature
 *
 * Mode 0 is 258 bytes, mode 1 is 194; the contract reverts on any other length or mode, and on
 * validUntil <= validAfter. The contract's NatSpec documents the same layout.
 */
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes, isAddress } from "viem";
import type { AuthorizationTerms, CallAuthorization, CallCeilings, PaymasterDomain } from "./digest.ts";
import type { PaymasterGasLimits } from "./gas.ts";

export type PaymasterMode = "call" | "operation";

/** The mode byte at offset 52. */
export const PAYMASTER_MODE_BYTE = { call: 0, operation: 1 } as const satisfies Record<PaymasterMode, number>;

/** The exact length of paymasterAndData in bytes, per mode. */
export const PAYMASTER_AND_DATA_SIZE = { call: 258, operation: 194 } as const satisfies Record<
  PaymasterMode,
  number
>;

/** Where the contract's own data starts: after the paymaster and the two gas limits the EntryPoint reads. */
export const PAYMASTER_DATA_OFFSET = 52;

const MODE_OFFSET = PAYMASTER_DATA_OFFSET;
const VALID_UNTIL_OFFSET = 53;
const VALID_AFTER_OFFSET = 59;
const AUTH_ID_OFFSET = 65;
const CODE_HASH_OFFSET = 97;
const CEILINGS_OFFSET = 129;
const SIGNATURE_SIZE = 65;

interface PaymasterAndDataBase extends AuthorizationTerms {
  paymaster: Address;
  gas: PaymasterGasLimits;
  /** 65 bytes: r ‖ s ‖ v. */
  signature: Hex;
}

export interface CallPaymasterAndData extends PaymasterAndDataBase, CallCeilings {
  mode: "call";
}

export interface OperationPaymasterAndData extends PaymasterAndDataBase {
  mode: "operation";
}

/** Everything paymasterAndData carries, by mode. */
export type PaymasterAndData = CallPaymasterAndData | OperationPaymasterAndData;

/**
 * Lowercase hex of the exact bytes the contract parses. Throws on a value the layout cannot hold
 * or the contract would refuse (a programming error, not an input to report).
 */
export function encodePaymasterAndData(data: PaymasterAndData): Hex {
  if (!isAddress(data.paymaster, { strict: false })) throw new Error(`not an address: ${data.paymaster}`);
  if (!(data.validUntilSec > data.validAfterSec)) throw new Error("validUntil must be after validAfter");
  const out = new Uint8Array(PAYMASTER_AND_DATA_SIZE[data.mode]);
  out.set(hexToBytes(data.paymaster), 0);
  writeUint(out, 20, 16, data.gas.verificationGasLimit);
  writeUint(out, 36, 16, data.gas.postOpGasLimit);
  out[MODE_OFFSET] = PAYMASTER_MODE_BYTE[data.mode];
  writeUint(out, VALID_UNTIL_OFFSET, 6, BigInt(data.validUntilSec));
  writeUint(out, VALID_AFTER_OFFSET, 6, BigInt(data.validAfterSec));
  writeFixed(out, AUTH_ID_OFFSET, 32, data.authId);
  writeFixed(out, CODE_HASH_OFFSET, 32, data.senderCodeHash);
  if (data.mode === "call") {
    writeUint(out, CEILINGS_OFFSET, 16, data.maxTotalGas);
    writeUint(out, CEILINGS_OFFSET + 16, 16, data.maxPreVerificationGas);
    writeUint(out, CEILINGS_OFFSET + 32, 16, data.maxFeePerGasWei);
    writeUint(out, CEILINGS_OFFSET + 48, 16, data.maxPriorityFeePerGasWei);
  }
  writeFixed(out, out.length - SIGNATURE_SIZE, SIGNATURE_SIZE, data.signature);
  return `0x${Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString("hex")}`;
}

/** paymasterAndData for a signed call authorization (sender, initCode, target and selector are not carried). */
export function encodeCallPaymasterAndData(
  domain: PaymasterDomain,
  gas: PaymasterGasLimits,
  auth: CallAuthorization,
  signature: Hex,
): Hex {
  return encodePaymasterAndData({
    mode: "call",
    paymaster: domain.paymaster,
    gas,
    validUntilSec: auth.validUntilSec,
    validAfterSec: auth.validAfterSec,
    authId: auth.authId,
    senderCodeHash: auth.senderCodeHash,
    maxTotalGas: auth.maxTotalGas,
    maxPreVerificationGas: auth.maxPreVerificationGas,
    maxFeePerGasWei: auth.maxFeePerGasWei,
    maxPriorityFeePerGasWei: auth.maxPriorityFeePerGasWei,
    signature,
  });
}

/** paymasterAndData for a signed whole-operation authorization. */
export function encodeOperationPaymasterAndData(
  domain: PaymasterDomain,
  gas: PaymasterGasLimits,
  terms: AuthorizationTerms,
  signature: Hex,
): Hex {
  return encodePaymasterAndData({
    mode: "operation",
    paymaster: domain.paymaster,
    gas,
    validUntilSec: terms.validUntilSec,
    validAfterSec: terms.validAfterSec,
    authId: terms.authId,
    senderCodeHash: terms.senderCodeHash,
    signature,
  });
}

/**
 * The fields of a paymasterAndData, or null when the contract would refuse to parse it (not hex,
 * a length that does not match its mode, an unknown mode, an empty window). A null is an answer
 * about untrusted input, so nothing here throws.
 */
export function decodePaymasterAndData(hex: Hex): PaymasterAndData | null {
  if (typeof hex !== "string" || !/^0x(?:[0-9a-fA-F]{2})*$/.test(hex)) return null;
  const byteLength = (hex.length - 2) / 2;
  if (byteLength <= MODE_OFFSET) return null;
  const bytes = hexToBytes(hex);
  const mode = modeOf(bytes[MODE_OFFSET]!);
  if (mode === null || byteLength !== PAYMASTER_AND_DATA_SIZE[mode]) return null;

  const validUntilSec = Number(readUint(bytes, VALID_UNTIL_OFFSET, 6));
  const validAfterSec = Number(readUint(bytes, VALID_AFTER_OFFSET, 6));
  if (validUntilSec <= validAfterSec) return null;
  const base: PaymasterAndDataBase = {
    paymaster: getAddress(bytesToHex(bytes.subarray(0, 20))),
    gas: { verificationGasLimit: readUint(bytes, 20, 16), postOpGasLimit: readUint(bytes, 36, 16) },
    validUntilSec,
    validAfterSec,
    authId: bytesToHex(bytes.subarray(AUTH_ID_OFFSET, CODE_HASH_OFFSET)),
    senderCodeHash: bytesToHex(bytes.subarray(CODE_HASH_OFFSET, CEILINGS_OFFSET)),
    signature: bytesToHex(bytes.subarray(byteLength - SIGNATURE_SIZE)),
  };
  if (mode === "operation") return { mode, ...base };
  return {
    mode,
    ...base,
    maxTotalGas: readUint(bytes, CEILINGS_OFFSET, 16),
    maxPreVerificationGas: readUint(bytes, CEILINGS_OFFSET + 16, 16),
    maxFeePerGasWei: readUint(bytes, CEILINGS_OFFSET + 32, 16),
    maxPriorityFeePerGasWei: readUint(bytes, CEILINGS_OFFSET + 48, 16),
  };
}

/**
 * A 65-byte signature no key produced, shaped so the contract's check costs what a real one costs:
 * v is 28 and s is in the lower half of the curve order, so OpenZeppelin's ECDSA.tryRecover gets
 * as far as the ecrecover precompile (3,000 gas) and reports a mismatch instead of stopping early
 * or throwing. Every byte is non-zero, so calldata pricing never underestimates the real one.
 */
export const STUB_SIGNATURE: Hex = `0x${"fe".repeat(31)}01${"7a".repeat(32)}1c`;

const STUB_AUTH_ID: Hex = `0x${"5a".repeat(32)}`;
const STUB_CODE_HASH: Hex = `0x${"c5".repeat(32)}`;
/** senderCodeHash when the authorization binds no code. */
export const ZERO_HASH: Hex = `0x${"0".repeat(64)}`;
const UINT128_MAX = 2n ** 128n - 1n;

export interface StubParams {
  paymaster: Address;
  mode: PaymasterMode;
  gas: PaymasterGasLimits;
  validUntilSec: number;
  validAfterSec: number;
}

/**
 * paymasterAndData for gas estimation (ERC-7677 pm_getPaymasterStubData): the final length and
 * mode, a valid window, a code hash no code has and the STUB_SIGNATURE. Under simulation the contract reports a signature
 * failure (AA34 territory), never a revert, so a bundler's estimation with generous limits goes
 * through. Its authId is one the service never issues (ids are random), so it is never used up.
 * The call ceilings are the largest values the layout holds, so they never bind.
 */
export function stubPaymasterAndData(p: StubParams): Hex {
  const terms = {
    paymaster: p.paymaster,
    gas: p.gas,
    validUntilSec: p.validUntilSec,
    validAfterSec: p.validAfterSec,
    authId: STUB_AUTH_ID,
    // Non-zero like a real one, so calldata pricing and the code check cost what they will.
    senderCodeHash: STUB_CODE_HASH,
    signature: STUB_SIGNATURE,
  };
  if (p.mode === "operation") return encodePaymasterAndData({ mode: "operation", ...terms });
  return encodePaymasterAndData({
    mode: "call",
    ...terms,
    maxTotalGas: UINT128_MAX,
    maxPreVerificationGas: UINT128_MAX,
    maxFeePerGasWei: UINT128_MAX,
    maxPriorityFeePerGasWei: UINT128_MAX,
  });
}

function modeOf(byte: number): PaymasterMode | null {
  if (byte === PAYMASTER_MODE_BYTE.call) return "call";
  if (byte === PAYMASTER_MODE_BYTE.operation) return "operation";
  return null;
}

function writeUint(out: Uint8Array, offset: number, size: number, value: bigint) {
  if (value < 0n || value >= 1n << BigInt(size * 8))
    throw new Error(`${value} does not fit in ${size} bytes`);
  let rest = value;
  for (let i = offset + size - 1; i >= offset; i--) {
    out[i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
}

function readUint(bytes: Uint8Array, offset: number, size: number): bigint {
  let value = 0n;
  for (let i = offset; i < offset + size; i++) value = (value << 8n) | BigInt(bytes[i]!);
  return value;
}

/** Node's hex codec, checked first: on the authorize path, four times per request. */
function writeFixed(out: Uint8Array, offset: number, size: number, value: Hex) {
  if (typeof value !== "string" || value.length !== 2 + 2 * size || !HEX.test(value)) {
    throw new Error(`expected ${size} bytes of hex, got ${String(value).slice(0, 80)}`);
  }
  out.set(Buffer.from(value.slice(2), "hex"), offset);
}

const HEX = /^0x[0-9a-fA-F]*$/;
