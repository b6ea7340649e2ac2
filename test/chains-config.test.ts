/**
 * Chains by configuration (issue 23): CHAINS names the chains a deployment serves, the built-in
 * ones (Sonic testnet 14601, Sonic 146) bring their defaults, any other EVM chain is described by
 * its CHAIN_<id>_* settings, and GET /blockchain/chains lists what is served and whether its node
 * answers.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FeeOracle, fixedFeeOracle } from "../src/chains/fee-oracle.ts";
import { ConfigError, loadConfig } from "../src/config.ts";
import { startTestApp, TEST_FEES } from "./support/app.ts";

const ENTRYPOINT_V07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
const ENTRYPOINT_V08 = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108";

/** The problems loadConfig reports for `env`, one per line of its ConfigError (none: it loaded). */
function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.message
      .split("\n")
      .slice(1)
      .map((line) => line.replace(/^\s*- /, ""));
  }
}

const ANVIL = {
  CHAINS: "14601,31337",
  CHAIN_31337_NAME: "Local Anvil",
  CHAIN_31337_RPC_URL: "http://127.0.0.1:8545",
  CHAIN_31337_CURRENCY_SYMBOL: "tETH",
};

describe("CHAINS", () => {
  it("serves only chain 14601 by default, so no other chain's RPC is ever contacted unasked", () => {
    const chains = loadConfig({}).chains;
    assert.deepEqual(
      chains.map((c) => [c.chainId, c.name, c.rpcUrl, c.active]),
      [[14601, "Sonic Testnet", "https://rpc.testnet.soniclabs.com", true]],
    );
  });

  it("serves Sonic mainnet 146 beside 14601 with its built-in defaults, in the order listed", () => {
    const chains = loadConfig({ CHAINS: "14601,146" }).chains;
    assert.deepEqual(
      chains.map((c) => c.chainId),
      [14601, 146],
    );
    const sonic = chains[1]!;
    assert.equal(sonic.name, "Sonic");
    assert.deepEqual(sonic.nativeCurrency, { name: "Sonic", symbol: "S", decimals: 18 });
    assert.equal(sonic.rpcUrl, "https://rpc.soniclabs.com");
    assert.equal(sonic.entryPoint, ENTRYPOINT_V07);
    assert.equal(sonic.paymaster, null);
    assert.deepEqual(sonic.entryPoints, [
      { version: "0.7", entryPoint: ENTRYPOINT_V07, paymaster: null },
      { version: "0.8", entryPoint: ENTRYPOINT_V08, paymaster: null },
    ]);
    assert.equal(sonic.active, true);
    // The first id is chains[0], which existing code treats as the home chain.
    assert.equal(loadConfig({ CHAINS: " 146 , 14601 " }).chains[0]!.chainId, 146);
  });

  it("reads each chain's own CHAIN_<id>_* settings, never another chain's", () => {
    const chains = loadConfig({
      CHAINS: "14601,146",
      CHAIN_146_RPC_URL: "https://sonic.example/rpc",
      CHAIN_146_PAYMASTER_ADDRESS: "0x00000000000000000000000000000000000000bb",
      CHAIN_146_CONFIRMATIONS: "5",
    }).chains;
    assert.deepEqual(
      chains.map((c) => [c.chainId, c.rpcUrl, c.paymaster, c.confirmations]),
      [
        [14601, "https://rpc.testnet.soniclabs.com", null, 2],
        [146, "https://sonic.example/rpc", "0x00000000000000000000000000000000000000bb", 5],
      ],
    );
  });

  it("refuses a chain that is not built in until its name, RPC URL and currency symbol are given, naming each", () => {
    assert.deepEqual(problemsOf({ CHAINS: "14601,31337" }), [
      "CHAIN_31337_NAME: required, as chain 31337 is in CHAINS and is not built in",
      "CHAIN_31337_RPC_URL: required, as chain 31337 is in CHAINS and is not built in",
      "CHAIN_31337_CURRENCY_SYMBOL: required, as chain 31337 is in CHAINS and is not built in",
    ]);
    const { CHAIN_31337_RPC_URL: _, ...withoutRpc } = ANVIL;
    assert.deepEqual(problemsOf(withoutRpc), [
      "CHAIN_31337_RPC_URL: required, as chain 31337 is in CHAINS and is not built in",
    ]);
  });

  it("serves a chain that is not built in with its given currency; name defaults to the symbol, decimals to 18", () => {
    const [, anvil] = loadConfig(ANVIL).chains;
    assert.equal(anvil!.chainId, 31337);
    assert.equal(anvil!.name, "Local Anvil");
    assert.equal(anvil!.rpcUrl, "http://127.0.0.1:8545");
    assert.deepEqual(anvil!.nativeCurrency, { name: "tETH", symbol: "tETH", decimals: 18 });
    assert.equal(anvil!.entryPoint, ENTRYPOINT_V07);
    assert.equal(anvil!.confirmations, 2);

    const [, named] = loadConfig({
      ...ANVIL,
      CHAIN_31337_CURRENCY_NAME: "Test Ether",
      CHAIN_31337_CURRENCY_DECIMALS: "6",
    }).chains;
    assert.deepEqual(named!.nativeCurrency, { name: "Test Ether", symbol: "tETH", decimals: 6 });
  });

  it("lets a built-in chain's name and currency be overridden by the same settings", () => {
    const [sonic] = loadConfig({
      CHAINS: "146",
      CHAIN_146_NAME: "Sonic Mainnet",
      CHAIN_146_CURRENCY_SYMBOL: "SONIC",
      CHAIN_146_CURRENCY_DECIMALS: "9",
    }).chains;
    assert.equal(sonic!.name, "Sonic Mainnet");
    assert.deepEqual(sonic!.nativeCurrency, { name: "Sonic", symbol: "SONIC", decimals: 9 });
    assert.equal(sonic!.rpcUrl, "https://rpc.soniclabs.com");
  });

  it("reports duplicates, junk, zero, negative and out-of-range chain ids as CHAINS problems", () => {
    for (const bad of [
      "14601,146,14601",
      "146,0146",
      "abc",
      "0",
      "-1",
      "1.5",
      "1e3",
      "14601,",
      ",",
      "0x92",
      "2147483648",
      "9007199254740993",
      "99999999999999999999",
    ]) {
      const problems = problemsOf({ CHAINS: bad });
      assert.equal(problems.length, 1, `${bad}: ${problems.join("; ")}`);
      assert.match(problems[0]!, /^CHAINS: /, bad);
    }
    assert.match(problemsOf({ CHAINS: "146,146" })[0]!, /chain 146 is listed twice/);
    assert.match(problemsOf({ CHAINS: "14601,abc" })[0]!, /entry 2 \("abc"\) is not a chain id/);
    const many = Array.from({ length: 65 }, (_, i) => String(i + 1)).join(",");
    assert.match(problemsOf({ CHAINS: many })[0]!, /^CHAINS: must list at most 64 chain ids/);
  });

  it("bounds names, symbols and decimals", () => {
    const cases: [string, string][] = [
      ["CHAIN_31337_CURRENCY_SYMBOL", "ABCDEFGHIJKL"],
      ["CHAIN_31337_CURRENCY_SYMBOL", "t ETH"],
      ["CHAIN_31337_NAME", "x".repeat(65)],
      ["CHAIN_31337_NAME", "Anvil\n"],
      ["CHAIN_31337_CURRENCY_NAME", "y".repeat(65)],
      ["CHAIN_31337_CURRENCY_DECIMALS", "37"],
      ["CHAIN_31337_CURRENCY_DECIMALS", "-1"],
      ["CHAIN_31337_RPC_URL", "ftp://127.0.0.1"],
    ];
    for (const [name, value] of cases) {
      const problems = problemsOf({ ...ANVIL, [name]: value });
      assert.equal(problems.length, 1, `${name}=${value}: ${problems.join("; ")}`);
      assert.ok(problems[0]!.startsWith(`${name}: `), problems[0]);
    }
    // The bounds themselves are accepted.
    const [, edge] = loadConfig({
      ...ANVIL,
      CHAIN_31337_CURRENCY_SYMBOL: "ABCDEFGHIJK",
      CHAIN_31337_NAME: "x".repeat(64),
      CHAIN_31337_CURRENCY_DECIMALS: "36",
    }).chains;
    assert.deepEqual(
      [edge!.nativeCurrency.symbol, edge!.name.length, edge!.nativeCurrency.decimals],
      ["ABCDEFGHIJK", 64, 36],
    );
    assert.equal(
      loadConfig({ ...ANVIL, CHAIN_31337_CURRENCY_DECIMALS: "0" }).chains[1]!.nativeCurrency.decimals,
      0,
    );
  });
});

describe("GET /blockchain/chains", () => {
  it("lists every served chain in order, active only while reachable (the fee oracle's freshness)", async () => {
    // Fees are fresh for 14601 only: chain 146's node is taken as not answering.
    const fixed = fixedFeeOracle(TEST_FEES);
    const feeOracle: FeeOracle = {
      ...fixed,
      current: (chainId) =>
        chainId === 14601 ? fixed.current(chainId) : { kind: "stale", reason: "never_read", ageMs: null },
    };
    const t = await startTestApp({
      env: { CHAINS: "14601,146", CHAIN_146_RPC_URL: "http://127.0.0.1:9" },
      feeOracle,
    });
    try {
      const res = await t.request({ method: "GET", url: "/blockchain/chains" });
      assert.equal(res.statusCode, 200, res.body);
      const listed = res.json() as {
        chainId: number;
        name: string;
        nativeCurrency: { symbol: string };
        active: boolean;
        reachable: boolean;
      }[];
      assert.deepEqual(
        listed.map((c) => [c.chainId, c.name, c.nativeCurrency.symbol, c.active, c.reachable]),
        [
          [14601, "Sonic Testnet", "S", true, true],
          [146, "Sonic", "S", false, false],
        ],
      );
      assert.ok(!res.body.includes("http"), "RPC URLs must not be exposed");
    } finally {
      await t.close();
    }
  });
});
