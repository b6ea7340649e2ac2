import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  type Address,
  bytesToHex,
  concatHex,
  encodeAbiParameters,
  encodeFunctionData,
  encodePacked,
  type Hex,
  parseAbi,
  size,
  toFunctionSelector,
  toHex,
  zeroAddress,
} from "viem";
import {
  ACCOUNT_SELECTORS,
  type AccountEncoding,
  type DecodeResult,
  decodeCalls,
  MAX_CALL_DATA_BYTES,
} from "./calls.ts";
import { MULTI_SEND_CALL_ONLY_ADDRESSES } from "./decoders/safe.ts";

const transferData: Hex = "0xa9059cbb0000000000000000000000000000000000000000000000000000000000000001";
const token = "0x00000000000000000000000000000000000000aa";

const REFUSAL_CODES = new Set([
  "unsupported_account",
  "unsupported_call",
  "malformed_call_data",
  "too_many_calls",
]);

/** What every result must look like, whatever the input. */
function assertWellFormed(result: DecodeResult): void {
  if (result.kind === "refused") {
    assert.ok(REFUSAL_CODES.has(result.code), result.code);
    assert.equal(typeof result.detail, "string");
    return;
  }
  assert.equal(result.kind, "calls");
  assert.ok(result.calls.length >= 1 && result.calls.length <= 64);
  for (const call of result.calls) {
    assert.match(call.target, /^0x[0-9a-f]{40}$/);
    assert.match(call.data, /^0x(?:[0-9a-f]{2}){4,}$/);
    assert.equal(call.selector, call.data.slice(0, 10));
    assert.ok(call.valueWei >= 0n && call.valueWei < 2n ** 256n);
  }
}

describe("decodeCalls: dispatch and input", () => {
  it("names each supported entry point by its real selector", () => {
    assert.deepEqual(ACCOUNT_SELECTORS, {
      execute: toFunctionSelector("execute(address,uint256,bytes)"),
      executeBatchArrays: toFunctionSelector("executeBatch(address[],bytes[])"),
      executeBatchValueArrays: toFunctionSelector("executeBatch(address[],uint256[],bytes[])"),
      executeBatchCalls: toFunctionSelector("executeBatch((address,uint256,bytes)[])"),
      erc7579Execute: toFunctionSelector("execute(bytes32,bytes)"),
      safeExecuteUserOp: toFunctionSelector("executeUserOp(address,uint256,bytes,uint8)"),
      safeExecuteUserOpWithErrorString: toFunctionSelector(
        "executeUserOpWithErrorString(address,uint256,bytes,uint8)",
      ),
    });
  });

  it("refuses an unknown selector as unsupported_account, and never guesses from the arguments", () => {
    // Same arguments as execute(address,uint256,bytes), other function name.
    const lookalike = encodeFunctionData({
      abi: parseAbi(["function exec(address to, uint256 value, bytes data)"]),
      args: [token, 0n, transferData],
    });
    const result = decodeCalls(lookalike);
    assert.equal(result.kind === "refused" && result.code, "unsupported_account");
  });

  it("refuses, with a reason, entry points that clients send but that are not sponsorable", () => {
    const cases: [string, RegExp][] = [
      ["executeFromExecutor(bytes32,bytes)", /executor modules/],
      [
        "executeUserOp((address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes),bytes32)",
        /whole operation/,
      ],
      ["executeWithoutChainIdValidation(bytes[])", /Coinbase/],
      ["execute(address,uint256,bytes,uint8)", /Kernel v2/],
    ];
    for (const [signature, reason] of cases) {
      const result = decodeCalls(`${toFunctionSelector(signature)}${"00".repeat(64)}`);
      assert.equal(result.kind === "refused" && result.code, "unsupported_account", signature);
      assert.match(result.kind === "refused" ? result.detail : "", reason);
    }
  });

  it("refuses what is not hex of whole bytes, or shorter than a selector", () => {
    for (const input of ["", "0x", "0xb61d27", "b61d27f6", "0xb61d27f", "0xb61d27fg", "0X b61d27f6"]) {
      const result = decodeCalls(input as Hex);
      assert.equal(result.kind === "refused" && result.code, "malformed_call_data", input);
    }
    for (const input of [undefined, null, 42, {}]) {
      const result = decodeCalls(input as unknown as Hex);
      assert.equal(result.kind === "refused" && result.code, "malformed_call_data");
    }
  });

  it("accepts upper-case hex and reports lower case", () => {
    const callData = encodeFunctionData({
      abi: parseAbi(["function execute(address dest, uint256 value, bytes func)"]),
      args: ["0x00000000000000000000000000000000000000AA", 0n, "0xA9059CBB"],
    });
    const result = decodeCalls(`0x${callData.slice(2).toUpperCase()}`);
    assert.deepEqual(result.kind === "calls" && result.calls[0], {
      target: token,
      valueWei: 0n,
      data: "0xa9059cbb",
      selector: "0xa9059cbb",
    });
  });

  it("refuses call data over the size bound before reading it", () => {
    const oversized = `0xb61d27f6${"00".repeat(MAX_CALL_DATA_BYTES)}` as Hex;
    const refused = decodeCalls(oversized);
    assert.equal(refused.kind === "refused" && refused.code, "malformed_call_data");
    const result = decodeCalls(`0xb61d27f6${"00".repeat(200)}`, { maxCallDataBytes: 100 });
    assert.match(result.kind === "refused" ? result.detail : "", /over 100 bytes/);
  });

  it("rejects nonsensical bounds as a programming error", () => {
    assert.throws(() => decodeCalls(transferData, { maxCalls: 0 }));
    assert.throws(() => decodeCalls(transferData, { maxCalls: 1.5 }));
    assert.throws(() => decodeCalls(transferData, { maxCallDataBytes: 3 }));
  });
});

describe("decodeCalls: arbitrary input (property)", () => {
  const selectors = [...Object.values(ACCOUNT_SELECTORS), "0xd691c964", "0x12345678"];

  it("random bytes never throw and always give a well-formed result", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        assertWellFormed(decodeCalls(bytesToHex(bytes)));
      }),
      { numRuns: 2000 },
    );
  });

  it("random arguments behind every supported selector never throw", () => {
    // Arguments built from words that are mostly small (offsets and lengths a decoder will
    // follow) reach far deeper than uniform random bytes do.
    const word = fc.oneof(
      fc.bigInt({ min: 0n, max: 0x200n }),
      fc.constantFrom(0n, 0x20n, 0x40n, 0x60n, 2n ** 255n, 2n ** 256n - 1n),
      fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }),
    );
    const args = fc
      .array(word, { maxLength: 24 })
      .map((words) => words.map((w) => w.toString(16).padStart(64, "0")).join(""));
    fc.assert(
      fc.property(
        fc.constantFrom(...selectors),
        args,
        fc.uint8Array({ maxLength: 40 }),
        (selector, body, tail) => {
          const callData = `${selector}${body}${bytesToHex(tail).slice(2)}` as Hex;
          assertWellFormed(decodeCalls(callData));
          assertWellFormed(decodeCalls(callData, { maxCalls: 1 }));
        },
      ),
      { numRuns: 3000 },
    );
  });
});

interface Call {
  to: Address;
  value: bigint;
  data: Hex;
}

const abis = {
  execute: parseAbi(["function execute(address dest, uint256 value, bytes func)"]),
  batchArrays: parseAbi(["function executeBatch(address[] dest, bytes[] func)"]),
  batchValueArrays: parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]),
  batchCalls: parseAbi([
    "struct Call { address target; uint256 value; bytes data; }",
    "function executeBatch(Call[] calls)",
  ]),
  erc7579: parseAbi(["function execute(bytes32 mode, bytes executionCalldata)"]),
  safe: parseAbi(["function executeUserOp(address to, uint256 value, bytes data, uint8 operation)"]),
  multiSend: parseAbi(["function multiSend(bytes transactions)"]),
};
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
const [multiSendCallOnly] = MULTI_SEND_CALL_ONLY_ADDRESSES;

/**
 * Every encoding, written with viem straight from the contracts' signatures (the accounts' own
 * helpers are exercised in accounts.test.ts). Single forms take the first call; batch forms
 * take all of them, a batch of one included, which no helper produces.
 */
const ENCODERS: Record<AccountEncoding, (calls: readonly Call[], execType: "00" | "01") => Hex> = {
  single_execute: ([c]) => encodeFunctionData({ abi: abis.execute, args: [c!.to, c!.value, c!.data] }),
  batch_targets_datas: (calls) =>
    encodeFunctionData({ abi: abis.batchArrays, args: [calls.map((c) => c.to), calls.map((c) => c.data)] }),
  batch_targets_values_datas: (calls) =>
    encodeFunctionData({
      abi: abis.batchValueArrays,
      args: [calls.map((c) => c.to), calls.map((c) => c.value), calls.map((c) => c.data)],
    }),
  batch_calls: (calls) =>
    encodeFunctionData({
      abi: abis.batchCalls,
      args: [calls.map((c) => ({ target: c.to, value: c.value, data: c.data }))],
    }),
  erc7579_single: ([c], execType) =>
    encodeFunctionData({
      abi: abis.erc7579,
      args: [`0x00${execType}${"00".repeat(30)}`, concatHex([c!.to, toHex(c!.value, { size: 32 }), c!.data])],
    }),
  erc7579_batch: (calls, execType) =>
    encodeFunctionData({
      abi: abis.erc7579,
      args: [
        `0x01${execType}${"00".repeat(30)}`,
        encodeAbiParameters(executionsParams, [
          calls.map((c) => ({ target: c.to, value: c.value, callData: c.data })),
        ]),
      ],
    }),
  safe_call: ([c]) => encodeFunctionData({ abi: abis.safe, args: [c!.to, c!.value, c!.data, 0] }),
  safe_multisend: (calls) => {
    const transactions = concatHex(
      calls.map((c) =>
        encodePacked(
          ["uint8", "address", "uint256", "uint256", "bytes"],
          [0, c.to, c.value, BigInt(size(c.data)), c.data],
        ),
      ),
    );
    const data = encodeFunctionData({ abi: abis.multiSend, args: [transactions] });
    return encodeFunctionData({ abi: abis.safe, args: [multiSendCallOnly!, 0n, data, 1] });
  },
};

const SINGLE_ENCODINGS = new Set<AccountEncoding>(["single_execute", "erc7579_single", "safe_call"]);

const arbitraryCall: fc.Arbitrary<Call> = fc.record({
  to: fc
    .uint8Array({ minLength: 20, maxLength: 20 })
    .map((bytes) => bytesToHex(bytes))
    .filter((hex) => hex !== zeroAddress),
  value: fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }),
  data: fc.uint8Array({ minLength: 4, maxLength: 200 }).map((bytes) => bytesToHex(bytes)),
});
const arbitraryEncoded = fc
  .record({
    encoding: fc.constantFrom(...(Object.keys(ENCODERS) as AccountEncoding[])),
    calls: fc.array(arbitraryCall, { minLength: 1, maxLength: 10 }),
    execType: fc.constantFrom("00" as const, "01" as const),
  })
  .map(({ encoding, calls, execType }) => {
    const used = SINGLE_ENCODINGS.has(encoding) ? calls.slice(0, 1) : calls;
    // SimpleAccount v0.6's batch has no values: what it encodes is zero for every call.
    const sent = encoding === "batch_targets_datas" ? used.map((c) => ({ ...c, value: 0n })) : used;
    return { encoding, calls: sent, callData: ENCODERS[encoding](sent, execType) };
  });

describe("decodeCalls: every encoding round-trips (property)", () => {
  it("random call lists, encoded in each supported form, decode to exactly those calls", () => {
    fc.assert(
      fc.property(arbitraryEncoded, ({ encoding, calls, callData }) => {
        assert.deepEqual(decodeCalls(callData), {
          kind: "calls",
          encoding,
          calls: calls.map((c) => ({
            target: c.to,
            valueWei: c.value,
            data: c.data,
            selector: c.data.slice(0, 10),
          })),
        });
      }),
      { numRuns: 1000 },
    );
  });

  it("valid encodings with bytes changed, cut or added never throw and stay well-formed", () => {
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant("set" as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
      fc.record({ kind: fc.constant("add" as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }),
    );
    fc.assert(
      fc.property(
        arbitraryEncoded,
        fc.array(mutation, { minLength: 1, maxLength: 4 }),
        ({ callData }, mutations) => {
          let hex = callData.slice(2);
          for (const m of mutations) {
            const bytes = hex.length / 2;
            if (m.kind === "set" && bytes > 0) {
              const at = 2 * (m.at % bytes);
              hex = `${hex.slice(0, at)}${m.byte.toString(16).padStart(2, "0")}${hex.slice(at + 2)}`;
            } else if (m.kind === "cut") {
              hex = hex.slice(0, 2 * (m.at % (bytes + 1)));
            } else if (m.kind === "add") {
              hex += bytesToHex(m.bytes).slice(2);
            }
          }
          assertWellFormed(decodeCalls(`0x${hex}`));
          assertWellFormed(decodeCalls(`0x${hex}`, { maxCalls: 2 }));
        },
      ),
      { numRuns: 3000 },
    );
  });
});
