import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Address, decodeFunctionData, encodeFunctionData, getAddress, type Hex, parseAbi } from "viem";
import { type DecodeResult, decodeCalls } from "../calls.ts";

const execute = parseAbi(["function execute(address dest, uint256 value, bytes func)"]);
const batchArrays = parseAbi(["function executeBatch(address[] dest, bytes[] func)"]);
const batchValueArrays = parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]);
const batchCalls = parseAbi([
  "struct Call { address target; uint256 value; bytes data; }",
  "function executeBatch(Call[] calls)",
]);

const token: Address = "0x00000000000000000000000000000000000000aa";
const other: Address = "0x00000000000000000000000000000000000000bb";
const transferData: Hex = "0xa9059cbb0000000000000000000000000000000000000000000000000000000000000001";

/** A refusal's code and call index; a decoded result shows as "calls" so assertions print it plainly. */
function refusal(result: DecodeResult): { code: string; callIndex: number | undefined } {
  return result.kind === "refused"
    ? { code: result.code, callIndex: result.callIndex }
    : { code: "calls", callIndex: undefined };
}

function word(n: bigint | number): string {
  return BigInt(n).toString(16).padStart(64, "0");
}

describe("execute(address,uint256,bytes)", () => {
  it("decodes the one call with its value", () => {
    const callData = encodeFunctionData({ abi: execute, args: [token, 7n, transferData] });
    assert.deepEqual(decodeCalls(callData), {
      kind: "calls",
      encoding: "single_execute",
      calls: [{ target: token, valueWei: 7n, data: transferData, selector: "0xa9059cbb" }],
    });
  });

  it("refuses a plain transfer (no data) and a call with less than a selector, at index 0", () => {
    for (const data of ["0x", "0xa9059c"] as const) {
      const callData = encodeFunctionData({ abi: execute, args: [token, 1n, data] });
      assert.deepEqual(refusal(decodeCalls(callData)), { code: "unsupported_call", callIndex: 0 });
    }
  });

  it("refuses every non-canonical spelling of the same call: trailing bytes, dirty address, moved offset, dirty padding", () => {
    const canonical = encodeFunctionData({ abi: execute, args: [token, 0n, transferData] });
    const body = canonical.slice(10);
    const dirtyAddress = `0x${canonical.slice(2, 10)}ff${body.slice(2)}`;
    // Offset 0x80 instead of 0x60, with one spare word before the bytes: same call, other bytes.
    const movedOffset = `${canonical.slice(0, 10)}${body.slice(0, 128)}${word(0x80)}${word(0)}${body.slice(192)}`;
    // transferData is 36 bytes: its last word has 28 bytes of padding, which must be zero.
    const dirtyPadding = `${canonical.slice(0, -2)}01`;
    for (const callData of [`${canonical}00`, dirtyAddress, movedOffset, dirtyPadding] as Hex[]) {
      // viem reads each of them as the same call; only the canonical check tells them apart.
      assert.deepEqual(decodeFunctionData({ abi: execute, data: callData }).args, [
        getAddress(token),
        0n,
        transferData,
      ]);
      assert.deepEqual(refusal(decodeCalls(callData)), { code: "malformed_call_data", callIndex: undefined });
    }
  });

  it("refuses a truncated argument list", () => {
    const canonical = encodeFunctionData({ abi: execute, args: [token, 0n, transferData] });
    assert.equal(refusal(decodeCalls(canonical.slice(0, -64) as Hex)).code, "malformed_call_data");
  });
});

describe("executeBatch(address[],bytes[]) — SimpleAccount v0.6", () => {
  it("decodes every call with value 0, a batch of one included", () => {
    for (const targets of [[token], [token, other]]) {
      const callData = encodeFunctionData({
        abi: batchArrays,
        args: [targets, targets.map(() => transferData)],
      });
      const result = decodeCalls(callData);
      assert.equal(result.kind === "calls" && result.encoding, "batch_targets_datas");
      assert.deepEqual(
        result.kind === "calls" && result.calls.map((c) => [c.target, c.valueWei]),
        targets.map((t) => [t, 0n]),
      );
    }
  });

  it("refuses targets and data of different lengths", () => {
    const callData = encodeFunctionData({ abi: batchArrays, args: [[token, other], [transferData]] });
    assert.equal(refusal(decodeCalls(callData)).code, "malformed_call_data");
  });
});

describe("executeBatch(address[],uint256[],bytes[]) — SimpleAccount v0.7", () => {
  it("decodes values per call", () => {
    const callData = encodeFunctionData({
      abi: batchValueArrays,
      args: [
        [token, other],
        [1n, 2n],
        [transferData, transferData],
      ],
    });
    const result = decodeCalls(callData);
    assert.deepEqual(result.kind === "calls" && result.calls.map((c) => c.valueWei), [1n, 2n]);
  });

  it("reads an empty value array as zero for every call, as SimpleAccount does", () => {
    const callData = encodeFunctionData({
      abi: batchValueArrays,
      args: [[token, other], [], [transferData, transferData]],
    });
    const result = decodeCalls(callData);
    assert.deepEqual(result.kind === "calls" && result.calls.map((c) => c.valueWei), [0n, 0n]);
  });

  it("refuses values that neither match the calls nor are empty, and data that does not match the targets", () => {
    const fewerValues = encodeFunctionData({
      abi: batchValueArrays,
      args: [[token, other], [1n], [transferData, transferData]],
    });
    const fewerData = encodeFunctionData({
      abi: batchValueArrays,
      args: [[token, other], [1n, 2n], [transferData]],
    });
    for (const callData of [fewerValues, fewerData]) {
      assert.equal(refusal(decodeCalls(callData)).code, "malformed_call_data");
    }
  });

  it("refuses before decoding when the value array declares an absurd length", () => {
    const callData = encodeFunctionData({ abi: batchValueArrays, args: [[token], [1n], [transferData]] });
    // Head: dest offset, value offset, func offset; the value array's length word follows dest.
    const valueOffset = Number.parseInt(callData.slice(10 + 64, 10 + 128), 16);
    const at = 10 + 2 * valueOffset;
    const forged = `${callData.slice(0, at)}${"f".repeat(64)}${callData.slice(at + 64)}` as Hex;
    assert.equal(refusal(decodeCalls(forged)).code, "malformed_call_data");
  });
});

describe("executeBatch((address,uint256,bytes)[]) — SimpleAccount v0.8, Coinbase, Solady, Simple7702Account", () => {
  const call = (target: Address, data: Hex) => ({ target, value: 0n, data });

  it("decodes a batch of one", () => {
    const callData = encodeFunctionData({ abi: batchCalls, args: [[call(token, transferData)]] });
    assert.deepEqual(decodeCalls(callData), {
      kind: "calls",
      encoding: "batch_calls",
      calls: [{ target: token, valueWei: 0n, data: transferData, selector: "0xa9059cbb" }],
    });
  });

  it("refuses an empty batch: there is nothing to allowlist", () => {
    const callData = encodeFunctionData({ abi: batchCalls, args: [[]] });
    assert.deepEqual(refusal(decodeCalls(callData)), { code: "unsupported_call", callIndex: undefined });
  });

  it("refuses a batch with a plain transfer, naming its index", () => {
    const callData = encodeFunctionData({
      abi: batchCalls,
      args: [[call(token, transferData), call(other, "0x"), call(token, transferData)]],
    });
    assert.deepEqual(refusal(decodeCalls(callData)), { code: "unsupported_call", callIndex: 1 });
  });

  it("refuses more calls than maxCalls (default 64), and an absurd declared length before decoding", () => {
    const calls = (n: number) => Array.from({ length: n }, () => call(token, transferData));
    const atLimit = encodeFunctionData({ abi: batchCalls, args: [calls(64)] });
    const overLimit = encodeFunctionData({ abi: batchCalls, args: [calls(65)] });
    assert.equal(decodeCalls(atLimit).kind, "calls");
    assert.equal(refusal(decodeCalls(overLimit)).code, "too_many_calls");
    assert.equal(refusal(decodeCalls(atLimit, { maxCalls: 63 })).code, "too_many_calls");

    const one = encodeFunctionData({ abi: batchCalls, args: [calls(1)] });
    const absurd = `${one.slice(0, 10 + 64)}${"f".repeat(64)}${one.slice(10 + 128)}` as Hex;
    const started = performance.now();
    assert.deepEqual(refusal(decodeCalls(absurd)), { code: "too_many_calls", callIndex: undefined });
    assert.ok(performance.now() - started < 100, "refused without walking the declared length");
  });
});
