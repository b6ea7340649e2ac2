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
