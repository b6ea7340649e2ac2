import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConfigError, loadConfig } from "./config.ts";

describe("loadConfig", () => {
  it("has working defaults for the embedded mode", () => {
    const c = loadConfig({});
    assert.equal(c.port, 3000);
    assert.equal(c.databaseUrl, null);
    assert.equal(c.redisUrl, null);
    assert.equal(c.chains[0]!.chainId, 14601);
    assert.equal(c.chains[0]!.paymaster, null);
    assert.equal(c.chains[0]!.maxFeePerGasWei, 200_000_000_000n);
    assert.equal(c.chains[0]!.confirmations, 2);
    assert.equal(c.clockSkewSec, 60);
  });

  it("prices at the market by default: 1 wei floor, 200 gwei ceiling, 50 % margin, 1 s refresh, 30 s bound", () => {
    const c = loadConfig({}).chains[0]!;
    assert.deepEqual(
      [c.minFeePerGasWei, c.maxFeePerGasWei, c.feeMarginPercent, c.feeRefreshMs, c.feeMaxAgeMs],
      [1n, 200_000_000_000n, 50, 1000, 30_000],
    );
  });

  it("reads the fee oracle's settings and the clock skew", () => {
    const c = loadConfig({
      CHAIN_14601_MIN_FEE_PER_GAS_WEI: "1000000",
      CHAIN_14601_MAX_FEE_PER_GAS_WEI: "1000000",
      CHAIN_14601_FEE_MARGIN_PERCENT: "0",
      CHAIN_14601_FEE_REFRESH_MS: "250",
      CHAIN_14601_FEE_MAX_AGE_MS: "500",
      CLOCK_SKEW_SEC: "0",
    });
    const chain = c.chains[0]!;
    assert.deepEqual(
      [
        chain.minFeePerGasWei,
        chain.maxFeePerGasWei,
        chain.feeMarginPercent,
        chain.feeRefreshMs,
        chain.feeMaxAgeMs,
      ],
      [1_000_000n, 1_000_000n, 0, 250, 500],
    );
    assert.equal(c.clockSkewSec, 0);
  });

  it("refuses a fee floor above the ceiling and a staleness bound shorter than two refreshes, naming both sides", () => {
    assert.throws(
      () =>
        loadConfig({
          CHAIN_14601_MIN_FEE_PER_GAS_WEI: "300000000000",
          CHAIN_14601_FEE_REFRESH_MS: "20000",
        }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.match(
          err.message,
          /CHAIN_14601_MIN_FEE_PER_GAS_WEI: must not exceed CHAIN_14601_MAX_FEE_PER_GAS_WEI/,
        );
        assert.match(
          err.message,
          /CHAIN_14601_FEE_MAX_AGE_MS: must be at least twice CHAIN_14601_FEE_REFRESH_MS/,
        );
        return true;
      },
    );
  });

  it("bounds the margin, the refresh, the staleness bound, the floor and the clock skew", () => {
    const bad = {
      CHAIN_14601_FEE_MARGIN_PERCENT: "1001",
      CHAIN_14601_FEE_REFRESH_MS: "10",
      CHAIN_14601_FEE_MAX_AGE_MS: "-1",
      CHAIN_14601_MIN_FEE_PER_GAS_WEI: "0",
      CLOCK_SKEW_SEC: "3601",
    };
    assert.throws(
      () => loadConfig(bad),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        for (const name of Object.keys(bad)) assert.match(err.message, new RegExp(`${name}: `));
        return true;
      },
    );
  });

  it("names every bad variable at once and never echoes a secret", () => {
    const secret = "0xnot-a-key-but-secret";
    assert.throws(
      () =>
        loadConfig({
          PORT: "99999",
          DATABASE_URL: "mysql://x",
          SIGNER_PRIVATE_KEY: secret,
          CHAIN_14601_PAYMASTER_ADDRESS: "0x123",
          CHAIN_14601_MAX_FEE_PER_GAS_WEI: "1.5",
          OIDC_ISSUER: "https://id.example",
        }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        for (const name of [
          "PORT",
          "DATABASE_URL",
          "SIGNER_PRIVATE_KEY",
          "CHAIN_14601_PAYMASTER_ADDRESS",
          "CHAIN_14601_MAX_FEE_PER_GAS_WEI",
          "OIDC_",
        ]) {
          assert.match(err.message, new RegExp(name));
        }
        assert.ok(!err.message.includes(secret));
        return true;
      },
    );
  });
});
