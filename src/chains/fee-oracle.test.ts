import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../config.ts";
import { chainFeeOracle, feeHealth, fixedFeeOracle, judgeReading, type ObservedFees } from "./fee-oracle.ts";
import type { WatcherLog } from "./poll-loop.ts";

const observed: ObservedFees = {
  baseFeePerGasWei: 7n,
  priorityFeePerGasWei: 2n,
  blockNumber: 12n,
  observedAtMs: 1_000_000,
};

describe("judgeReading", () => {
  it("is stale with no age before the first reading", () => {
    assert.deepEqual(judgeReading(null, 5, 100), { kind: "stale", reason: "never_read", ageMs: null });
  });

  it("serves a reading up to its bound inclusive, then calls it too old", () => {
    assert.deepEqual(judgeReading(observed, 1_000_100, 100), { kind: "fresh", fees: observed });
    assert.deepEqual(judgeReading(observed, 1_000_101, 100), {
      kind: "stale",
      reason: "too_old",
      ageMs: 101,
    });
  });

  it("treats a reading from a clock that stepped back as new", () => {
    assert.equal(judgeReading(observed, 999_000, 100).kind, "fresh");
  });
});

describe("feeHealth", () => {
  it("is ok with the fees while fresh, even if the last refresh failed", () => {
    const h = feeHealth({
      reading: { kind: "fresh", fees: observed },
      maxAgeMs: 100,
      lastError: "HTTP request failed.",
      failures: 2,
    });
    assert.equal(h.status, "ok");
    assert.match(h.detail, /base fee 7 wei, priority fee 2 wei at block 12/);
    assert.match(h.detail, /2 refreshes failed in a row, last: HTTP request failed\./);
  });

  it("is degraded, never down, when stale: only this chain's authorizations are refused", () => {
    const old = feeHealth({
      reading: { kind: "stale", reason: "too_old", ageMs: 4000 },
      maxAgeMs: 3000,
      lastError: null,
      failures: 0,
    });
    assert.deepEqual(old, {
      status: "degraded",
      detail: "fees are 4000 ms old (limit 3000 ms): authorize refuses this chain",
    });
    const never = feeHealth({
      reading: { kind: "stale", reason: "never_read", ageMs: null },
      maxAgeMs: 3000,
      lastError: "x",
      failures: 1,
    });
    assert.equal(never.status, "degraded");
    assert.match(never.detail, /not read yet.*1 refresh failed in a row/);
  });
});

describe("fixedFeeOracle", () => {
  it("answers its fees for every chain, and turns stale when set to null", () => {
    const oracle = fixedFeeOracle({ baseFeePerGasWei: 3n, priorityFeePerGasWei: 1n }, () => 42);
    assert.deepEqual(oracle.current(14601), {
      kind: "fresh",
      fees: { baseFeePerGasWei: 3n, priorityFeePerGasWei: 1n, blockNumber: 0n, observedAtMs: 42 },
    });
    oracle.set(null);
    assert.deepEqual(oracle.current(1), { kind: "stale", reason: "never_read", ageMs: null });
    assert.deepEqual(oracle.probes, []);
  });
});

describe("chainFeeOracle without a reachable RPC", () => {
  it("stays stale, logs the failure once per streak without the RPC URL, and reports it as degraded", async () => {
    const config = loadConfig({
      CHAIN_14601_RPC_URL: "http://127.0.0.1:9/v1/secret-api-key",
      CHAIN_14601_PAYMASTER_ADDRESS: "0x00000000000000000000000000000000000000aa",
      CHAIN_14601_FEE_REFRESH_MS: "50",
    });
    const lines: string[] = [];
    const record = (level: string) => (obj: object, msg?: string) =>
      lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
    const log: WatcherLog = {
      debug: record("debug"),
      info: record("info"),
      warn: record("warn"),
      error: record("error"),
    };
    const oracle = chainFeeOracle(config, { rpcTimeoutMs: 1000 });
    assert.equal(oracle.current(14601).kind, "stale");
    oracle.start(log);
    try {
      const probe = oracle.probes[0]!;
      assert.equal(probe.name, "chain:14601:fees");
      let detail = "";
      for (let i = 0; i < 400 && !/^fees not read yet.*\b([3-9]|\d\d+) refreshes failed/.test(detail); i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        detail = (await probe.check()).detail ?? "";
      }
      assert.match(detail, /\b([3-9]|\d\d+) refreshes failed in a row/, "three failed refreshes");
      assert.equal((await probe.check()).status, "degraded");
      assert.deepEqual(oracle.current(14601), { kind: "stale", reason: "never_read", ageMs: null });
      assert.deepEqual(oracle.current(1), { kind: "stale", reason: "not_watched", ageMs: null });
      const warnings = lines.filter((l) => l.startsWith("warn "));
      assert.equal(warnings.length, 1, lines.join("\n"));
      assert.ok(!lines.some((l) => l.includes("secret-api-key")) && !detail.includes("secret-api-key"));
    } finally {
      await oracle.stop();
    }
  });

  it("watches no chain that lacks a paymaster", () => {
    const oracle = chainFeeOracle(loadConfig({}));
    assert.deepEqual(oracle.probes, []);
    assert.deepEqual(oracle.current(14601), { kind: "stale", reason: "not_watched", ageMs: null });
  });
});
