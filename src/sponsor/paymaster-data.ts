import { type Address, concatHex, type Hex, hashTypedData, numberToHex, size } from "viem";

/**
 * The EIP-712 shape the SponsorPaymaster contract verifies (DESIGN.md §1). The service signs
 * exactly this; the contract recomputes it on chain. Keep both sides in lockstep.
 */
export const sponsorshipTypes = {
  Sponsorship: [
    { name: "sender", type: "address" },
    { name: "target", type: "address" },
    { name: "selector", type: "bytes4" },
    { name: "maxGasCost", type: "uint256" },
    { name: "validUntil", type: "uint48" },
    { name: "validAfter", type: "uint48" },
    { name: "authId", type: "bytes32" },
  ],
} as const;

export interface Sponsorship {
  sender: Address;
  target: Address;
  selector: Hex;
  maxGasCostWei: bigint;
  validUntilSec: number;
  validAfterSec: number;
  authId: Hex;
}

export interface PaymasterDomain {
  chainId: number;
  paymaster: Address;
}

export function sponsorshipTypedData(domain: PaymasterDomain, s: Sponsorship) {
  return {
    domain: {
      name: "SponsorPaymaster",
      version: "1",
      chainId: domain.chainId,
      verifyingContract: domain.paymaster,
    },
    types: sponsorshipTypes,
    primaryType: "Sponsorship" as const,
    message: {
      sender: s.sender,
      target: s.target,
      selector: s.selector,
      maxGasCost: s.maxGasCostWei,
      validUntil: s.validUntilSec,
      validAfter: s.validAfterSec,
      authId: s.authId,
    },
  };
}

/** The 32-byte digest the signer signs and the contract's `getHash` returns. */
export function sponsorshipDigest(domain: PaymasterDomain, s: Sponsorship): Hex {
  return hashTypedData(sponsorshipTypedData(domain, s));
}

export interface PaymasterGasLimits {
  verificationGasLimit: bigint;
  postOpGasLimit: bigint;
}

/**
 * v0.7 `paymasterAndData`: paymaster (20) | verificationGasLimit (16) | postOpGasLimit (16)
 * | maxGasCost (16) | validUntil (6) | validAfter (6) | authId (32) | signature (65).
 */
export function encodePaymasterAndData(
  domain: PaymasterDomain,
  gas: PaymasterGasLimits,
  s: Sponsorship,
  signature: Hex,
): Hex {
  if (size(signature) !== 65) throw new Error("signature must be 65 bytes");
  return concatHex([
    domain.paymaster,
    numberToHex(gas.verificationGasLimit, { size: 16 }),
    numberToHex(gas.postOpGasLimit, { size: 16 }),
    numberToHex(s.maxGasCostWei, { size: 16 }),
    numberToHex(s.validUntilSec, { size: 6 }),
    numberToHex(s.validAfterSec, { size: 6 }),
    s.authId,
    signature,
  ]);
}

/** Everything after the paymaster address and the two gas limits (the contract's own data). */
export const PAYMASTER_DATA_OFFSET = 52;
