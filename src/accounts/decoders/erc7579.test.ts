import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type Address,
  concatHex,
  encodeAbiParameters,
  encodeFunctionData,
  type Hex,
  parseAbi,
  toHex,
} from "viem";
import { type DecodeResult, decodeCalls } from "../calls.ts";

const execute = parseAbi(["function execute(bytes32 mode, bytes executionCalldata)"]);
const executionsParams = [
  {
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "callData", type: "bytes" },
    ],
  },
] as const;

const token: Address = "0x00000000000000000000000000000000000000aa";
const transferData: Hex = "0xa9059cbb0000000000000000000000000000000000000000000000000000000000000001";

/** call type, exec type, then the 30 bytes of unused, mode selector and payload. */
function mode(callType: string, execType = "00", tail = "00".repeat(30)): Hex {
  return `0x${callType}${execType}${tail}`;
}

function single(target: Address, value: bigint, data: Hex): Hex {
  return concatHex([target, toHex(value, { size: 32 }), data]);
}

function batch(calls: readonly { target: Address; value: bigint; callData: Hex }[]): Hex {
  return encodeAbiParameters(executionsParams, [calls]);
}

function refusal(result: DecodeResult): { code: string; callIndex: number | undefined } {
  return result.kind === "refused"
    ? { code: result.code, callIndex: result.callIndex }
    : { code: "calls", callIndex: undefined };
}

describe("ERC-7579 execute(bytes32,bytes)", () => {
  it("decodes the packed single form against a hand-written known answer", () => {
    // selector | mode | offset of executionCalldata | its length (20 + 32 + 36 = 88) | target | value | data
    const callData =
      `0xe9ae5c53${"00".repeat(32)}${"0".repeat(62)}40${"0".repeat(62)}58${token.slice(2)}${"0".repeat(63)}5${transferData.slice(2)}${"00".repeat(8)}` as Hex;
    assert.equal(
      callData,
      encodeFunctionData({ abi: execute, args: [mode("00"), single(token, 5n, transferData)] }),
    );
    assert.deepEqual(decodeCalls(callData), {
      kind: "calls",
      encoding: "erc7579_single",
      calls: [{ target: token, valueWei: 5n, data: transferData, selector: "0xa9059cbb" }],
    });
  });

  it("accepts both exec types (revert and try) for single and batch", () => {
    for (const execType of ["00", "01"]) {
      const one = encodeFunctionData({
        abi: execute,
        args: [mode("00", execType), single(token, 0n, transferData)],
      });
      const many = encodeFunctionData({
        abi: execute,
        args: [mode("01", execType), batch([{ target: token, value: 0n, callData: transferData }])],
      });
      assert.equal(decodeCalls(one).kind, "calls");
      const result = decodeCalls(many);
      assert.equal(result.kind === "calls" && result.encoding, "erc7579_batch");
    }
  });

  it("refuses delegatecall, static call, unknown call types and unknown exec types", () => {
    const payload = single(token, 0n, transferData);
    for (const m of [mode("ff"), mode("fe"), mode("02"), mode("00", "02"), mode("01", "ff")]) {
      const callData = encodeFunctionData({ abi: execute, args: [m, payload] });
      assert.deepEqual(refusal(decodeCalls(callData)), { code: "unsupported_call", callIndex: undefined });
    }
  });

  it("refuses a call to the zero address, which ERC-7579 accounts run on themselves", () => {
    const zero = "0x0000000000000000000000000000000000000000";
    const one = encodeFunctionData({ abi: execute, args: [mode("00"), single(zero, 0n, transferData)] });
    assert.deepEqual(refusal(decodeCalls(one)), { code: "unsupported_call", callIndex: 0 });
    const many = encodeFunctionData({
      abi: execute,
      args: [
        mode("01"),
        batch([
          { target: token, value: 0n, callData: transferData },
          { target: zero, value: 0n, callData: transferData },
        ]),
      ],
    });
    assert.deepEqual(refusal(decodeCalls(many)), { code: "unsupported_call", callIndex: 1 });
  });

  it("refuses a non-zero mode selector, mode payload or unused byte", () => {
    const payload = single(token, 0n, transferData);
    const tails = [
      `${"00".repeat(4)}78210001${"00".repeat(22)}`, // ERC-7821's opData batch selector
      `${"00".repeat(29)}01`, // payload
      `01${"00".repeat(29)}`, // unused
    ];
    for (const tail of tails) {
      const callData = encodeFunctionData({ abi: execute, args: [mode("00", "00", tail), payload] });
      assert.deepEqual(refusal(decodeCalls(callData)), { code: "unsupported_call", callIndex: undefined });
    }
  });

  it("refuses a single execution shorter than target and value, and one without a selector", () => {
    const short = encodeFunctionData({ abi: execute, args: [mode("00"), `0x${"11".repeat(51)}`] });
    assert.equal(refusal(decodeCalls(short)).code, "malformed_call_data");
    const transfer = encodeFunctionData({ abi: execute, args: [mode("00"), single(token, 10n, "0x")] });
    assert.deepEqual(refusal(decodeCalls(transfer)), { code: "unsupported_call", callIndex: 0 });
  });

  it("refuses bytes after the outer arguments and dirty padding after the packed single call", () => {
    const canonical = encodeFunctionData({
      abi: execute,
      args: [mode("00"), single(token, 0n, transferData)],
    });
    const dirtyPadding = `${canonical.slice(0, -2)}01` as Hex;
    for (const callData of [`${canonical}00`, dirtyPadding] as Hex[]) {
      assert.equal(refusal(decodeCalls(callData)).code, "malformed_call_data");
    }
  });

  it("batch: refuses an empty batch, a transfer by index, too many calls and a non-canonical batch", () => {
    const call = { target: token, value: 0n, callData: transferData };
    const encode = (executions: Hex) => encodeFunctionData({ abi: execute, args: [mode("01"), executions] });

    assert.equal(refusal(decodeCalls(encode(batch([])))).code, "unsupported_call");
    assert.deepEqual(refusal(decodeCalls(encode(batch([call, { ...call, callData: "0x" }])))), {
      code: "unsupported_call",
      callIndex: 1,
    });
    assert.equal(refusal(decodeCalls(encode(batch(Array(65).fill(call))))).code, "too_many_calls");
    assert.equal(
      refusal(decodeCalls(encode(batch([call, call, call])), { maxCalls: 2 })).code,
      "too_many_calls",
    );

    const absurd = `0x${"0".repeat(62)}20${"f".repeat(64)}` as Hex;
    assert.equal(refusal(decodeCalls(encode(absurd))).code, "too_many_calls");
    const trailing = `${batch([call])}${"00".repeat(32)}` as Hex;
    assert.equal(refusal(decodeCalls(encode(trailing))).code, "malformed_call_data");
  });
});
