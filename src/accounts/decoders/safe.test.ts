import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Address, encodeFunctionData, encodePacked, type Hex, parseAbi, size } from "viem";
import { type DecodeResult, decodeCalls } from "../calls.ts";

const executeUserOp = parseAbi([
  "function executeUserOp(address to, uint256 value, bytes data, uint8 operation)",
]);
const executeUserOpWithErrorString = parseAbi([
  "function executeUserOpWithErrorString(address to, uint256 value, bytes data, uint8 operation)",
]);
const multiSend = parseAbi(["function multiSend(bytes transactions)"]);

const MULTI_SEND_CALL_ONLY_141: Address = "0x9641d764fc13c8b624c04430c7356c1c7c8102e2";
const MULTI_SEND_CALL_ONLY_150: Address = "0xa83c336b20401af773b6219ba5027174338d1836";
/** MultiSend (not CallOnly) 1.4.1: its inner transactions may delegatecall. */
const MULTI_SEND_141: Address = "0x38869bf66a61cf6bdb996a6ae40d5853fd43b526";

const token: Address = "0x00000000000000000000000000000000000000aa";
const other: Address = "0x00000000000000000000000000000000000000bb";
const transferData: Hex = "0xa9059cbb0000000000000000000000000000000000000000000000000000000000000001";

interface Tx {
  operation?: number;
  to: Address;
  value?: bigint;
  data: Hex;
  /** Overrides the declared data length. */
  dataLength?: bigint;
}

function packed(txs: readonly Tx[]): Hex {
  const parts = txs.map((tx) =>
    encodePacked(
      ["uint8", "address", "uint256", "uint256", "bytes"],
      [tx.operation ?? 0, tx.to, tx.value ?? 0n, tx.dataLength ?? BigInt(size(tx.data)), tx.data],
    ).slice(2),
  );
  return `0x${parts.join("")}`;
}

function viaMultiSend(transactions: Hex, to: Address = MULTI_SEND_CALL_ONLY_141, value = 0n): Hex {
  const data = encodeFunctionData({ abi: multiSend, args: [transactions] });
  return encodeFunctionData({ abi: executeUserOpWithErrorString, args: [to, value, data, 1] });
}

function refusal(result: DecodeResult): { code: string; callIndex: number | undefined } {
  return result.kind === "refused"
    ? { code: result.code, callIndex: result.callIndex }
    : { code: "calls", callIndex: undefined };
}

describe("Safe4337Module executeUserOp / executeUserOpWithErrorString", () => {
  it("decodes operation 0 as one call, through either entry point", () => {
    for (const abi of [executeUserOp, executeUserOpWithErrorString]) {
      const callData = encodeFunctionData({ abi, args: [token, 3n, transferData, 0] });
      assert.deepEqual(decodeCalls(callData), {
        kind: "calls",
        encoding: "safe_call",
        calls: [{ target: token, valueWei: 3n, data: transferData, selector: "0xa9059cbb" }],
      });
    }
  });

  it("decodes a delegatecall into either canonical MultiSendCallOnly, a batch of one included", () => {
    for (const to of [MULTI_SEND_CALL_ONLY_141, MULTI_SEND_CALL_ONLY_150]) {
      for (const txs of [
        [{ to: token, data: transferData }],
        [
          { to: token, data: transferData },
          { to: other, value: 9n, data: transferData },
        ],
      ]) {
        const result = decodeCalls(viaMultiSend(packed(txs), to));
        assert.equal(result.kind === "calls" && result.encoding, "safe_multisend");
        assert.deepEqual(
          result.kind === "calls" && result.calls.map((c) => [c.target, c.valueWei, c.data]),
          txs.map((tx) => [tx.to, tx.value ?? 0n, tx.data]),
        );
      }
    }
  });

  it("refuses operations other than call and delegatecall", () => {
    const callData = encodeFunctionData({ abi: executeUserOp, args: [token, 0n, transferData, 2] });
    assert.equal(refusal(decodeCalls(callData)).code, "unsupported_call");
  });

  it("refuses a delegatecall anywhere but a canonical MultiSendCallOnly, MultiSend included", () => {
    const transactions = packed([{ to: token, data: transferData }]);
    for (const to of [MULTI_SEND_141, token]) {
      assert.deepEqual(refusal(decodeCalls(viaMultiSend(transactions, to))), {
        code: "unsupported_call",
        callIndex: undefined,
      });
    }
  });

  it("refuses a delegatecall with a value, or whose data is not multiSend(bytes)", () => {
    const withValue = viaMultiSend(packed([{ to: token, data: transferData }]), MULTI_SEND_CALL_ONLY_141, 1n);
    const notMultiSend = encodeFunctionData({
      abi: executeUserOp,
      args: [MULTI_SEND_CALL_ONLY_141, 0n, transferData, 1],
    });
    for (const callData of [withValue, notMultiSend]) {
      assert.equal(refusal(decodeCalls(callData)).code, "unsupported_call");
    }
  });

  it("refuses an inner delegatecall, an inner zero address and an inner transfer, naming the transaction", () => {
    const good = { to: token, data: transferData };
    const cases: [Tx, string][] = [
      [{ ...good, operation: 1 }, "unsupported_call"],
      [{ ...good, to: "0x0000000000000000000000000000000000000000" }, "unsupported_call"],
      [{ to: other, value: 1n, data: "0x" }, "unsupported_call"],
    ];
    for (const [bad, code] of cases) {
      const result = decodeCalls(viaMultiSend(packed([good, bad, good])));
      assert.deepEqual(refusal(result), { code, callIndex: 1 });
    }
  });

  it("refuses a truncated transaction and a data length running past the end, absurd ones included", () => {
    const good = packed([{ to: token, data: transferData }]);
    const truncated = `${good}${"00".repeat(84)}` as Hex;
    const overrun = packed([
      { to: token, data: transferData },
      { to: other, data: transferData, dataLength: 37n },
    ]);
    const absurd = packed([{ to: token, data: transferData, dataLength: 2n ** 256n - 1n }]);
    assert.deepEqual(refusal(decodeCalls(viaMultiSend(truncated))), {
      code: "malformed_call_data",
      callIndex: 1,
    });
    assert.deepEqual(refusal(decodeCalls(viaMultiSend(overrun))), {
      code: "malformed_call_data",
      callIndex: 1,
    });
    assert.deepEqual(refusal(decodeCalls(viaMultiSend(absurd))), {
      code: "malformed_call_data",
      callIndex: 0,
    });
  });

  it("refuses an empty MultiSend, and more transactions than maxCalls", () => {
    assert.equal(refusal(decodeCalls(viaMultiSend("0x"))).code, "unsupported_call");
    const tx = { to: token, data: transferData };
    assert.equal(decodeCalls(viaMultiSend(packed(Array(64).fill(tx)))).kind, "calls");
    assert.equal(refusal(decodeCalls(viaMultiSend(packed(Array(65).fill(tx))))).code, "too_many_calls");
    assert.equal(
      refusal(decodeCalls(viaMultiSend(packed([tx, tx])), { maxCalls: 1 })).code,
      "too_many_calls",
    );
  });

  it("refuses non-canonical encodings of executeUserOp and of multiSend's argument", () => {
    const single = encodeFunctionData({ abi: executeUserOp, args: [token, 0n, transferData, 0] });
    // The operation is a uint8: bits above the low byte make it a non-canonical encoding.
    const dirtyOperation =
      `${single.slice(0, 10 + 64 * 3)}${"0".repeat(60)}0100${single.slice(10 + 64 * 4)}` as Hex;
    const innerTrailing = encodeFunctionData({
      abi: executeUserOp,
      args: [
        MULTI_SEND_CALL_ONLY_141,
        0n,
        `${encodeFunctionData({ abi: multiSend, args: [packed([{ to: token, data: transferData }])] })}00`,
        1,
      ],
    });
    for (const callData of [`${single}00` as Hex, dirtyOperation, innerTrailing]) {
      assert.equal(refusal(decodeCalls(callData)).code, "malformed_call_data");
    }
  });
});
