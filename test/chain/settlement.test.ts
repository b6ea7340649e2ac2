/**
 * The settlement watcher on a real chain: after a mix of sponsored operations (some whose game
 * call reverts, some in one bundle) the tank holds exactly
 * deposits − Σ actualGasCost − open reservations, which is also exactly what left the
 * paymaster's EntryPoint deposit; unused reservations are released by chain time after a
 * margin; repeats, restarts and RPC outages change nothing twice and lose nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Address,
  concatHex,
  type Hex,
  numberToHex,
  parseEther,
  parseEventLogs,
  slice,
  type TransactionReceipt,
} from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { pollLoop } from "../../src/chains/poll-loop.ts";
import { createChainClient } from "../../src/chains/rpc.ts";
import { type SettlementWatcher, settlementWatcher } from "../../src/chains/settlement-watcher.ts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, SPONSOR_PAYMASTER_GAS_LIMITS } from "../support/chain/devnet.ts";
import { handleOps, simulateHandleOps } from "../support/chain/userop.ts";
import {
  allowlist,
  authorize,
  balanceOf,
  eventually,
  FAIL_SELECTOR,
  failCall,
  MINT_SELECTOR,
  mintCall,
  type Project,
  TEST_MAX_FEE_PER_GAS_WEI,
  userOpWith,
  watcherClient,
} from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

const CONFIRMATIONS = 1;
const RELEASE_MARGIN_SEC = 60;
const DEPOSIT_WEI = parseEther("3");

let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let chainAheadMs = 0;

/** What the chain charged, per authorization, read from the receipts' UserOperationEvents. */
const charged = new Map<Hex, { cost: bigint; gas: bigint; success: boolean; txHash: Hex; userOpHash: Hex }>();
let unused: { authId: Hex; maxGasCost: bigint; validUntil: number };
let depositBefore: bigint;

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
  t = await startTestApp({
    env: {
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
      CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_14601_MAX_FEE_PER_GAS_WEI: TEST_MAX_FEE_PER_GAS_WEI.toString(),
    },
    now: () => Date.now() + chainAheadMs,
  });
  p = await seedProject(t);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await allowlist(t, p, stack.gameItems, FAIL_SELECTOR);
  const hash = await chain.wallets[3]!.sendTransaction({
    to: p.depositAddress as Address,
    value: DEPOSIT_WEI,
  });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  await chain.testClient.mine({ blocks: CONFIRMATIONS });
  await depositWatcher({ ...common(), client: watcherClient(chain) }).tick();
  assert.equal(await balanceOf(t, p), DEPOSIT_WEI);
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

function common() {
  return { db: t.db, chainId: chain.chainId, confirmations: CONFIRMATIONS, startBlock: 0n };
}

function watcher(rpcUrl = chain.rpcUrl): SettlementWatcher {
  return settlementWatcher({
    ...common(),
    client: createChainClient(rpcUrl, { timeoutMs: 2_000, retryCount: 0 }),
    entryPoint: stack.entryPoint,
    paymaster: stack.paymaster,
    releaseMarginSec: RELEASE_MARGIN_SEC,
  });
}

const bundler = () => chain.wallets[1]!;

function paymasterDeposit(): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.entryPoint,
    abi: entryPoint07Abi,
    functionName: "balanceOf",
    args: [stack.paymaster],
  });
}

/** An operation authorized by the service for a fresh account, calling mint or fail. */
async function sponsoredOp(data: Hex, tamper?: (paymasterAndData: Hex) => Hex) {
  const owner = randomAccount();
  const selector = slice(data, 0, 4);
  const probe = await userOpWith(chain, stack, owner, {
    target: stack.gameItems,
    data,
    paymasterAndData: "0x",
  });
  const auth = await authorize(t, p, { user: probe.sender, target: stack.gameItems, selector });
  const paymasterAndData = tamper ? tamper(auth.paymasterAndData) : auth.paymasterAndData;
  const op = await userOpWith(chain, stack, owner, { target: stack.gameItems, data, paymasterAndData });
  return { ...op, authId: auth.authorizationId };
}

function record(receipt: TransactionReceipt, ops: { userOpHash: Hex; authId: Hex }[]) {
  assert.equal(receipt.status, "success");
  const events = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationEvent",
  });
  for (const op of ops) {
    const e = events.find((x) => x.args.userOpHash === op.userOpHash);
    assert.ok(e, "the operation did not run");
    charged.set(op.authId, {
      cost: e.args.actualGasCost,
      gas: e.args.actualGasUsed,
      success: e.args.success,
      txHash: receipt.transactionHash,
      userOpHash: op.userOpHash,
    });
  }
}

const totalCharged = () => [...charged.values()].reduce((sum, c) => sum + c.cost, 0n);

async function sponsorships() {
  return t.db.query<{
    auth_id: Hex;
    status: string;
    actual_gas: string;
    actual_gas_cost: string;
    tx_hash: string;
    user_op_hash: string;
  }>(
    "SELECT auth_id, status, actual_gas::text, actual_gas_cost::text, tx_hash, user_op_hash FROM sponsorships WHERE project_id = $1",
    [p.projectId],
  );
}

async function snapshot() {
  const [cursor] = await t.db.query<{ next_block: string }>(
    "SELECT next_block::text FROM chain_cursors WHERE watcher = 'settlement'",
  );
  const entries = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM ledger_entries WHERE project_id = $1",
    [p.projectId],
  );
  return {
    balance: await balanceOf(t, p),
    cursor: cursor?.next_block,
    entries: entries[0]!.n,
    rows: await sponsorships(),
  };
}

async function parityInSync(): Promise<boolean> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/funds/parity`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().inSync;
}

describe("settling sponsored operations", () => {
  test("after mixed operations the tank = deposits − Σ actualGasCost − open reservations, and the paymaster's deposit fell by Σ actualGasCost", async () => {
    depositBefore = await paymasterDeposit();
    // Three operations in one bundle: one transaction, three pairs of logs to tell apart.
    const bundle = [await sponsoredOp(mintCall), await sponsoredOp(failCall), await sponsoredOp(mintCall)];
    record(
      await handleOps(
        chain.publicClient,
        bundler(),
        stack.entryPoint,
        bundle.map((o) => o.userOp),
      ),
      bundle,
    );
    for (const data of [mintCall, failCall, mintCall]) {
      const op = await sponsoredOp(data);
      record(await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]), [op]);
    }
    const probe = randomAccount();
    const probeOp = await userOpWith(chain, stack, probe, {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: "0x",
    });
    const auth = await authorize(t, p, {
      user: probeOp.sender,
      target: stack.gameItems,
      selector: MINT_SELECTOR,
    });
    unused = {
      authId: auth.authorizationId,
      maxGasCost: BigInt(auth.maxGasCost),
      validUntil: auth.validUntil,
    };

    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const report = await watcher().tick();
    assert.equal(report.settled, 6);
    assert.equal(report.released, 0);

    const sum = totalCharged();
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - sum - unused.maxGasCost);
    assert.equal(depositBefore - (await paymasterDeposit()), sum);
    assert.equal(await parityInSync(), true);

    for (const row of await sponsorships()) {
      if (row.auth_id === unused.authId) {
        assert.equal(row.status, "pending");
        continue;
      }
      const c = charged.get(row.auth_id)!;
      assert.equal(row.status, c.success ? "success" : "reverted");
      assert.equal(row.actual_gas_cost, c.cost.toString());
      assert.equal(row.actual_gas, c.gas.toString());
      assert.equal(row.tx_hash, c.txHash);
      assert.equal(row.user_op_hash, c.userOpHash);
      assert.ok(c.cost > 0n, "a reverted operation still costs");
    }
    assert.equal([...charged.values()].filter((c) => !c.success).length, 2);
  });

  test("running tick again changes nothing", async () => {
    const before = await snapshot();
    const report = await watcher().tick();
    assert.deepEqual([report.settled, report.released], [0, 0]);
    assert.deepEqual(await snapshot(), before);
  });

  test("a restarted watcher, and one whose cursor was lost, re-read the blocks and apply nothing twice", async () => {
    const before = await snapshot();
    assert.equal((await watcher().tick()).settled, 0);
    await t.db.query("UPDATE chain_cursors SET next_block = 0 WHERE watcher = 'settlement'");
    const reread = await watcher().tick();
    assert.equal(reread.settled, 0);
    assert.deepEqual(await snapshot(), before);
  });

  test("an RPC outage fails ticks without losing anything; the operations mined meanwhile settle when it is back", async () => {
    const op = await sponsoredOp(mintCall);
    record(await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]), [op]);
    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const before = await snapshot();

    const dead = watcher("http://127.0.0.1:9");
    await assert.rejects(dead.tick());
    const loop = pollLoop(dead.tick, { name: "settlement", intervalMs: 20, maxBackoffMs: 40 });
    loop.start();
    await eventually(async () => (loop.state().consecutiveFailures >= 2 ? true : undefined), "failed ticks");
    await loop.stop();
    assert.match(loop.state().lastError ?? "", /fetch failed|HTTP request failed|ECONNREFUSED/i);
    assert.deepEqual(await snapshot(), before);

    assert.equal((await watcher().tick()).settled, 1);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - totalCharged() - unused.maxGasCost);
    assert.equal(depositBefore - (await paymasterDeposit()), totalCharged());
    assert.equal(await parityInSync(), true);
  });
});

describe("releasing unused reservations", () => {
  async function advanceChainTo(timestampSec: number) {
    const latest = Number((await chain.publicClient.getBlock()).timestamp);
    const step = timestampSec - latest;
    await chain.testClient.increaseTime({ seconds: step });
    chainAheadMs += step * 1000;
    // One block carries the new time; the next ones confirm it.
    await chain.testClient.mine({ blocks: 1 + CONFIRMATIONS });
  }

  const statusOf = async (authId: Hex) => (await sponsorships()).find((r) => r.auth_id === authId)?.status;

  test("a reservation is kept until chain time passes validUntil plus the margin, then released once", async () => {
    const held = await balanceOf(t, p);
    await advanceChainTo(unused.validUntil + RELEASE_MARGIN_SEC - 5);
    assert.equal((await watcher().tick()).released, 0);
    assert.equal(await statusOf(unused.authId), "pending");

    await advanceChainTo(unused.validUntil + RELEASE_MARGIN_SEC + 5);
    assert.equal((await watcher().tick()).released, 1);
    assert.equal(await statusOf(unused.authId), "expired");
    assert.equal(await balanceOf(t, p), held + unused.maxGasCost);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - totalCharged());

    assert.equal((await watcher().tick()).released, 0);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - totalCharged());
    assert.equal(await parityInSync(), true);

    const events = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/events`,
      token: p.ownerToken,
    });
    const expired = events.json().events.find((e: { auth_id: string }) => e.auth_id === unused.authId);
    assert.deepEqual([expired.status, expired.actual_gas], ["expired", 0]);
  });

  test("a postOp gas limit too small for postOp is refused on chain, so it can never cost without a Sponsored log", async () => {
    // The limit sits outside the signed fields; the contract bounds it instead.
    const starved = await sponsoredOp(mintCall, (pmd) => withPostOpGasLimit(pmd, 1_000n));
    const refusal = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
      starved.userOp,
    ]);
    assert.equal(refusal?.reason, "AA33 reverted");
  });
});

/** paymasterAndData with another postOp gas limit (bytes 36–52, outside the signed fields). */
function withPostOpGasLimit(paymasterAndData: Hex, postOpGasLimit: bigint): Hex {
  assert.equal(BigInt(slice(paymasterAndData, 36, 52)), SPONSOR_PAYMASTER_GAS_LIMITS.postOpGasLimit);
  return concatHex([
    slice(paymasterAndData, 0, 36),
    numberToHex(postOpGasLimit, { size: 16 }),
    slice(paymasterAndData, 52),
  ]);
}
