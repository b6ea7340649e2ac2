/**
 * The deposit watcher on a real chain: transfers to funding addresses are credited to the gas
 * tank at confirmation depth, exactly once each, whether an EOA or a contract sent them, across
 * restarts in the middle of a scan; transfers that a revert undid are never credited.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import { type Address, getAddress, type Hex, parseEther } from "viem";
import { createChainClient } from "../../src/chains/rpc.ts";
import { createChainWatchers } from "../../src/chains/watchers.ts";
import type { DepositWatcher, depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { createMetrics } from "../../src/metrics/metrics.ts";
import { seedProject, startTestApp, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { localArtifact, valueForwarderAbi } from "../support/chain/devnet.ts";
import { balanceOf, depositWatcherOn, type Project } from "../support/chain-service.ts";
import { parseExposition } from "../support/prometheus.ts";

const CONFIRMATIONS = 2;

let chain: DevChain;
let t: TestApp;
let forwarder: Address;

before(async () => {
  chain = await startChain();
  t = await startTestApp({
    env: { CHAIN_14601_RPC_URL: chain.rpcUrl, CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS) },
  });
  const { abi, bytecode } = localArtifact("ValueForwarder");
  const hash = await chain.wallets[0]!.deployContract({ abi, bytecode });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  forwarder = getAddress(receipt.contractAddress!);
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

function watcher(overrides: Partial<Parameters<typeof depositWatcher>[0]> = {}): DepositWatcher {
  return depositWatcherOn(t, chain, CONFIRMATIONS, overrides);
}

const sender = () => chain.wallets[2]!;

async function confirmed(hash: Hex, expect: "success" | "reverted" = "success") {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, expect);
  await chain.testClient.mine({ blocks: CONFIRMATIONS });
  return receipt;
}

function pay(to: string, valueWei: bigint) {
  return sender().sendTransaction({ to: to as Address, value: valueWei });
}

function callForwarder(
  functionName: "forward" | "forwardUndone" | "sendThenRevert" | "destroy",
  to: string,
  valueWei: bigint,
  gas?: bigint,
) {
  return sender().writeContract({
    address: forwarder,
    abi: valueForwarderAbi,
    functionName,
    args: [to as Address],
    value: valueWei,
    gas,
  });
}

async function depositEntries(p: Project) {
  return t.db.query<{ reference: string; amount: string }>(
    "SELECT reference, amount::text FROM ledger_entries WHERE project_id = $1 AND kind = 'deposit' ORDER BY id",
    [p.projectId],
  );
}

async function fundingAccount(p: Project) {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/funding-accounts`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json()[0] as { address: string; total_credited: string };
}

async function parityInSync(p: Project) {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/funds/parity`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().inSync as boolean;
}

describe("deposits from EOAs", () => {
  test("a transfer is credited once, and only after it has the configured confirmations", async () => {
    const p = await seedProject(t);
    const metrics = createMetrics({ version: "t", clusterWorker: false });
    const w = watcher({ metrics });
    const hash = await pay(p.depositAddress, parseEther("1.5"));
    await chain.publicClient.waitForTransactionReceipt({ hash });

    await chain.testClient.mine({ blocks: CONFIRMATIONS - 1 });
    await w.tick();
    assert.equal(await balanceOf(t, p), 0n, "credited before the confirmation depth");

    await chain.testClient.mine({ blocks: 1 });
    const report = await w.tick();
    assert.equal(report.credited, 1);
    assert.equal(await balanceOf(t, p), parseEther("1.5"));
    assert.deepEqual(await depositEntries(p), [
      { reference: `${chain.chainId}:${hash}:0`, amount: parseEther("1.5").toString() },
    ]);
    assert.equal((await fundingAccount(p)).total_credited, parseEther("1.5").toString());

    assert.equal((await w.tick()).credited, 0);
    assert.equal(await balanceOf(t, p), parseEther("1.5"));
    assert.equal(await parityInSync(p), true);

    // Counted once, with its amount in ether; the second tick counted nothing.
    const { samples } = parseExposition(await metrics.exposition());
    const counted = (name: string) =>
      samples.find((x) => x.name === name && x.labels.chain_id === String(chain.chainId))?.value;
    assert.equal(counted("gss_deposits_credited_total"), 1);
    assert.equal(counted("gss_deposits_credited_ether_total"), 1.5);
  });

  test("a transfer whose transaction reverted is not credited", async () => {
    const p = await seedProject(t);
    // Sent from the forwarder's reverting function, the value never leaves the sender.
    await confirmed(await callForwarder("sendThenRevert", p.depositAddress, 123n, 200_000n), "reverted");
    await watcher().tick();
    assert.equal(await balanceOf(t, p), 0n);
  });
});

describe("deposits from contracts (internal transfers)", () => {
  test("a contract's internal transfer and a SELFDESTRUCT payout are credited once each", async () => {
    const p = await seedProject(t);
    const forwardHash = await callForwarder("forward", p.depositAddress, 1_000n);
    await confirmed(forwardHash);
    const w = watcher();
    assert.equal(w.tracing(), "unknown");
    assert.equal((await w.tick()).credited, 1);
    assert.equal(w.tracing(), "callTracer");
    assert.equal(await balanceOf(t, p), 1_000n);

    // The forwarder holds nothing; destroy() pays it the value it was just sent, through SELFDESTRUCT.
    const destroyHash = await callForwarder("destroy", p.depositAddress, 250n);
    await confirmed(destroyHash);
    assert.equal((await w.tick()).credited, 1);
    assert.equal((await watcher().tick()).credited, 0);
    assert.equal(await balanceOf(t, p), 1_250n);
    assert.deepEqual(
      (await depositEntries(p)).map((e) => e.reference),
      [`${chain.chainId}:${forwardHash}:0.0`, `${chain.chainId}:${destroyHash}:0.0`],
    );
    assert.equal(await parityInSync(p), true);
  });

  test("one transaction paying two projects credits each of them", async () => {
    const [a, b] = [await seedProject(t), await seedProject(t)];
    const hash = await sender().writeContract({
      address: forwarder,
      abi: valueForwarderAbi,
      functionName: "split",
      args: [a.depositAddress as Address, b.depositAddress as Address],
      value: 901n,
    });
    await confirmed(hash);
    assert.equal((await watcher().tick()).credited, 2);
    assert.equal(await balanceOf(t, a), 450n);
    assert.equal(await balanceOf(t, b), 451n);
  });

  test("an internal transfer undone by a reverted sub-call is not credited, though its transaction succeeded", async () => {
    const p = await seedProject(t);
    // A fixed gas limit: estimation would give the caught sub-call too little gas to even try.
    await confirmed(await callForwarder("forwardUndone", p.depositAddress, 777n, 300_000n));
    await watcher().tick();
    assert.equal(await balanceOf(t, p), 0n);
    assert.deepEqual(await depositEntries(p), []);
  });
});

describe("restarts", () => {
  test("re-reading every block from the start (a lost or rewound cursor) credits nothing twice", async () => {
    const p = await seedProject(t);
    await pay(p.depositAddress, 10n);
    await confirmed(await callForwarder("forward", p.depositAddress, 20n));
    assert.equal((await watcher().tick()).credited, 2);
    const cursorBefore = await cursorOf();

    await t.db.query("UPDATE chain_cursors SET next_block = 0 WHERE watcher = 'deposits'");
    const report = await watcher().tick();
    assert.equal(report.credited, 0);
    assert.equal(await cursorOf(), cursorBefore);
    assert.equal(await balanceOf(t, p), 30n);
    assert.equal((await depositEntries(p)).length, 2);
  });

  test("a watcher that crashes after crediting part of a range, before moving its cursor, credits each deposit once after restart", async () => {
    const p = await seedProject(t);
    await watcher().tick();
    const hashes = [
      await pay(p.depositAddress, 1n),
      await callForwarder("forward", p.depositAddress, 2n),
      await pay(p.depositAddress, 4n),
    ];
    await confirmed(hashes[2]!);

    const crashed = watcher();
    const head = (await chain.publicClient.getBlockNumber()) - BigInt(CONFIRMATIONS);
    const range = (await crashed.nextRange(head))!;
    const scan = await crashed.scan(range.fromBlock, range.toBlock);
    const mine = scan.deposits.filter((d) => d.projectId === p.projectId);
    assert.deepEqual(
      mine.map((d) => d.amountWei),
      [1n, 2n, 4n],
    );
    // Credits two of three, then dies before commit().
    assert.equal(await crashed.apply(mine.slice(0, 2)), 2);
    assert.equal(await balanceOf(t, p), 3n);

    const restarted = watcher();
    assert.equal((await restarted.tick()).credited, 1);
    assert.equal(await balanceOf(t, p), 7n);
    assert.equal((await watcher().tick()).credited, 0);
    assert.equal((await depositEntries(p)).length, 3);
    assert.equal(await parityInSync(p), true);
  });
});

describe("RPCs without call tracing", () => {
  test("fall back to the transactions' own value, say so in readiness, and credit nothing twice when tracing returns", async () => {
    const p = await seedProject(t);
    await watcher().tick();
    const direct = await pay(p.depositAddress, 100n);
    const internal = await callForwarder("forward", p.depositAddress, 200n);
    await confirmed(internal);

    const proxy = await noTracingProxy(chain.rpcUrl);
    try {
      const chainConfig = { ...t.config.chains[0]!, rpcUrl: proxy.url };
      const watchers = createChainWatchers({ chains: [chainConfig] }, t.db);
      const w = watchers.chains[0]!.deposits;
      assert.equal((await w.tick()).credited, 1);
      assert.equal(w.tracing(), "top-level");
      assert.equal(await balanceOf(t, p), 100n);

      const probe = watchers.probes.find((x) => x.name === "chain:14601:deposits")!;
      const health = await probe.check();
      assert.equal(health.status, "degraded");
      assert.match(health.detail ?? "", /no call tracing/);
    } finally {
      await proxy.close();
    }

    // The same blocks read again with tracing: the direct transfer has the same reference.
    await t.db.query("UPDATE chain_cursors SET next_block = 0 WHERE watcher = 'deposits'");
    assert.equal((await watcher({ client: createChainClient(chain.rpcUrl) }).tick()).credited, 1);
    assert.equal(await balanceOf(t, p), 300n);
    assert.deepEqual(
      (await depositEntries(p)).map((e) => e.reference),
      [`${chain.chainId}:${direct}:0`, `${chain.chainId}:${internal}:0.0`],
    );
  });

  test("tracing: off reads only the transactions' own value", async () => {
    const p = await seedProject(t);
    await watcher().tick();
    await pay(p.depositAddress, 5n);
    await confirmed(await callForwarder("forward", p.depositAddress, 6n));
    const w = watcher({ tracing: "off" });
    assert.equal(w.tracing(), "top-level");
    await w.tick();
    assert.equal(await balanceOf(t, p), 5n);
  });
});

async function cursorOf(): Promise<bigint> {
  const [row] = await t.db.query<{ next_block: string }>(
    "SELECT next_block::text FROM chain_cursors WHERE watcher = 'deposits'",
  );
  return BigInt(row!.next_block);
}

/**
 * A pass-through to the real anvil that refuses the debug namespace the way RPC providers
 * without tracing do (JSON-RPC -32601), so the fallback runs against a real chain.
 */
async function noTracingProxy(upstream: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const call = JSON.parse(body) as { id: number; method: string };
    res.setHeader("content-type", "application/json");
    if (call.method.startsWith("debug_")) {
      res.end(
        JSON.stringify({ jsonrpc: "2.0", id: call.id, error: { code: -32601, message: "Method not found" } }),
      );
      return;
    }
    const answer = await fetch(upstream, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    res.end(await answer.text());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
