/**
 * The fee oracle against a real node: it reads what anvil reports as the latest base fee and the
 * suggested priority fee, follows the base fee as blocks are mined, keeps its last reading while
 * the node is away, and calls the chain stale once that reading is older than the bound. The
 * oracle runs on a clock the test moves, so no assertion depends on how fast the machine is.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  chainFeeOracle,
  type FeeOracle,
  type FeeReading,
  type ObservedFees,
} from "../../src/chains/fee-oracle.ts";
import type { WatcherLog } from "../../src/chains/poll-loop.ts";
import { type ChainConfig, loadConfig } from "../../src/config.ts";
import { feeCeilings } from "../../src/sponsor/pricing.ts";
import { startTestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { eventually } from "../support/chain-service.ts";

const GWEI = 1_000_000_000n;
const MAX_AGE_MS = 10_000;
const PAYMASTER = "0x00000000000000000000000000000000000000aa";

let chain: DevChain;
let chainConfig: ChainConfig;
let oracle: FeeOracle;
let clockMs = Date.now();
const logs: string[] = [];

const record =
  (level: string) =>
  (obj: object, msg?: string): void => {
    logs.push(`${level} ${msg ?? ""} ${JSON.stringify(obj)}`);
  };
const log: WatcherLog = {
  debug: record("debug"),
  info: record("info"),
  warn: record("warn"),
  error: record("error"),
};

function env(): Record<string, string> {
  return {
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    CHAIN_14601_PAYMASTER_ADDRESS: PAYMASTER,
    CHAIN_14601_FEE_REFRESH_MS: "50",
    CHAIN_14601_FEE_MAX_AGE_MS: String(MAX_AGE_MS),
  };
}

before(async () => {
  chain = await startChain();
  const config = loadConfig(env());
  chainConfig = config.chains[0]!;
  oracle = chainFeeOracle(config, { now: () => clockMs });
  oracle.start(log);
});

after(async () => {
  await oracle?.stop();
  await chain?.stop();
});

/** Waits (boundedly) until the oracle holds a fresh reading that `accept` takes. */
function freshReading(
  what: string,
  accept: (fees: ObservedFees) => boolean = () => true,
): Promise<ObservedFees> {
  return eventually(async () => {
    const r: FeeReading = oracle.current(chain.chainId);
    return r.kind === "fresh" && accept(r.fees) ? r.fees : undefined;
  }, what);
}

async function nodePriorityFee(): Promise<bigint> {
  return BigInt(await chain.publicClient.request({ method: "eth_maxPriorityFeePerGas" }));
}

describe("fee oracle on anvil", () => {
  test("reads the latest block's base fee and the node's priority fee", async () => {
    const block = await chain.publicClient.getBlock({ blockTag: "latest" });
    const fees = await freshReading("a first reading", (f) => f.blockNumber === block.number);
    assert.equal(fees.baseFeePerGasWei, block.baseFeePerGas);
    assert.equal(fees.priorityFeePerGasWei, await nodePriorityFee());
    assert.equal(fees.observedAtMs, clockMs);
  });

  test("follows the base fee as blocks are mined, and prices from it", async () => {
    for (const baseFee of [7n * GWEI, 3n * GWEI]) {
      await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: baseFee });
      await chain.testClient.mine({ blocks: 1 });
      const number = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
      const fees = await freshReading(`block ${number}`, (f) => f.blockNumber === number);
      assert.equal(fees.baseFeePerGasWei, baseFee);
      const priority = await nodePriorityFee();
      assert.equal(fees.priorityFeePerGasWei, priority);
      assert.deepEqual(feeCeilings(fees, chainConfig), {
        maxFeePerGasWei: (baseFee * 150n) / 100n + priority,
        maxPriorityFeePerGasWei: priority,
        clampedTo: null,
      });
    }
  });

  test("a test app asked for chain fees has them before its first request, with a readiness probe", async () => {
    const t = await startTestApp({ env: env(), feeOracle: "chain" });
    try {
      const reading = t.services.feeOracle.current(chain.chainId);
      assert.equal(reading.kind, "fresh");
      const ready = await t.request({ method: "GET", url: "/health/ready" });
      assert.equal(ready.statusCode, 200, ready.body);
      assert.equal(ready.json().checks["chain:14601:fees"].status, "ok");
    } finally {
      await t.close();
    }
  });

  test("keeps its last reading while the node is away, then turns stale once it is too old", async () => {
    const last = await freshReading("a reading before the node stops");
    await chain.stop();
    const probe = oracle.probes.find((p) => p.name === "chain:14601:fees")!;
    await eventually(async () => {
      const { detail } = await probe.check();
      return detail && /([2-9]|\d\d+) refreshes failed in a row/.test(detail) ? detail : undefined;
    }, "two failed refreshes");

    // Still within the bound: the last reading serves, and readiness is ok but names the failure.
    assert.deepEqual(oracle.current(chain.chainId), { kind: "fresh", fees: last });
    assert.equal((await probe.check()).status, "ok");

    clockMs = last.observedAtMs + MAX_AGE_MS + 1;
    assert.deepEqual(oracle.current(chain.chainId), {
      kind: "stale",
      reason: "too_old",
      ageMs: MAX_AGE_MS + 1,
    });
    const health = await probe.check();
    assert.equal(health.status, "degraded");
    assert.match(health.detail ?? "", /authorize refuses this chain/);

    // One warning for the whole streak, and the node's URL in none of the lines.
    assert.equal(logs.filter((l) => l.startsWith("warn ")).length, 1, logs.join("\n"));
    assert.ok(!logs.some((l) => l.includes(chain.rpcUrl) || l.includes("127.0.0.1")), logs.join("\n"));
    assert.ok(!(health.detail ?? "").includes("127.0.0.1"));
  });
});
