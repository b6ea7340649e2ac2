import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type Address, bytesToHex, concatHex, type Hex, hashTypedData, keccak256, numberToHex } from "viem";
import {
  type CallAuthorization,
  callSponsorshipDigest,
  callSponsorshipTypedData,
  isEip7702InitCode,
  operationInitCodeHash,
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
const terms = fc.record({
  validUntilSec: uint48,
  validAfterSec: uint48,
  authId: bytes(32),
  senderCodeHash: bytes(32),
});

const callAuthorization: fc.Arbitrary<CallAuthorization> = fc.record({
  sender: address,
  senderCodeHash: bytes(32),
  initCode: fc.oneof(
    fc.constant("0x" as Hex),
    fc.uint8Array({ maxLength: 300 }).map((b) => bytesToHex(b)),
  ),
  target: address,
  selector: bytes(4),
  maxTotalGas: uint128,
  maxPreVerificationGas: uint128,
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
  // Always given: a random initCode that happens to spell the EIP-7702 marker needs one.
  eip7702Delegate: address,
});

/** EIP-7702 initCodes in every spelling EntryPoint v0.8 accepts, with and without init data. */
const eip7702InitCode: fc.Arbitrary<Hex> = fc
  .tuple(fc.integer({ min: 2, max: 20 }), fc.uint8Array({ maxLength: 200 }))
  .map(([markerLength, rest]) => {
    const marker = new Uint8Array(markerLength);
    marker.set([0x77, 0x02]);
    return markerLength === 20 ? concatHex([bytesToHex(marker), bytesToHex(rest)]) : bytesToHex(marker);
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
          [
            "maxPreVerificationGas",
            callSponsorshipDigest(d, g, { ...auth, maxPreVerificationGas: auth.maxPreVerificationGas ^ 1n }),
          ],
          [
            "senderCodeHash",
            callSponsorshipDigest(d, g, { ...auth, senderCodeHash: flipHex(auth.senderCodeHash) }),
          ],
          [
            "initCode",
            callSponsorshipDigest(d, g, {
              ...auth,
              initCode: auth.initCode === "0x" ? "0x00" : flipHex(auth.initCode),
            }),
          ],
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
      senderCodeHash: `0x${"55".repeat(32)}`,
      initCode: "0x",
      selector: "0xa0712d68",
      maxTotalGas: 1n,
      maxPreVerificationGas: 1n,
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
    assert.throws(() => callSponsorshipDigest(d, g, { ...auth, senderCodeHash: "0x55" }));
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

describe("EIP-7702 operations (EntryPoint v0.8)", () => {
  const delegate: Address = "0xe6Cae83BdE06E4c305530e199D7217f42808555B";

  it("recognises the marker as EntryPoint v0.8 does: 0x7702 zero-padded to 20 bytes, then anything", () => {
    const padded = `0x7702${"00".repeat(18)}` as Hex;
    for (const initCode of ["0x7702", "0x770200", padded, `${padded}c0ffee`] as Hex[])
      assert.equal(isEip7702InitCode(initCode), true, initCode);
    // A factory address that merely starts with 0x7702, a 1-byte prefix, and the empty initCode.
    for (const initCode of [`0x7702${"00".repeat(17)}01`, "0x77", "0x", "0x0277", "0x770201"] as Hex[])
      assert.equal(isEip7702InitCode(initCode), false, initCode);
  });

  it("binds keccak256(delegate ‖ initCode[20:]) like the EntryPoint's userOpHash, whatever the marker's spelling", () => {
    const padded = `0x7702${"00".repeat(18)}` as Hex;
    const hash = (initCode: Hex) =>
      bytesToHex(operationInitCodeHash({ initCode, eip7702Delegate: delegate }));
    assert.equal(hash("0x7702"), keccak256(delegate));
    assert.equal(hash(padded), keccak256(delegate));
    assert.equal(hash(`${padded}c0ffee`), keccak256(concatHex([delegate, "0xc0ffee"])));
    // Any other initCode is hashed as it is, delegate or not.
    assert.equal(hash("0x1234"), keccak256("0x1234"));
    assert.equal(bytesToHex(operationInitCodeHash({ initCode: "0x" })), keccak256("0x"));
  });

  it("hand-encoded digest equals hashTypedData for EIP-7702 operations, and the delegate is bound", () => {
    fc.assert(
      fc.property(domain, operation, eip7702InitCode, address, terms, gas, (d, op, initCode, del, t, g) => {
        const op7702 = { ...op, initCode, eip7702Delegate: del };
        const digest = operationSponsorshipDigest(d, g, op7702, t);
        assert.equal(digest, hashTypedData(operationSponsorshipTypedData(d, g, op7702, t)));
        assert.notEqual(
          operationSponsorshipDigest(d, g, { ...op7702, eip7702Delegate: flipHex(del) }, t),
          digest,
        );
      }),
      { numRuns: 200 },
    );
  });

  it("refuses to hash an EIP-7702 operation without its delegate rather than guess one", () => {
    const d = { chainId: 14601, paymaster: `0x${"11".repeat(20)}` as Address };
    const op: SponsoredOperation = {
      sender: `0x${"22".repeat(20)}`,
      nonce: 0n,
      initCode: "0x7702",
      callData: "0x",
      accountGasLimits: `0x${"00".repeat(32)}`,
      preVerificationGas: 0n,
      gasFees: `0x${"00".repeat(32)}`,
    };
    const t = {
      validUntilSec: 2,
      validAfterSec: 1,
      authId: `0x${"44".repeat(32)}` as Hex,
      senderCodeHash: `0x${"55".repeat(32)}` as Hex,
    };
    const g = { verificationGasLimit: 1n, postOpGasLimit: 0n };
    assert.throws(() => operationSponsorshipDigest(d, g, op, t), /eip7702Delegate/);
    assert.throws(
      () => operationSponsorshipDigest(d, g, { ...op, eip7702Delegate: "0x22" }, t),
      /not an address/,
    );
  });
});
