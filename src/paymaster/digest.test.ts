import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type Address, bytesToHex, concatHex, type Hex, hashTypedData, numberToHex } from "viem";
import {
  type CallAuthorization,
  callSponsorshipDigest,
  callSponsorshipTypedData,
  operationSponsorshipDigest,
  operationSponsorshipTypedData,
  type SponsoredOperation,
} from "./digest.ts";

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => bytesToHex(b));
const address = bytes(20).map((a) => a as Address);
const uint128 = fc.bigInt(0n, 2n ** 128n - 1n);
const uint48 = fc.integer({ min: 0, max: 2 ** 48 - 1 });
const domain = fc.record({ chainId: fc.integer({ min: 1, max: 2 ** 31 }), paymaster: address });
const gas = fc.record({ verificationGasLimit: uint128, postOpGasLimit: uint128 });
const terms = fc.record({ validUntilSec: uint48, validAfterSec: uint48, authId: bytes(32) });

const callAuthorization: fc.Arbitrary<CallAuthorization> = fc.record({
  sender: address,
  target: address,
  selector: bytes(4),
  maxTotalGas: uint128,
  maxFeePerGasWei: uint128,
  maxPriorityFeePerGasWei: uint128,
  validUntilSec: uint48,
  validAfterSec: uint48,
  authId: bytes(32),
});

const pair = fc
  .tuple(uint128, uint128)
  .map(([hi, lo]) => concatHex([numberToHex(hi, { size: 16 }), numberToHex(lo, { size: 16 })]));
const operation: fc.Arbitrary<SponsoredOperation> = fc.record({
  sender: address,
  nonce: fc.bigInt(0n, 2n ** 256n - 1n),
  initCode: fc.oneof(
    fc.constant("0x" as Hex),
    fc.uint8Array({ maxLength: 300 }).map((b) => bytesToHex(b)),
  ),
  callData: fc.uint8Array({ maxLength: 600 }).map((b) => bytesToHex(b)),
  accountGasLimits: pair,
  preVerificationGas: uint128,
  gasFees: pair,
});

/** A different value of the same size: the last bit flipped. */
const flip = (n: number) => (n % 2 === 0 ? n + 1 : n - 1);
const flipHex = (hex: Hex) =>
  `${hex.slice(0, -1)}${(Number.parseInt(hex.slice(-1), 16) ^ 1).toString(16)}` as Hex;

describe("callSponsorshipDigest", () => {
  it("equals viem's hashTypedData of the CallSponsorship typed data for any input", () => {
    fc.assert(
      fc.property(domain, callAuthorization, gas, (d, auth, g) => {
        assert.equal(callSponsorshipDigest(d, g, auth), hashTypedData(callSponsorshipTypedData(d, g, auth)));
      }),
      { numRuns: 300 },
    );
  });

  it("changes when any signed field changes (nothing is left out of the encoding)", () => {
    fc.assert(
      fc.property(domain, callAuthorization, gas, (d, auth, g) => {
        const base = callSponsorshipDigest(d, g, auth);
        const variants: [string, Hex][] = [
          ["sender", callSponsorshipDigest(d, g, { ...auth, sender: flipHex(auth.sender) })],
          ["target", callSponsorshipDigest(d, g, { ...auth, target: flipHex(auth.target) })],
          ["selector", callSponsorshipDigest(d, g, { ...auth, selector: flipHex(auth.selector) })],
          ["authId", callSponsorshipDigest(d, g, { ...auth, authId: flipHex(auth.authId) })],
          ["paymaster", callSponsorshipDigest({ ...d, paymaster: flipHex(d.paymaster) }, g, auth)],
          ["chainId", callSponsorshipDigest({ ...d, chainId: d.chainId + 1 }, g, auth)],
          ["maxTotalGas", callSponsorshipDigest(d, g, { ...auth, maxTotalGas: auth.maxTotalGas ^ 1n })],
          ["maxFee", callSponsorshipDigest(d, g, { ...auth, maxFeePerGasWei: auth.maxFeePerGasWei ^ 1n })],
          [
            "maxPriorityFee",
            callSponsorshipDigest(d, g, {
              ...auth,
              maxPriorityFeePerGasWei: auth.maxPriorityFeePerGasWei ^ 1n,
            }),
          ],
          [
            "pmVerification",
            callSponsorshipDigest(d, { ...g, verificationGasLimit: g.verificationGasLimit ^ 1n }, auth),
          ],
          ["pmPostOp", callSponsorshipDigest(d, { ...g, postOpGasLimit: g.postOpGasLimit ^ 1n }, auth)],
          ["validUntil", callSponsorshipDigest(d, g, { ...auth, validUntilSec: flip(auth.validUntilSec) })],
          ["validAfter", callSponsorshipDigest(d, g, { ...auth, validAfterSec: flip(auth.validAfterSec) })],
        ];
        for (const [name, digest] of variants) assert.notEqual(digest, base, name);
      }),
      { numRuns: 50 },
    );
  });

  it("refuses values the contract's types cannot hold instead of hashing something else", () => {
    const d = { chainId: 1, paymaster: `0x${"11".repeat(20)}` as Address };
    const auth: CallAuthorization = {
      sender: `0x${"22".repeat(20)}`,
      target: `0x${"33".repeat(20)}`,
      selector: "0xa0712d68",
      maxTotalGas: 1n,
      maxFeePerGasWei: 1n,
      maxPriorityFeePerGasWei: 1n,
      validUntilSec: 2,
      validAfterSec: 1,
      authId: `0x${"44".repeat(32)}`,
    };
    const g = { verificationGasLimit: 1n, postOpGasLimit: 0n };
    assert.throws(() => callSponsorshipDigest(d, g, { ...auth, selector: "0xa0712d" }));
    assert.throws(() => callSponsorshipDigest(d, g, { ...auth, sender: "0x22" }));
    assert.throws(() => callSponsorshipDigest(d, g, { ...auth, validUntilSec: 2 ** 48 }));
    assert.throws(() => callSponsorshipDigest(d, g, { ...auth, authId: "0x44" }));
  });
});

describe("operationSponsorshipDigest", () => {
  it("equals viem's hashTypedData of the OperationSponsorship typed data for any operation", () => {
    fc.assert(
      fc.property(domain, operation, terms, gas, (d, op, t, g) => {
        assert.equal(
          operationSponsorshipDigest(d, g, op, t),
          hashTypedData(operationSponsorshipTypedData(d, g, op, t)),
        );
      }),
      { numRuns: 300 },
    );
  });
});
