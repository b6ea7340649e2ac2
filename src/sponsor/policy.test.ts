import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../config.ts";
import { quote } from "./policy.ts";

const chain = loadConfig({ CHAIN_14601_PAYMASTER_ADDRESS: "0x00000000000000000000000000000000000000aa" })
  .chains[0]!;

describe("quote", () => {
  it("prices maxGasCost as estimatedGas × the chain's fee cap and opens the window now", () => {
    const q = quote({ chain, chainId: 14601, estimatedGas: 150_000n, ttlSec: 300, nowMs: 1_800_000_000_500 });
    assert.deepEqual(q, {
      kind: "quote",
      maxGasCostWei: 150_000n * 200_000_000_000n,
      validAfterSec: 1_800_000_000,
      validUntilSec: 1_800_000_300,
      paymaster: "0x00000000000000000000000000000000000000aa",
    });
  });

  it("refuses an unknown chain (400) and a chain without a paymaster (503)", () => {
    assert.equal(
      quote({ chain: undefined, chainId: 1, estimatedGas: 1n, ttlSec: 300, nowMs: 0 }).kind,
      "denied",
    );
    const bare = { ...chain, paymaster: null };
    const q = quote({ chain: bare, chainId: 14601, estimatedGas: 1n, ttlSec: 300, nowMs: 0 });
    assert.deepEqual(q.kind === "denied" && [q.status, q.code], [503, "chain_not_configured"]);
  });
});
