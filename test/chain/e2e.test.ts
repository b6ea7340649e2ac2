/**
 * The whole loop through the HTTP API against a real chain: a studio funds its tank with a
 * transfer, the service authorizes, the EntryPoint runs the operation and the paymaster pays,
 * the watchers settle the tank from what the chain charged and the analytics show it. Then every
 * way of misusing an authorization the service really issued is refused by the chain.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, decodeErrorResult, type Hex, parseEther, parseEventLogs } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { settlementWatcher } from "../../src/chains/settlement-watcher.ts";
import { createChainWatchers } from "../../src/chains/watchers.ts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi, sponsorPaymasterAbi } from "../support/chain/devnet.ts";
import { devnetUserOpGas, handleOps, simulateHandleOps } from "../support/chain/userop.ts";
import {
  type Authorization,
  allowlist,
  authorize,
  balanceOf,
  failCall,
  ITEM_ID,
  MINT_SELECTOR,
  mintCall,
  type Project,
  TEST_MAX_FEE_PER_GAS_WEI,
  userOpWith,
  watcherClient,
} from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

const CONFIRMATIONS = 1;
const DEPOSIT_WEI = parseEther("2");

let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
/** Chain time moved ahead of the wall clock by the tests; the service's clock follows it. */
let chainAheadMs = 0;

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
  t = await startTestApp({ env: serviceEnv(), now: () => Date.now() + chainAheadMs });
  p = await seedProject(t);
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

function serviceEnv(): Record<string, string> {
  return {
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
    CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
    CHAIN_14601_MAX_FEE_PER_GAS_WEI: TEST_MAX_FEE_PER_GAS_WEI.toString(),
  };
}

const common = () => ({
  db: t.db,
  client: watcherClient(chain),
  chainId: chain.chainId,
  confirmations: CONFIRMATIONS,
  startBlock: 0n,
});
const deposits = () => depositWatcher(common());
const settlement = () =>
  settlementWatcher({ ...common(), entryPoint: stack.entryPoint, paymaster: stack.paymaster });
const bundler = () => chain.wallets[1]!;

async function confirm() {
  await chain.testClient.mine({ blocks: CONFIRMATIONS });
}

function paymasterDeposit(): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.entryPoint,
    abi: entryPoint07Abi,
    functionName: "balanceOf",
    args: [stack.paymaster],
  });
}

function itemCount(player: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [player, ITEM_ID],
  });
}

async function eventOf(authId: Hex) {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/analytics/events`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json().events as Record<string, unknown>[]).find((e) => e.auth_id === authId);
}

describe("sponsored operation end to end through the HTTP API", () => {
  test("a transfer to the deposit address funds the tank once it is confirmed", async () => {
    const hash = await chain.wallets[3]!.sendTransaction({
      to: p.depositAddress as Address,
      value: DEPOSIT_WEI,
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    await confirm();
    assert.equal((await deposits().tick()).credited, 1);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI);
    const accounts = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funding-accounts`,
      token: p.ownerToken,
    });
    assert.equal(accounts.json()[0].total_credited, DEPOSIT_WEI.toString());
  });

  test("authorize → handleOps → the game changes, the paymaster pays, settlement charges the tank what the chain charged", async () => {
    await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
    const owner = randomAccount();
    const { sender } = await userOpWith(chain, stack, owner, {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: "0x",
    });
    const auth = await authorize(t, p, { user: sender, target: stack.gameItems, selector: MINT_SELECTOR });
    assert.equal(
      await balanceOf(t, p),
      DEPOSIT_WEI - BigInt(auth.maxGasCost),
      "the reservation holds maxGasCost",
    );
    assert.equal((await eventOf(auth.authorizationId))?.status, "pending");

    const op = await userOpWith(chain, stack, owner, {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: auth.paymasterAndData,
    });
    const depositBefore = await paymasterDeposit();
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
    assert.equal(receipt.status, "success");
    assert.equal(await itemCount(sender), 1n);
    const [charged] = parseEventLogs({
      abi: entryPoint07Abi,
      logs: receipt.logs,
      eventName: "UserOperationEvent",
    });
    const { actualGasCost, actualGasUsed, success } = charged!.args;
    assert.equal(success, true);
    assert.ok(actualGasCost <= BigInt(auth.maxGasCost));
    assert.equal(depositBefore - (await paymasterDeposit()), actualGasCost);

    await confirm();
    assert.equal((await settlement().tick()).settled, 1);
    const event = await eventOf(auth.authorizationId);
    assert.equal(event?.status, "success");
    assert.equal(event?.actual_gas, Number(actualGasUsed));
    assert.equal(event?.actual_gas_cost, actualGasCost.toString());
    assert.equal(event?.tx_hash, receipt.transactionHash);
    assert.equal(event?.user_op_hash, op.userOpHash);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - actualGasCost);

    const parity = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity`,
      token: p.ownerToken,
    });
    assert.equal(parity.json().inSync, true);
    assert.equal((await settlement().tick()).settled, 0, "settled twice");
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - actualGasCost);

    const overview = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/overview`,
      token: p.ownerToken,
    });
    assert.equal(overview.statusCode, 200, overview.body);
    const o = overview.json();
    assert.equal(o.totalSponsored, 1);
    assert.equal(o.totalGasSaved, actualGasCost.toString());
    assert.equal(o.activeUsers, 1);
    assert.equal(o.today.sponsored, 1);
    assert.deepEqual(o.topContracts, [
      { address: stack.gameItems.toLowerCase(), calls: 1, gasUsed: actualGasUsed.toString() },
    ]);
  });

  test("/health/ready reports the chain's RPC and how far each watcher lags", async () => {
    const watchers = createChainWatchers(t.config, t.db);
    t.services.readiness.push(...watchers.probes);
    await deposits().tick();
    await settlement().tick();
    const res = await t.request({ method: "GET", url: "/health/ready" });
    assert.equal(res.statusCode, 200, res.body);
    const { checks } = res.json();
    assert.equal(checks["chain:14601"].status, "ok");
    assert.match(checks["chain:14601"].detail, /^latest block \d+$/);
    for (const name of ["chain:14601:settlement", "chain:14601:deposits"]) {
      assert.equal(checks[name].status, "ok", checks[name].detail);
      assert.match(checks[name].detail, /^0 blocks behind the confirmed head$/);
    }
    t.services.readiness.splice(-watchers.probes.length);
  });
});

describe("the chain refuses misuse of an authorization the service issued", () => {
  /** Authorizes `owner`'s account for GameItems.mint and returns what the service answered. */
  async function authorizedFor(
    owner = randomAccount(),
    app: TestApp = t,
  ): Promise<{ auth: Authorization; sender: Address }> {
    const { sender } = await userOpWith(chain, stack, owner, {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: "0x",
    });
    return {
      auth: await authorize(app, p, { user: sender, target: stack.gameItems, selector: MINT_SELECTOR }),
      sender,
    };
  }

  /** Both the bundler's simulation and a mined handleOps refuse; nothing was minted. */
  async function assertRefused(
    op: Awaited<ReturnType<typeof userOpWith>>,
    reason: string,
    errorName?: string,
  ) {
    const failed = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
      op.userOp,
    ]);
    assert.equal(failed?.reason, reason);
    if (errorName) {
      assert.ok(failed?.inner, "expected the paymaster's revert data");
      assert.equal(decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner }).errorName, errorName);
    }
    const before = await itemCount(op.sender);
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp], {
      gas: 3_000_000n,
    });
    assert.equal(receipt.status, "reverted");
    assert.equal(await itemCount(op.sender), before);
  }

  test("another sender", async () => {
    const { auth } = await authorizedFor();
    const op = await userOpWith(chain, stack, randomAccount(), {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: auth.paymasterAndData,
    });
    await assertRefused(op, "AA34 signature error");
  });

  test("another target contract", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    const op = await userOpWith(chain, stack, owner, {
      target: stack.paymaster,
      data: mintCall,
      paymasterAndData: auth.paymasterAndData,
    });
    await assertRefused(op, "AA34 signature error");
  });

  test("another function selector", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    const op = await userOpWith(chain, stack, owner, {
      target: stack.gameItems,
      data: failCall,
      paymasterAndData: auth.paymasterAndData,
    });
    await assertRefused(op, "AA34 signature error");
  });

  test("a reused authorization", async () => {
    const owner = randomAccount();
    const { auth, sender } = await authorizedFor(owner);
    const call = { target: stack.gameItems, data: mintCall, paymasterAndData: auth.paymasterAndData };
    const first = await userOpWith(chain, stack, owner, call);
    assert.equal(
      (await handleOps(chain.publicClient, bundler(), stack.entryPoint, [first.userOp])).status,
      "success",
    );
    assert.equal(await itemCount(sender), 1n);
    await assertRefused(await userOpWith(chain, stack, owner, call), "AA33 reverted", "AuthorizationUsed");
  });

  test("a cost above maxGasCost: a higher fee cap, or higher gas limits, than were authorized", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    const base = { target: stack.gameItems, data: mintCall, paymasterAndData: auth.paymasterAndData };
    const pricier = { ...devnetUserOpGas, maxFeePerGas: devnetUserOpGas.maxFeePerGas + 1n };
    await assertRefused(
      await userOpWith(chain, stack, owner, { ...base, gas: pricier }),
      "AA33 reverted",
      "GasCostAboveSponsorship",
    );
    const bigger = { ...devnetUserOpGas, callGasLimit: devnetUserOpGas.callGasLimit + 1n };
    await assertRefused(
      await userOpWith(chain, stack, owner, { ...base, gas: bigger }),
      "AA33 reverted",
      "GasCostAboveSponsorship",
    );
  });

  test("a signature by another key (a service instance configured with a different signer)", async () => {
    const other = await startTestApp({
      env: { ...serviceEnv(), SIGNER_PRIVATE_KEY: generatePrivateKey() },
      db: { db: t.db, schema: null, drop: async () => {} },
      now: () => Date.now() + chainAheadMs,
    });
    try {
      const owner = randomAccount();
      const { auth } = await authorizedFor(owner, other);
      const op = await userOpWith(chain, stack, owner, {
        target: stack.gameItems,
        data: mintCall,
        paymasterAndData: auth.paymasterAndData,
      });
      await assertRefused(op, "AA34 signature error");
    } finally {
      await other.close();
    }
  });

  test("a signature for another chain id (the same paymaster address on another chain)", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    // The same anvil, renumbered: same contracts at the same addresses, another chain id. The
    // service signed for 14601, so the paymaster's EIP-712 domain no longer matches.
    await chain.testClient.request({ method: "anvil_setChainId", params: [14602] } as never);
    try {
      const op = await userOpWith(chain, stack, owner, {
        target: stack.gameItems,
        data: mintCall,
        paymasterAndData: auth.paymasterAndData,
      });
      const failed = await simulateHandleOps(
        chain.publicClient,
        bundler().account.address,
        stack.entryPoint,
        [op.userOp],
      );
      assert.equal(failed?.reason, "AA34 signature error");
      const hash = await bundler().writeContract({
        chain: null,
        address: stack.entryPoint,
        abi: entryPoint07Abi,
        functionName: "handleOps",
        args: [[op.userOp], bundler().account.address],
        gas: 3_000_000n,
      });
      assert.equal((await chain.publicClient.waitForTransactionReceipt({ hash })).status, "reverted");
      assert.equal(await itemCount(op.sender), 0n);
    } finally {
      await chain.testClient.request({ method: "anvil_setChainId", params: [chain.chainId] } as never);
    }
  });

  test("an expired window", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    const latest = await chain.publicClient.getBlock();
    const aheadSec = auth.validUntil - Number(latest.timestamp) + 1;
    await chain.testClient.increaseTime({ seconds: aheadSec });
    await chain.testClient.mine({ blocks: 1 });
    chainAheadMs += aheadSec * 1000;
    const op = await userOpWith(chain, stack, owner, {
      target: stack.gameItems,
      data: mintCall,
      paymasterAndData: auth.paymasterAndData,
    });
    await assertRefused(op, "AA32 paymaster expired or not due");
  });
});
