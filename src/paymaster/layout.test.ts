import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { secp256k1 } from "@noble/curves/secp256k1";
import fc from "fast-check";
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes, size } from "viem";
import { PAYMASTER_GAS_LIMITS } from "./gas.ts";
import {
  decodePaymasterAndData,
  encodeCallPaymasterAndData,
  encodeOperationPaymasterAndData,
  encodePaymasterAndData,
  PAYMASTER_AND_DATA_SIZE,
  type PaymasterAndData,
  STUB_SIGNATURE,
  stubPaymasterAndData,
} from "./layout.ts";

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => bytesToHex(b));
const uint128 = fc.bigInt(0n, 2n ** 128n - 1n);

/** Any valid window: validAfter < validUntil, both uint48. */
const window = fc
  .tuple(fc.integer({ min: 0, max: 2 ** 48 - 2 }), fc.integer({ min: 1, max: 2 ** 48 - 1 }))
  .map(([after, span]) => ({ validAfterSec: after, validUntilSec: Math.min(after + span, 2 ** 48 - 1) }));

const paymasterAndData: fc.Arbitrary<PaymasterAndData> = fc
  .record({
    paymaster: bytes(20).map((a) => getAddress(a) as Address),
    // fast-check records have no prototype; decode returns plain objects.
    gas: fc.record({ verificationGasLimit: uint128, postOpGasLimit: uint128 }).map((g) => ({ ...g })),
    window,
    authId: bytes(32),
    senderCodeHash: bytes(32),
    signature: bytes(65),
    ceilings: fc.record({
      maxTotalGas: uint128,
      maxPreVerificationGas: uint128,
      maxFeePerGasWei: uint128,
      maxPriorityFeePerGasWei: uint128,
    }),
    mode: fc.constantFrom("call" as const, "operation" as const),
  })
  .map(({ window, ceilings, mode, ...rest }) =>
    mode === "call" ? { mode, ...rest, ...window, ...ceilings } : { mode, ...rest, ...window },
  );

const example: PaymasterAndData = {
  mode: "call",
  paymaster: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
  gas: { verificationGasLimit: 0x1234n, postOpGasLimit: 0n },
  validUntilSec: 0x6000_0300,
  validAfterSec: 0x6000_0000,
  authId: `0x${"ab".repeat(32)}`,
  senderCodeHash: `0x${"cd".repeat(32)}`,
  maxTotalGas: 800_000n,
  maxPreVerificationGas: 90_000n,
  maxFeePerGasWei: 3_000_000_000n,
  maxPriorityFeePerGasWei: 1_000_000_000n,
  signature: `0x${"11".repeat(65)}`,
};

/** Overwrites one byte of a hex string. */
function withByte(hex: Hex, offset: number, value: number): Hex {
  const b = hexToBytes(hex);
  b[offset] = value;
  return bytesToHex(b);
}

describe("encodePaymasterAndData / decodePaymasterAndData", () => {
  it("decode(encode(x)) is x for any valid value of either mode", () => {
    fc.assert(
      fc.property(paymasterAndData, (data) => {
        const encoded = encodePaymasterAndData(data);
        assert.equal(size(encoded), PAYMASTER_AND_DATA_SIZE[data.mode]);
        assert.deepEqual(decodePaymasterAndData(encoded), data);
      }),
      { numRuns: 500 },
    );
  });

  it("puts every field at the offset the contract reads it from", () => {
    const hex = encodePaymasterAndData(example);
    const at = (start: number, end: number) => `0x${hex.slice(2 + start * 2, 2 + end * 2)}`;
    assert.equal(size(hex), 258);
    assert.equal(at(0, 20), example.paymaster.toLowerCase());
    assert.equal(BigInt(at(20, 36)), 0x1234n);
    assert.equal(BigInt(at(36, 52)), 0n);
    assert.equal(at(52, 53), "0x00");
    assert.equal(at(53, 59), "0x000060000300");
    assert.equal(at(59, 65), "0x000060000000");
    assert.equal(at(65, 97), example.authId);
    assert.equal(at(97, 129), example.senderCodeHash);
    assert.equal(BigInt(at(129, 145)), 800_000n);
    assert.equal(BigInt(at(145, 161)), 90_000n);
    assert.equal(BigInt(at(161, 177)), 3_000_000_000n);
    assert.equal(BigInt(at(177, 193)), 1_000_000_000n);
    assert.equal(at(193, 258), example.signature);

    const { maxTotalGas, maxPreVerificationGas, maxFeePerGasWei, maxPriorityFeePerGasWei, ...terms } =
      example;
    const op = encodePaymasterAndData({ ...terms, mode: "operation" });
    assert.equal(size(op), 194);
    assert.equal(op.slice(0, 2 + 129 * 2), withByte(hex, 52, 1).slice(0, 2 + 129 * 2));
    assert.equal(`0x${op.slice(2 + 129 * 2)}`, example.signature);
  });

  it("encodeCallPaymasterAndData and encodeOperationPaymasterAndData take the signed authorization as is", () => {
    if (example.mode !== "call") throw new Error("example is a call authorization");
    const { paymaster, gas, signature, mode, ...fields } = example;
    const auth = {
      ...fields,
      sender: paymaster,
      initCode: "0x" as Hex,
      target: paymaster,
      selector: "0xa0712d68" as Hex,
    };
    const domain = { chainId: 14601, paymaster };
    assert.equal(encodeCallPaymasterAndData(domain, gas, auth, signature), encodePaymasterAndData(example));
    const { maxTotalGas, maxPreVerificationGas, maxFeePerGasWei, maxPriorityFeePerGasWei, ...terms } = fields;
    assert.equal(
      encodeOperationPaymasterAndData(domain, gas, terms, signature),
      encodePaymasterAndData({ mode: "operation", paymaster, gas, signature, ...terms }),
    );
  });

  it("refuses to encode what the contract would refuse or the layout cannot hold", () => {
    assert.throws(() => encodePaymasterAndData({ ...example, validUntilSec: example.validAfterSec }));
    assert.throws(() => encodePaymasterAndData({ ...example, maxTotalGas: 2n ** 128n }));
    assert.throws(() => encodePaymasterAndData({ ...example, validUntilSec: 2 ** 48 }));
    assert.throws(() => encodePaymasterAndData({ ...example, signature: `0x${"11".repeat(64)}` }));
    assert.throws(() => encodePaymasterAndData({ ...example, authId: "0x1234" }));
  });

  it("decodes to null any length other than its mode's", () => {
    const call = encodePaymasterAndData(example);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 400 }), (length) => {
        fc.pre(length !== 258);
        const resized = `0x${call.slice(2, 2 + length * 2).padEnd(length * 2, "7")}` as Hex;
        assert.equal(decodePaymasterAndData(resized), null);
      }),
    );
    // A call-mode payload relabelled as mode 1 (and vice versa) has the other mode's length.
    assert.equal(decodePaymasterAndData(withByte(call, 52, 1)), null);
    const { maxTotalGas, maxPreVerificationGas, maxFeePerGasWei, maxPriorityFeePerGasWei, ...terms } =
      example;
    const op = encodePaymasterAndData({ ...terms, mode: "operation" });
    assert.equal(decodePaymasterAndData(withByte(op, 52, 0)), null);
  });

  it("decodes to null an unknown mode, an empty window and anything that is not hex bytes", () => {
    const call = encodePaymasterAndData(example);
    for (const mode of [2, 3, 0x80, 0xff])
      assert.equal(decodePaymasterAndData(withByte(call, 52, mode)), null);
    // validUntil [53:59) = validAfter [59:65)
    const emptyWindow = `${call.slice(0, 2 + 53 * 2)}${call.slice(2 + 59 * 2, 2 + 65 * 2)}${call.slice(2 + 59 * 2)}`;
    assert.equal(decodePaymasterAndData(emptyWindow as Hex), null);
    assert.equal(decodePaymasterAndData("0x"), null);
    assert.equal(decodePaymasterAndData(`${call}0` as Hex), null);
    assert.equal(decodePaymasterAndData(call.replace("0x", "0X") as Hex), null);
    assert.equal(decodePaymasterAndData(`0x${"zz".repeat(210)}` as Hex), null);
    assert.equal(decodePaymasterAndData(123 as unknown as Hex), null);
  });
});

describe("stubPaymasterAndData", () => {
  const params = {
    paymaster: example.paymaster,
    gas: PAYMASTER_GAS_LIMITS,
    validUntilSec: 2_000,
    validAfterSec: 1_000,
  };

  it("has the final length, the mode, the window and the gas limits of the real thing", () => {
    for (const mode of ["call", "operation"] as const) {
      const stub = stubPaymasterAndData({ ...params, mode });
      assert.equal(size(stub), PAYMASTER_AND_DATA_SIZE[mode]);
      const decoded = decodePaymasterAndData(stub);
      assert.ok(decoded);
      assert.equal(decoded.mode, mode);
      assert.deepEqual(decoded.gas, PAYMASTER_GAS_LIMITS);
      assert.deepEqual([decoded.validAfterSec, decoded.validUntilSec], [1_000, 2_000]);
      assert.equal(decoded.signature, STUB_SIGNATURE);
    }
  });

  it("carries a signature ECDSA.tryRecover takes to ecrecover: v 27/28, r and s non-zero, s in the lower half", () => {
    const sig = hexToBytes(STUB_SIGNATURE);
    assert.equal(sig.length, 65);
    const r = BigInt(bytesToHex(sig.subarray(0, 32)));
    const s = BigInt(bytesToHex(sig.subarray(32, 64)));
    assert.ok(sig[64] === 27 || sig[64] === 28);
    assert.ok(r > 0n && r < secp256k1.CURVE.n);
    assert.ok(s > 0n && s <= secp256k1.CURVE.n / 2n);
    assert.ok(
      sig.every((b) => b !== 0),
      "zero bytes would make calldata cheaper than a real signature",
    );
  });
});
