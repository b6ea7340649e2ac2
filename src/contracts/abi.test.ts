import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { erc20Abi, toFunctionSelector } from "viem";
import { functionsOf } from "./abi.ts";

describe("functionsOf", () => {
  it("names every function of an ERC-20 by selector and signature, skipping events", () => {
    const parsed = functionsOf(erc20Abi as unknown as unknown[]);
    assert.equal(parsed.kind, "ok");
    const bySelector = Object.fromEntries(
      parsed.kind === "ok" ? parsed.functions.map((f) => [f.selector, f.signature]) : [],
    );
    assert.equal(bySelector["0xa9059cbb"], "transfer(address,uint256)");
    assert.equal(bySelector["0x095ea7b3"], "approve(address,uint256)");
    assert.equal(Object.keys(bySelector).length, 9);
  });

  it("expands tuples and arrays, and reads functions without a type field", () => {
    const parsed = functionsOf([
      { name: "mint", inputs: [{ name: "id", type: "uint256" }] },
      {
        type: "function",
        name: "swap",
        inputs: [{ type: "tuple[]", components: [{ type: "address" }, { type: "uint256[2]" }] }],
      },
    ]);
    assert.deepEqual(parsed, {
      kind: "ok",
      functions: [
        { selector: "0xa0712d68", signature: "mint(uint256)" },
        {
          selector: toFunctionSelector("swap((address,uint256[2])[])"),
          signature: "swap((address,uint256[2])[])",
        },
      ],
    });
  });

  it("refuses what is not an ABI, with the entry that is wrong", () => {
    const cases: [unknown[], RegExp][] = [
      [[], /no function/],
      [[{ type: "event", name: "Transfer", inputs: [] }], /no function/],
      [[7], /entry 0 is not an object/],
      [[{ type: "function", name: "x", inputs: [{ type: "uint257" }] }], /'uint257' is not an ABI type/],
      [[{ type: "function", name: "x", inputs: [{ type: "bytes33" }] }], /not an ABI type/],
      [[{ type: "function", name: "x", inputs: [{ type: "tuple" }] }], /no components/],
      [[{ type: "function", name: "1x", inputs: [] }], /no valid function name/],
      [[{ type: "function", inputs: [] }], /no valid function name/],
      [[{ type: "function", name: "x", inputs: "uint256" }], /inputs is not an array/],
    ];
    for (const [abi, why] of cases) {
      const parsed = functionsOf(abi);
      assert.equal(parsed.kind, "invalid", JSON.stringify(abi));
      assert.match((parsed as { detail: string }).detail, why);
    }
  });
});
