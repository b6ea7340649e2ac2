import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConfigError, liveEntryPointAt, liveEntryPoints, loadConfig } from "./config.ts";

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

  it("reads DATABASE_READ_URL as a list of replicas, needs DATABASE_URL, and never echoes a URL", () => {
    const primary = "postgres://app:s3cret-primary@db:5432/gss";
    const c = loadConfig({
      DATABASE_URL: primary,
      DATABASE_READ_URL: "postgres://app:pw1@r1:5432/gss, postgresql://app:pw2@r2:5432/gss",
    });
    assert.deepEqual(c.databaseReadUrls, [
      "postgres://app:pw1@r1:5432/gss",
      "postgresql://app:pw2@r2:5432/gss",
    ]);
    assert.equal(c.databaseReadMaxLagMs, 2000);
    assert.deepEqual(loadConfig({}).databaseReadUrls, []);
    assert.throws(
      () => loadConfig({ DATABASE_READ_URL: "postgres://app:pw1@r1:5432/gss" }),
      (err: Error) => err instanceof ConfigError && /DATABASE_READ_URL: needs DATABASE_URL/.test(err.message),
    );
    for (const bad of [
      "postgres://app:pw1@r1/gss,,",
      "postgres://app:pw1@r1/gss,mysql://app:pw2@r2/x",
      "nope",
    ]) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: primary, DATABASE_READ_URL: bad }),
        (err: Error) =>
          err instanceof ConfigError &&
          /DATABASE_READ_URL: /.test(err.message) &&
          !/pw1|pw2|s3cret/.test(err.message),
        bad,
      );
    }
    assert.throws(
      () => loadConfig({ DATABASE_URL: primary, DATABASE_READ_MAX_LAG_MS: "-1" }),
      (err: Error) => err instanceof ConfigError && /DATABASE_READ_MAX_LAG_MS: /.test(err.message),
    );
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

  it("bounds the margin, the refresh, the staleness bound, the floor, the clock skew and the code check's settings", () => {
    const bad = {
      CHAIN_14601_FEE_MARGIN_PERCENT: "1001",
      CHAIN_14601_FEE_REFRESH_MS: "10",
      CHAIN_14601_FEE_MAX_AGE_MS: "-1",
      CHAIN_14601_MIN_FEE_PER_GAS_WEI: "0",
      CLOCK_SKEW_SEC: "3601",
      SENDER_CODE_TTL_MS: "3600001",
      MAX_CALL_DATA_BYTES: "3",
      MAX_SIGNATURE_BYTES: "64",
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

  it("names both EntryPoints at their canonical addresses and serves neither until a paymaster is set", () => {
    const chain = loadConfig({}).chains[0]!;
    assert.deepEqual(chain.entryPoints, [
      { version: "0.7", entryPoint: "0x0000000071727De22E5E9d8BAf0edAc6f37da032", paymaster: null },
      { version: "0.8", entryPoint: "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108", paymaster: null },
    ]);
    assert.deepEqual(liveEntryPoints(chain), []);
    // The v0.7 pair keeps its old fields.
    assert.equal(chain.entryPoint, "0x0000000071727De22E5E9d8BAf0edAc6f37da032");
  });

  it("reads the v0.8 pair beside the v0.7 one; either can be live alone", () => {
    const v07Paymaster = "0x1111111111111111111111111111111111111111";
    const v08Paymaster = "0x2222222222222222222222222222222222222222";
    const both = loadConfig({
      CHAIN_14601_PAYMASTER_ADDRESS: v07Paymaster,
      CHAIN_14601_PAYMASTER_V08_ADDRESS: v08Paymaster,
    }).chains[0]!;
    assert.deepEqual(
      liveEntryPoints(both).map((e) => [e.version, e.paymaster]),
      [
        ["0.7", v07Paymaster],
        ["0.8", v08Paymaster],
      ],
    );
    assert.equal(both.paymaster, v07Paymaster);
    assert.equal(
      liveEntryPointAt(both, "0x4337084d9e255ff0702461cf8895ce9e3b5ff108")?.paymaster,
      v08Paymaster,
    );
    assert.equal(liveEntryPointAt(both, "0x3333333333333333333333333333333333333333"), null);

    const v08Only = loadConfig({
      CHAIN_14601_PAYMASTER_V08_ADDRESS: v08Paymaster,
      CHAIN_14601_ENTRYPOINT_V08_ADDRESS: "0x4444444444444444444444444444444444444444",
    }).chains[0]!;
    assert.equal(v08Only.paymaster, null);
    assert.deepEqual(liveEntryPoints(v08Only), [
      { version: "0.8", entryPoint: "0x4444444444444444444444444444444444444444", paymaster: v08Paymaster },
    ]);
    // Not served on this chain: the v0.7 EntryPoint has no paymaster.
    assert.equal(liveEntryPointAt(v08Only, v08Only.entryPoint), null);
  });

  it("refuses one address for both EntryPoints or both paymasters, and a malformed v0.8 address", () => {
    assert.throws(
      () =>
        loadConfig({
          CHAIN_14601_ENTRYPOINT_V08_ADDRESS: "0x0000000071727de22e5e9d8baf0edac6f37da032",
          CHAIN_14601_PAYMASTER_ADDRESS: "0x1111111111111111111111111111111111111111",
          CHAIN_14601_PAYMASTER_V08_ADDRESS: "0x1111111111111111111111111111111111111111",
        }),
      (err: Error) => {
        assert.match(
          err.message,
          /CHAIN_14601_ENTRYPOINT_V08_ADDRESS: must differ from CHAIN_14601_ENTRYPOINT_ADDRESS/,
        );
        assert.match(
          err.message,
          /CHAIN_14601_PAYMASTER_V08_ADDRESS: must differ from CHAIN_14601_PAYMASTER_ADDRESS/,
        );
        return true;
      },
    );
    assert.throws(
      () => loadConfig({ CHAIN_14601_PAYMASTER_V08_ADDRESS: "0x12" }),
      /CHAIN_14601_PAYMASTER_V08_ADDRESS/,
    );
  });

  it("holds paymasters to 1 native-token unit of stake and a day's unstake delay by default; both are per chain and bounded", () => {
    const defaults = loadConfig({}).chains[0]!;
    assert.deepEqual(
      [defaults.paymasterMinStakeWei, defaults.paymasterMinUnstakeDelaySec],
      [10n ** 18n, 86_400],
    );
    const set = loadConfig({
      CHAIN_14601_PAYMASTER_MIN_STAKE_WEI: "0",
      CHAIN_14601_PAYMASTER_MIN_UNSTAKE_DELAY_SEC: "3600",
    }).chains[0]!;
    assert.deepEqual([set.paymasterMinStakeWei, set.paymasterMinUnstakeDelaySec], [0n, 3600]);
    assert.throws(
      () =>
        loadConfig({
          CHAIN_14601_PAYMASTER_MIN_STAKE_WEI: "1e18",
          CHAIN_14601_PAYMASTER_MIN_UNSTAKE_DELAY_SEC: String(2 ** 32),
        }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /CHAIN_14601_PAYMASTER_MIN_STAKE_WEI: must be a non-negative integer/.test(err.message) &&
        /CHAIN_14601_PAYMASTER_MIN_UNSTAKE_DELAY_SEC: must be between 0 and 4294967295/.test(err.message),
    );
  });

  it("bounds developers and client addresses by default: 20 orgs, 100 projects per org, 600/min, 60 failed auths/min", () => {
    const c = loadConfig({});
    assert.deepEqual(
      [c.maxOrgsPerDeveloper, c.maxProjectsPerOrg, c.developerRateLimit, c.failedAuthLimit],
      [20, 100, 600, 60],
    );
    const set = loadConfig({
      MAX_ORGS_PER_DEVELOPER: "1",
      MAX_PROJECTS_PER_ORG: "5000",
      DEVELOPER_RATE_LIMIT: "1000000",
      FAILED_AUTH_LIMIT: "3",
    });
    assert.deepEqual(
      [set.maxOrgsPerDeveloper, set.maxProjectsPerOrg, set.developerRateLimit, set.failedAuthLimit],
      [1, 5000, 1_000_000, 3],
    );
  });

  it("keeps webhook deliveries and events 30 days by default, from 1 day to 10 years", () => {
    assert.equal(loadConfig({}).webhookRetentionDays, 30);
    assert.equal(loadConfig({ WEBHOOK_RETENTION_DAYS: "1" }).webhookRetentionDays, 1);
    assert.equal(loadConfig({ WEBHOOK_RETENTION_DAYS: "3650" }).webhookRetentionDays, 3650);
    for (const bad of ["0", "3651", "-5", "7.5", "a week"]) {
      assert.throws(
        () => loadConfig({ WEBHOOK_RETENTION_DAYS: bad }),
        (err: Error) => err instanceof ConfigError && /WEBHOOK_RETENTION_DAYS: /.test(err.message),
        bad,
      );
    }
  });

  it("gives webhook deliveries 64 slots, 8 per endpoint and 16 per project, and keeps the project's cap below the slots", () => {
    const d = loadConfig({});
    assert.deepEqual(
      [d.webhookConcurrency, d.webhookMaxInFlightPerEndpoint, d.webhookMaxInFlightPerProject],
      [64, 8, 16],
    );
    const set = loadConfig({
      WEBHOOK_CONCURRENCY: "16",
      WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: "2",
      WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT: "15",
    });
    assert.deepEqual(
      [set.webhookConcurrency, set.webhookMaxInFlightPerEndpoint, set.webhookMaxInFlightPerProject],
      [16, 2, 15],
    );
    for (const [name, bad] of [
      ["WEBHOOK_CONCURRENCY", "1"],
      ["WEBHOOK_CONCURRENCY", "257"],
      ["WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", "0"],
      ["WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT", "two"],
    ] as const) {
      assert.throws(
        () => loadConfig({ [name]: bad }),
        (err: Error) => err instanceof ConfigError && new RegExp(`${name}: `).test(err.message),
        `${name}=${bad}`,
      );
    }
    // A project allowed every slot could stall all the others.
    assert.throws(
      () => loadConfig({ WEBHOOK_CONCURRENCY: "4", WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT: "4" }),
      (err: Error) =>
        err instanceof ConfigError &&
        /WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT: must be below WEBHOOK_CONCURRENCY/.test(err.message),
    );
  });

  it("reads one Redis server, a Redis Cluster or a master through Sentinel, credentials from REDIS_URL", () => {
    assert.equal(loadConfig({}).redis, null);
    assert.deepEqual(loadConfig({ REDIS_URL: "redis://127.0.0.1:6379" }).redis, {
      mode: "standalone",
      url: "redis://127.0.0.1:6379",
      commandTimeoutMs: 500,
    });
    assert.equal(
      loadConfig({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_COMMAND_TIMEOUT_MS: "2000" }).redis
        ?.commandTimeoutMs,
      2000,
    );
    assert.deepEqual(
      loadConfig({ REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-b.internal:7001,[::1]:7002" }).redis,
      {
        mode: "cluster",
        url: null,
        commandTimeoutMs: 500,
        nodes: [
          { host: "10.0.0.1", port: 7000 },
          { host: "redis-b.internal", port: 7001 },
          { host: "::1", port: 7002 },
        ],
      },
    );
    const sentinel = loadConfig({
      REDIS_URL: "rediss://:s3cret@redis/2",
      REDIS_SENTINELS: "10.0.0.1:26379,10.0.0.2:26379",
      REDIS_SENTINEL_NAME: "gss",
    }).redis;
    assert.equal(sentinel?.mode, "sentinel");
    assert.deepEqual(
      sentinel.mode === "sentinel" && [sentinel.masterName, sentinel.url, sentinel.sentinels.length],
      ["gss", "rediss://:s3cret@redis/2", 2],
    );
  });

  it("refuses a Redis topology that is half set, doubly set or malformed, never quoting a password", () => {
    for (const [env, message] of [
      [{ REDIS_CLUSTER_NODES: "a:1", REDIS_SENTINELS: "b:2", REDIS_SENTINEL_NAME: "m" }, /set one of them/],
      [{ REDIS_SENTINELS: "b:2" }, /REDIS_SENTINELS needs REDIS_SENTINEL_NAME/],
      [{ REDIS_SENTINEL_NAME: "m" }, /REDIS_SENTINEL_NAME needs REDIS_SENTINELS/],
      [{ REDIS_SENTINEL_PASSWORD: "hunter2hunter2" }, /REDIS_SENTINEL_PASSWORD needs REDIS_SENTINELS/],
      [{ REDIS_CLUSTER_NODES: "a:1,b" }, /REDIS_CLUSTER_NODES: entry 2 must be host:port/],
      [{ REDIS_CLUSTER_NODES: "a:70000" }, /REDIS_CLUSTER_NODES: entry 1 must be host:port/],
      [{ REDIS_SENTINELS: ",", REDIS_SENTINEL_NAME: "m" }, /REDIS_SENTINELS: must list 1 to 64/],
      [{ REDIS_URL: "redis://:hunter2hunter2@x/3", REDIS_CLUSTER_NODES: "a:1" }, /only database 0/],
      [{ REDIS_URL: "redis://x", REDIS_COMMAND_TIMEOUT_MS: "0" }, /REDIS_COMMAND_TIMEOUT_MS: /],
      [{ REDIS_URL: "redis://x", REDIS_COMMAND_TIMEOUT_MS: "1.5" }, /REDIS_COMMAND_TIMEOUT_MS: /],
      [
        { REDIS_SENTINELS: "b:2", REDIS_SENTINEL_NAME: "m", REDIS_SENTINEL_PASSWORD: "two words" },
        /REDIS_SENTINEL_PASSWORD: /,
      ],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (err: Error) => {
          assert.ok(err instanceof ConfigError);
          assert.match(err.message, message);
          assert.doesNotMatch(err.message, /hunter2|two words/);
          return true;
        },
        JSON.stringify(env),
      );
    }
  });

  it("refuses a zero, negative or unbounded quota or limit, naming each variable", () => {
    const bad = {
      MAX_ORGS_PER_DEVELOPER: "0",
      MAX_PROJECTS_PER_ORG: "-1",
      DEVELOPER_RATE_LIMIT: "1000001",
      FAILED_AUTH_LIMIT: "ten",
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

  it("takes the secrets key and its predecessors as 32 bytes of hex or base64, never quoting a bad one", () => {
    const hex = "ab".repeat(32);
    const base64 = Buffer.alloc(32, 7).toString("base64");
    const c = loadConfig({
      SECRETS_ENCRYPTION_KEY: hex,
      SECRETS_ENCRYPTION_KEYS_PREVIOUS: ` ${base64}, ${Buffer.alloc(32, 9).toString("base64url")}`,
    });
    assert.equal(c.secretsEncryptionKey?.toString("hex"), hex);
    assert.deepEqual(
      c.secretsEncryptionKeysPrevious.map((k) => k.toString("hex")),
      ["07".repeat(32), "09".repeat(32)],
    );
    assert.equal(loadConfig({}).secretsEncryptionKey, null);
    assert.deepEqual(loadConfig({}).secretsEncryptionKeysPrevious, []);
    const secret = "my-precious-but-short-key";
    assert.throws(
      () =>
        loadConfig({
          SECRETS_ENCRYPTION_KEY: secret,
          SECRETS_ENCRYPTION_KEYS_PREVIOUS: `${base64},${secret}`,
        }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /SECRETS_ENCRYPTION_KEY: must be 32 bytes/);
        assert.match(err.message, /SECRETS_ENCRYPTION_KEYS_PREVIOUS: entry 2 must be 32 bytes/);
        assert.ok(!err.message.includes(secret));
        return true;
      },
    );
    assert.throws(() => loadConfig({ SECRETS_ENCRYPTION_KEY: "00".repeat(32) }), /must not be all zeros/);
  });

  describe("the identity provider's URLs", () => {
    const oidc = (issuer: string, jwksUrl: string, env: Record<string, string> = {}) =>
      loadConfig({ OIDC_ISSUER: issuer, OIDC_AUDIENCE: "gss", OIDC_JWKS_URL: jwksUrl, ...env });
    const production = { NODE_ENV: "production" };

    it("takes https anywhere, and http for a loopback provider outside production", () => {
      assert.equal(
        oidc("https://id.example", "https://id.example/jwks", production).oidc?.jwksUrl,
        "https://id.example/jwks",
      );
      for (const local of [
        "http://127.0.0.1:8080",
        "http://localhost:9000",
        "http://[::1]:9000",
        "http://127.9.9.9",
      ]) {
        assert.equal(oidc(local, `${local}/jwks`).oidc?.issuer, local);
      }
    });

    it("refuses http in production, loopback included, naming each setting", () => {
      assert.throws(
        () => oidc("http://127.0.0.1:8080", "http://localhost:8080/jwks", production),
        (err: Error) => {
          assert.ok(err instanceof ConfigError);
          assert.match(err.message, /OIDC_ISSUER: must use https: in production/);
          assert.match(err.message, /OIDC_JWKS_URL: must use https: in production/);
          return true;
        },
      );
    });

    it("refuses http to a host that is not loopback, and anything that is not a URL, in any environment", () => {
      assert.throws(
        () => oidc("http://id.example", "http://10.0.0.5/jwks"),
        (err: Error) => {
          assert.match(
            err.message,
            /OIDC_ISSUER: must use https: \(http is accepted only for a loopback host/,
          );
          assert.match(
            err.message,
            /OIDC_JWKS_URL: must use https: \(http is accepted only for a loopback host/,
          );
          return true;
        },
      );
      // A name that only starts like loopback is not loopback.
      assert.throws(() => oidc("https://id.example", "http://127.0.0.1.example.com/jwks"), /OIDC_JWKS_URL: /);
      assert.throws(
        () => oidc("id.example", "ftp://id.example/jwks"),
        (err: Error) => {
          assert.match(err.message, /OIDC_ISSUER: must be a URL/);
          assert.match(err.message, /OIDC_JWKS_URL: must use https:/);
          return true;
        },
      );
    });
  });
});
