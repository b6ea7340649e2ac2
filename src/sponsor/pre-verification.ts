/**
 * The ceiling on an operation's preVerificationGas. Pure: no I/O, no clock.
 *
 * Why a ceiling of its own. The EntryPoint charges preVerificationGas in full, whatever the
 * operation really cost the bundle, and pays it to the bundle's beneficiary. A player who is their
 * own bundler and beneficiary therefore moves every unused unit of a generous gas ceiling into
 * preVerificationGas and keeps it: with `estimatedGas` 1,000,000 for a mint that uses ~190,000,
 * the tank paid 10.1× what the bundle transaction cost (issue 19). What preVerificationGas exists
 * to pay for is bounded by the operation's size, so the ceiling is computed from that:
 *
 *   ceiling = 21,000                      the bundle transaction's base cost, as if the operation
 *                                         were alone in its bundle
 *           + 18,300                      the EntryPoint's work per operation outside every gas
 *                                         limit (the ERC-4337 reference bundler's per-operation
 *                                         figure: the handleOps loop, hashing, the event)
 *           + 16 × bytes + 4 × words      the operation's share of the transaction's calldata,
 *                                         every byte priced as non-zero (EIP-2028), plus the
 *                                         reference bundler's 4 gas per 32-byte word
 *           + 25,000                      only for an operation carrying an EIP-7702
 *                                         authorization: what EIP-7702 charges the bundle for it
 *
 * where `bytes` is the operation's ABI encoding inside handleOps: 14 fixed words (its offset in
 * the array, 9 head words, 4 length words) and its four byte strings, each padded to whole words.
 *
 * What is not known when the ceiling is signed comes from allowances:
 * - A call authorization (mode 0) is given before the operation exists: the callData is
 *   `execute(target, value, data)` with `data` up to {@link PreVerificationBounds.callDataBytes}
 *   bytes, the signature up to {@link PreVerificationBounds.signatureBytes}; the initCode is the
 *   one the request names (bound by the authorization).
 * - A whole-operation authorization (mode 1) sees everything but the signature.
 *
 * What this leaves to an adversarial bundler: the ceiling minus what the operation really costs
 * the bundle (a few thousand gas for an operation near the allowances), plus the EntryPoint's 10%
 * penalty on unused execution gas (callGasLimit and the paymaster's postOp limit), which also goes
 * to the beneficiary and which only an honest `estimatedGas` bounds. README, "What the allowlist
 * binds", gives the measured figure.
 */
import type { Hex } from "viem";

export interface PreVerificationBounds {
  /** Largest inner call data of a call authorization's `execute(target, value, data)`, in bytes. */
  callDataBytes: number;
  /** Largest account signature, in bytes (ECDSA 65, a Safe's 77, a passkey's a few hundred). */
  signatureBytes: number;
}

export const DEFAULT_PRE_VERIFICATION_BOUNDS: PreVerificationBounds = {
  callDataBytes: 256,
  signatureBytes: 160,
};

/**
 * EIP-7702's charge per authorization in the bundle transaction (PER_EMPTY_ACCOUNT_COST): an
 * operation that carries `eip7702Auth` makes the bundler add one, and pays for it here.
 */
const EIP7702_AUTHORIZATION_GAS = 25_000n;

const TX_BASE_GAS = 21_000n;
const PER_OPERATION_GAS = 18_300n;
const NON_ZERO_BYTE_GAS = 16n;
const PER_WORD_GAS = 4n;
/** The operation's offset in the ops array, its 9 head words, and the 4 length words of its byte strings. */
const FIXED_WORDS = 14;
/** `execute(address,uint256,bytes)`: selector, 3 head words and the data's length word. */
const EXECUTE_OVERHEAD_BYTES = 4 + 4 * 32;

/** The ceiling for an operation whose byte strings are this long (paymasterAndData included). */
export function preVerificationCeiling(sizes: {
  initCodeBytes: number;
  callDataBytes: number;
  paymasterAndDataBytes: number;
  signatureBytes: number;
}): bigint {
  const words =
    FIXED_WORDS +
    wordsOf(sizes.initCodeBytes) +
    wordsOf(sizes.callDataBytes) +
    wordsOf(sizes.paymasterAndDataBytes) +
    wordsOf(sizes.signatureBytes);
  return TX_BASE_GAS + PER_OPERATION_GAS + BigInt(words) * (32n * NON_ZERO_BYTE_GAS + PER_WORD_GAS);
}

/** Mode 0: the operation is not built yet; its callData and signature come from the allowances. */
export function callPreVerificationCeiling(
  initCode: Hex,
  paymasterAndDataBytes: number,
  bounds: PreVerificationBounds,
): bigint {
  return preVerificationCeiling({
    initCodeBytes: byteLength(initCode),
    callDataBytes: EXECUTE_OVERHEAD_BYTES + bounds.callDataBytes,
    paymasterAndDataBytes,
    signatureBytes: bounds.signatureBytes,
  });
}

/**
 * Mode 1: everything is known but the signature, which comes from the allowance; an operation
 * that carries an EIP-7702 authorization also pays for the one it adds to the bundle.
 */
export function operationPreVerificationCeiling(
  op: { initCode: Hex; callData: Hex; eip7702Authorization: boolean },
  paymasterAndDataBytes: number,
  bounds: PreVerificationBounds,
): bigint {
  const ceiling = preVerificationCeiling({
    initCodeBytes: byteLength(op.initCode),
    callDataBytes: byteLength(op.callData),
    paymasterAndDataBytes,
    signatureBytes: bounds.signatureBytes,
  });
  return op.eip7702Authorization ? ceiling + EIP7702_AUTHORIZATION_GAS : ceiling;
}

function wordsOf(bytes: number): number {
  return Math.ceil(bytes / 32);
}

function byteLength(hex: Hex): number {
  return Math.ceil((hex.length - 2) / 2);
}
