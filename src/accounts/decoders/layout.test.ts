import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { bytesToHex, decodeAbiParameters, encodeAbiParameters, type Hex } from "viem";
import { decodeCalls } from "../calls.ts";
import { hasCanonicalLayout } from "./layout.ts";

const callsParams = [
  {
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "data", type: "bytes" },
    ],
  },
] as const;
const arraysParams = [{ type: "address[]" }, { type: "uint256[]" }, { type: "bytes[]" }] as const;
const mixedParams = [{ type: "address" }, { type: "bytes" }, { type: "uint8" }, { type: "bytes32" }] as const;

function word(n: bigint | number): string {
  return BigInt(n).toString(16).padStart(64, "0");
}

const address = fc.uint8Array({ minLength: 20, maxLength: 20 }).map((b) => bytesToHex(b));
const bytes = fc.uint8Array({ maxLength: 100 }).map((b) => bytesToHex(b));
const uint = fc.bigInt({ min: 0n, max: 2n ** 256n - 1n });

describe("hasCanonicalLayout", () => {
  it("accepts whatever viem encodes, for each shape the accounts use", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ target: address, value: uint, data: bytes }), { maxLength: 6 }),
        (calls) => {
          assert.ok(hasCanonicalLayout(callsParams, encodeAbiParameters(callsParams, [calls])));
        },
      ),
    );
    fc.assert(
      fc.property(fc.array(address), fc.array(uint), fc.array(bytes), (targets, values, datas) => {
        assert.ok(
          hasCanonicalLayout(arraysParams, encodeAbiParameters(arraysParams, [targets, values, datas])),
        );
      }),
    );
    fc.assert(
      fc.property(
        address,
        bytes,
        fc.integer({ min: 0, max: 255 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (a, b, n, w) => {
          const args = [a, b, n, bytesToHex(w)] as const;
          assert.ok(hasCanonicalLayout(mixedParams, encodeAbiParameters(mixedParams, args)));
        },
      ),
    );
  });

  it("refuses trailing bytes, a moved offset and a length past the end", () => {
    const canonical = encodeAbiParameters(mixedParams, [
      "0x00000000000000000000000000000000000000aa",
      "0xabcd",
      1,
      `0x${"11".repeat(32)}`,
    ]);
    const body = canonical.slice(2);
    assert.ok(hasCanonicalLayout(mixedParams, canonical));
    assert.ok(!hasCanonicalLayout(mixedParams, `${canonical}00`));
    // Offset 0xa0 instead of 0x80 with a spare word: viem reads the same values.
    const moved =
      `0x${body.slice(0, 64)}${word(0xa0)}${body.slice(128, 256)}${word(0)}${body.slice(256)}` as Hex;
    assert.deepEqual(decodeAbiParameters(mixedParams, moved), decodeAbiParameters(mixedParams, canonical));
    assert.ok(!hasCanonicalLayout(mixedParams, moved));
    const overrun = `0x${body.slice(0, 256)}${word(33)}${body.slice(320)}` as Hex;
    assert.ok(!hasCanonicalLayout(mixedParams, overrun));
  });

  it("refuses shared offsets, and does so without decoding the shared value again and again", () => {
    // executeBatch(Call[]) with 31 offsets all at one tuple whose `bytes` fill 128 KiB: viem
    // decodes it 31 times (about 300 ms here before this check existed).
    const n = 31;
    const dataBytes = 128 * 1024 - 32 * n - 300;
    const tuple = `${word(0xaa)}${word(0)}${word(0x60)}${word(dataBytes)}${"ab".repeat(dataBytes)}`;
    const shared = `0x${word(0x20)}${word(n)}${word(32 * n).repeat(n)}${tuple}` as Hex;
    assert.equal(decodeAbiParameters(callsParams, shared)[0].length, n);
    assert.ok(!hasCanonicalLayout(callsParams, shared));

    const started = performance.now();
    const result = decodeCalls(`0x34fcd5be${shared.slice(2)}`);
    assert.equal(result.kind === "refused" && result.code, "malformed_call_data");
    assert.ok(performance.now() - started < 100, "refused in well under the 300 ms viem alone takes");
  });
});
