import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../config.ts";
import { statusOf } from "../http/catalogue.ts";
import { quote } from "./policy.ts";

const chain = loadConfig({ CHAIN_14601_PAYMASTER_ADDRESS: "0x00000000000000000000000000000000000000aa" })
  .chains[0]!;
const fees = { maxFeePerGasWei: 3_000_000_000n, maxPriorityFeePerGasWei: 1_000_000_000n };
const base = { chain, chainId: 14601, estimatedGas: 150_000n, ttlSec: 300, clockSkewSec: 60, fees };

describe("quote", () => {
  it("reserves the gas ceiling at the fee ceiling and backdates validAfter by the clock skew", () => {
    const q = quote({ ...base, nowMs: 1_800_000_000_500 });
    assert.deepEqual(q, {
      kind: "quote",
      maxTotalGas: 150_000n,
      maxFeePerGasWei: 3_000_000_000n,
      maxPriorityFeePerGasWei: 1_000_000_000n,
      maxGasCostWei: 150_000n * 3_000_000_000n,
      validAfterSec: 1_800_000_000 - 60,
      validUntilSec: 1_800_000_300,
      paymaster: "0x00000000000000000000000000000000000000aa",
    });
  });

  it("refuses an unknown chain (400), a chain without a paymaster (503) and stale fees (503)", () => {
    const unknown = quote({ ...base, chain: undefined, chainId: 1, nowMs: 0 });
    assert.deepEqual(unknown.kind === "denied" && [statusOf(unknown.code), unknown.code], [
      400,
      "unsupported_chain",
    ]);
    const bare = quote({ ...base, chain: { ...chain, paymaster: null }, nowMs: 0 });
    assert.deepEqual(bare.kind === "denied" && [statusOf(bare.code), bare.code], [
      503,
      "chain_not_configured",
    ]);
    const stale = quote({ ...base, fees: null, nowMs: 0 });
    assert.deepEqual(stale.kind === "denied" && [statusOf(stale.code), stale.code], [
      503,
      "fee_oracle_stale",
    ]);
  });

  it("never opens a window before the epoch", () => {
    const q = quote({ ...base, nowMs: 10_000 });
    assert.equal(q.kind === "quote" && q.validAfterSec, 0);
  });
});
