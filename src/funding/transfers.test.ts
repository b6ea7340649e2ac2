import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type CallFrame,
  creditReference,
  reversalReference,
  topLevelTransfer,
  valueTransfers,
} from "./transfers.ts";

const A = "0x00000000000000000000000000000000000000aa";
const B = "0x00000000000000000000000000000000000000bb";
const C = "0x00000000000000000000000000000000000000cc";

describe("valueTransfers", () => {
  it("names the transaction's own value 0 and nested calls by their path", () => {
    const trace: CallFrame = {
      type: "CALL",
      to: A,
      value: "0x5",
      calls: [
        { type: "STATICCALL", to: B },
        { type: "CALL", to: B, value: "0x2", calls: [{ type: "CALL", to: C, value: "0x1" }] },
      ],
    };
    assert.deepEqual(valueTransfers(trace), [
      { to: A, valueWei: 5n, position: "0" },
      { to: B, valueWei: 2n, position: "0.1" },
      { to: C, valueWei: 1n, position: "0.1.0" },
    ]);
  });

  it("drops a transfer whose own frame or any ancestor reverted", () => {
    const trace: CallFrame = {
      type: "CALL",
      to: A,
      calls: [
        { type: "CALL", to: B, value: "0x7", error: "execution reverted" },
        { type: "CALL", to: A, error: "execution reverted", calls: [{ type: "CALL", to: C, value: "0x9" }] },
        { type: "CALL", to: C, value: "0x3" },
      ],
    };
    assert.deepEqual(valueTransfers(trace), [{ to: C, valueWei: 3n, position: "0.2" }]);
    assert.deepEqual(valueTransfers({ type: "CALL", to: A, value: "0x1", error: "out of gas" }), []);
  });

  it("counts SELFDESTRUCT payouts and ignores frames that move no value to their target", () => {
    const trace: CallFrame = {
      type: "CALL",
      to: A,
      calls: [
        { type: "DELEGATECALL", to: B, value: "0x4" },
        { type: "CALLCODE", to: B, value: "0x4" },
        { type: "SELFDESTRUCT", to: C, value: "0x12" },
        { type: "CALL", to: B, value: "0x0" },
      ],
    };
    assert.deepEqual(valueTransfers(trace), [{ to: C, valueWei: 18n, position: "0.2" }]);
  });

  it("gives a plain transfer the same position with or without a trace", () => {
    const traced = valueTransfers({ type: "CALL", to: A.toUpperCase().replace("0X", "0x"), value: "0xa" });
    assert.deepEqual(traced, [topLevelTransfer({ to: A, value: 10n })]);
    assert.equal(topLevelTransfer({ to: null, value: 10n }), null);
    assert.equal(topLevelTransfer({ to: A, value: 0n }), null);
  });
});

describe("credit and reversal references", () => {
  const first = "14601:0xabc:0.1";
  const blockA = `0x${"aa".repeat(32)}`;
  const blockB = `0x${"BB".repeat(32)}`;

  it("keeps the first credit's reference as it always was", () => {
    assert.equal(creditReference(first, 0, blockA), first);
  });

  it("gives every later crediting its own reference, even back in a block the chain had left", () => {
    const refs = [
      creditReference(first, 0, blockA),
      creditReference(first, 1, blockB),
      creditReference(first, 2, blockA),
    ];
    assert.equal(new Set(refs).size, 3);
    assert.equal(refs[1], `${first}:1:${blockB.toLowerCase()}`);
  });

  it("names a reversal by the credit it takes back and the orphaned block", () => {
    assert.equal(reversalReference(first, blockA), `reorg:${first}:${blockA}`);
  });
});
