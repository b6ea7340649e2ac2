/**
 * The whole loop through the HTTP API against a real chain: a studio funds its tank with a
 * transfer, the service authorizes at the chain's going fees, the EntryPoint runs the operation
 * and the paymaster pays, the watchers settle the tank from what the chain charged, and the
 * analytics, readiness and the operators' chain parity report show it. Then every way of misusing
 * an authorization the service really issued is refused by the chain, and at the end everything
 * the paymaster paid was charged to the tank, to the wei.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, decodeErrorResult, type Hex, parseEther, parseEventLogs } from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createChainWatchers } from "../../src/chains/watchers.ts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { sponsorPaymasterAbi } from "../../src/paymaster/abi.ts";
import { settlementWatcher } from "../../src/settlement/watcher.ts";
import { feeCeilings } from "../../src/sponsor/pricing.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi } from "../support/chain/devnet.ts";
import { handleOps, simulateHandleOps, type UserOpGas } from "../support/chain/userop.ts";
import {
  type Authorization,
  allowlist,
  authorizedUserOp,
  balanceOf,
  chainParity,
  failCall,
  gasFor,
  ITEM_ID,
  MINT_SELECTOR,
  mintCall,
  type Project,
  paymasterDeposit,
  totalGas,
  userOpWith,
  watcherClient,
} from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

const CONFIRMATIONS = 1;
const DEPOSIT_WEI = parseEther("2");
const OPERATOR = "operator@example.com";

let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let operatorToken: string;
/** How far the service's clock runs ahead of the wall clock; moved by the clock-skew tests. */
let serviceAheadMs = 0;
/** The paymaster's EntryPoint deposit before anything was sponsored. */
let initialDeposit: bigint;
/** What the chain charged for every operation it ran, from the receipts. */
const paid: { userOpHash: Hex; costWei: bigint }[] = [];

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
  t = await startTestApp({ env: serviceEnv(), now: () => Date.now() + serviceAheadMs, feeOracle: "chain" });
  operatorToken = await t.token(OPERATOR);
  p = await seedProject(t);
  initialDeposit = await paymasterDeposit(chain, stack);
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
    OPERATOR_EMAILS: OPERATOR,
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

/** Submits one operation that must run, and remembers what the chain charged for it. */
async function submitAccepted(op: { userOp: PackedUserOperation; userOpHash: Hex }) {
  const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
  assert.equal(receipt.status, "success");
  const [event] = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationEvent",
  });
  assert.equal(event?.args.userOpHash, op.userOpHash);
  assert.equal(event.args.paymaster, stack.paymaster);
  paid.push({ userOpHash: op.userOpHash, costWei: event.args.actualGasCost });
  return { receipt, event: event.args };
}

/** The fee ceilings the service would compute from block `n`'s base fee and the node's priority fee. */
async function ceilingsAtBlock(n: bigint) {
  const block = await chain.publicClient.getBlock({ blockNumber: n });
  const priority = BigInt(await chain.publicClient.request({ method: "eth_maxPriorityFeePerGas" }));
  return feeCeilings(
    { baseFeePerGasWei: block.baseFeePerGas!, priorityFeePerGasWei: priority },
    t.config.chains.find((c) => c.chainId === chain.chainId)!,
  );
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

  test("authorize at the chain's fees → handleOps → the game changes, the paymaster pays, settlement charges the tank what the chain charged", async () => {
    await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
    // Nothing is mined between these refreshes and authorize, so the oracle holds the latest
    // block. Twice: the first may join a background refresh that began before the last block.
    await t.services.feeOracle.refresh();
    await t.services.feeOracle.refresh();
    const latest = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    const op = await authorizedUserOp(t, p, chain, stack, randomAccount(), {
      target: stack.gameItems,
      data: mintCall,
    });
    const { auth, sender } = op;

    // The authorization binds the operation's gas and the market's fees (the latest block's base
    // fee with the margin, the node's priority fee), and reserves the most the EntryPoint could
    // take with them.
    assert.equal(BigInt(auth.maxTotalGas), totalGas());
    const market = await ceilingsAtBlock(latest);
    assert.deepEqual(
      [BigInt(auth.maxFeePerGas), BigInt(auth.maxPriorityFeePerGas)],
      [market.maxFeePerGasWei, market.maxPriorityFeePerGasWei],
    );
    assert.equal(BigInt(auth.maxGasCost), BigInt(auth.maxTotalGas) * BigInt(auth.maxFeePerGas));
    assert.equal(
      await balanceOf(t, p),
      DEPOSIT_WEI - BigInt(auth.maxGasCost),
      "the reservation holds maxGasCost",
    );
    assert.equal((await eventOf(auth.authorizationId))?.status, "pending");

    const depositBefore = await paymasterDeposit(chain, stack);
    const { receipt, event } = await submitAccepted(op);
    const { actualGasCost, actualGasUsed, success } = event;
    assert.equal(success, true);
    assert.equal(await itemCount(sender), 1n);
    assert.ok(actualGasCost <= BigInt(auth.maxGasCost));
    assert.equal(depositBefore - (await paymasterDeposit(chain, stack)), actualGasCost);

    await confirm();
    assert.equal((await settlement().tick()).settled, 1);
    const settled = await eventOf(auth.authorizationId);
    assert.equal(settled?.status, "success");
    assert.equal(settled?.actual_gas, Number(actualGasUsed));
    assert.equal(settled?.actual_gas_cost, actualGasCost.toString());
    assert.equal(settled?.tx_hash, receipt.transactionHash);
    assert.equal(settled?.user_op_hash, op.userOpHash);
    assert.equal(await balanceOf(t, p), DEPOSIT_WEI - actualGasCost);

    const parity = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity`,
      token: p.ownerToken,
    });
    assert.equal(parity.json().inSync, true);
    const onChain = await chainParity(t, operatorToken);
    assert.deepEqual(
      [onChain.paidOnChain, onChain.billed, onChain.unattributed, onChain.inSync],
      [actualGasCost.toString(), actualGasCost.toString(), "0", true],
    );
    assert.equal(onChain.entryPointDeposit, (initialDeposit - actualGasCost).toString());
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

  test("chain parity is for operators only", async () => {
    const res = await t.request({
      method: "GET",
      url: `/blockchain/chains/${chain.chainId}/parity`,
      token: p.ownerToken,
    });
    assert.equal(res.statusCode, 403, res.body);
  });

  test("/health/ready reports the chain's RPC, its fees, how far each watcher lags, and unattributed spend", async () => {
    const watchers = createChainWatchers(t.config, t.db);
    t.services.readiness.push(...watchers.probes);
    try {
      await deposits().tick();
      await settlement().tick();
      const res = await t.request({ method: "GET", url: "/health/ready" });
      assert.equal(res.statusCode, 200, res.body);
      const { checks } = res.json();
      assert.equal(checks["chain:14601"].status, "ok");
      assert.match(checks["chain:14601"].detail, /^latest block \d+$/);
      assert.equal(checks["chain:14601:fees"].status, "ok", checks["chain:14601:fees"].detail);
      assert.match(
        checks["chain:14601:fees"].detail,
        /^base fee \d+ wei, priority fee \d+ wei at block \d+$/,
      );
      for (const name of ["chain:14601:settlement", "chain:14601:deposits"]) {
        assert.equal(checks[name].status, "ok", checks[name].detail);
        assert.match(checks[name].detail, /^0 blocks behind the confirmed head$/);
      }
      assert.equal(
        checks["chain:14601:unattributed"].status,
        "ok",
        checks["chain:14601:unattributed"].detail,
      );
      assert.match(
        checks["chain:14601:unattributed"].detail,
        /^1 paid operations?, all charged to gas tanks$/,
      );
    } finally {
      t.services.readiness.splice(-watchers.probes.length);
    }
  });
});

describe("the chain refuses misuse of an authorization the service issued", () => {
  /** Authorizes `owner`'s account for GameItems.mint with the default limits. */
  async function authorizedFor(
    owner = randomAccount(),
    app: TestApp = t,
  ): Promise<{ auth: Authorization; sender: Address }> {
    const op = await authorizedUserOp(app, p, chain, stack, owner, {
      target: stack.gameItems,
      data: mintCall,
    });
    return { auth: op.auth, sender: op.sender };
  }

  /** `owner`'s operation carrying `auth`, with fees at its ceilings unless `gas` says otherwise. */
  function opWith(
    owner: ReturnType<typeof randomAccount>,
    auth: Authorization,
    call: { target?: Address; data?: Hex; gas?: UserOpGas } = {},
  ) {
    return userOpWith(chain, stack, owner, {
      target: call.target ?? stack.gameItems,
      data: call.data ?? mintCall,
      paymasterAndData: auth.paymasterAndData,
      gas: call.gas ?? gasFor(auth),
    });
  }

  /** Both the bundler's simulation and a mined handleOps refuse; nothing was minted. */
  async function assertRefused(
    op: Awaited<ReturnType<typeof userOpWith>>,
    reason: string,
    error?: { name: string; args: readonly unknown[] },
  ) {
    const failed = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
      op.userOp,
    ]);
    assert.equal(failed?.reason, reason);
    if (error) {
      assert.ok(failed?.inner, "expected the paymaster's revert data");
      const decoded = decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner });
      assert.deepEqual([decoded.errorName, decoded.args], [error.name, error.args]);
    } else {
      assert.equal(failed?.inner, undefined, "a ceiling or signature refusal carries no revert data");
    }
    const before = await itemCount(op.sender);
    const depositBefore = await paymasterDeposit(chain, stack);
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp], {
      gas: 3_000_000n,
    });
    assert.equal(receipt.status, "reverted");
    assert.equal(await itemCount(op.sender), before);
    assert.equal(
      await paymasterDeposit(chain, stack),
      depositBefore,
      "a refused operation costs the paymaster nothing",
    );
  }

  test("another sender", async () => {
    const { auth } = await authorizedFor();
    await assertRefused(await opWith(randomAccount(), auth), "AA34 signature error");
  });

  test("another target contract", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    await assertRefused(await opWith(owner, auth, { target: stack.paymaster }), "AA34 signature error");
  });

  test("another function selector", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    await assertRefused(await opWith(owner, auth, { data: failCall }), "AA34 signature error");
  });

  test("a reused authorization", async () => {
    const owner = randomAccount();
    const { auth, sender } = await authorizedFor(owner);
    await submitAccepted(await opWith(owner, auth));
    assert.equal(await itemCount(sender), 1n);
    await assertRefused(await opWith(owner, auth), "AA33 reverted", {
      name: "AuthorizationUsed",
      args: [auth.authorizationId],
    });
  });

  test("fees above the authorization's ceilings, or more gas than maxTotalGas, are refused; exactly at the ceilings the operation runs", async () => {
    const owner = randomAccount();
    const { auth, sender } = await authorizedFor(owner);
    const atCeilings = gasFor(auth);
    assert.equal(totalGas(atCeilings), BigInt(auth.maxTotalGas));
    const over: [string, UserOpGas][] = [
      ["maxFeePerGas + 1 wei", { ...atCeilings, maxFeePerGas: atCeilings.maxFeePerGas + 1n }],
      [
        "maxPriorityFeePerGas + 1 wei",
        { ...atCeilings, maxPriorityFeePerGas: atCeilings.maxPriorityFeePerGas + 1n },
      ],
      ["callGasLimit + 1", { ...atCeilings, callGasLimit: atCeilings.callGasLimit + 1n }],
      ["preVerificationGas + 1", { ...atCeilings, preVerificationGas: atCeilings.preVerificationGas + 1n }],
    ];
    for (const [what, gas] of over) {
      await assertRefused(await opWith(owner, auth, { gas }), "AA34 signature error").catch((err) => {
        throw new Error(`${what}: ${err.message}`);
      });
    }
    // The refusals reverted their bundles, so the authorization is still unused.
    await submitAccepted(await opWith(owner, auth, { gas: atCeilings }));
    assert.equal(await itemCount(sender), 1n);
  });

  test("a signature by another key (a service instance configured with a different signer)", async () => {
    const other = await startTestApp({
      env: { ...serviceEnv(), SIGNER_PRIVATE_KEY: generatePrivateKey() },
      db: { db: t.db, schema: null, drop: async () => {} },
      feeOracle: "chain",
    });
    try {
      const owner = randomAccount();
      const { auth } = await authorizedFor(owner, other);
      await assertRefused(await opWith(owner, auth), "AA34 signature error");
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
      const op = await opWith(owner, auth);
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

  /** Sets the service's clock `aheadSec` ahead of the chain's latest block, and re-reads fees on it. */
  async function serviceClockAheadOfChain(aheadSec: number) {
    const latest = await chain.publicClient.getBlock({ blockTag: "latest" });
    serviceAheadMs = (Number(latest.timestamp) + aheadSec) * 1000 - Date.now();
    await t.services.feeOracle.refresh();
  }

  test("validAfter is backdated by the clock skew: due at once while the chain trails the service by less, not due when by more", async () => {
    const skewSec = t.config.clockSkewSec;
    assert.equal(skewSec, 60);
    try {
      // The latest block is 30 s older than the service's clock, as on a chain between blocks.
      await serviceClockAheadOfChain(skewSec / 2);
      const trailing = randomAccount();
      const { auth, sender } = await authorizedFor(trailing);
      const latest = await chain.publicClient.getBlock({ blockTag: "latest" });
      assert.ok(auth.validAfter < Number(latest.timestamp), "due at the latest block already");
      await submitAccepted(await opWith(trailing, auth));
      assert.equal(await itemCount(sender), 1n);

      // A service clock beyond the allowance issues an authorization the chain does not accept yet.
      await serviceClockAheadOfChain(skewSec * 2);
      const early = randomAccount();
      const { auth: notDue } = await authorizedFor(early);
      assert.ok(notDue.validAfter > Number((await chain.publicClient.getBlock()).timestamp) + 1);
      await assertRefused(await opWith(early, notDue), "AA32 paymaster expired or not due");
    } finally {
      serviceAheadMs = 0;
      await t.services.feeOracle.refresh();
    }
  });

  test("an expired window", async () => {
    const owner = randomAccount();
    const { auth } = await authorizedFor(owner);
    const latest = await chain.publicClient.getBlock();
    const aheadSec = auth.validUntil - Number(latest.timestamp) + 1;
    await chain.testClient.increaseTime({ seconds: aheadSec });
    await chain.testClient.mine({ blocks: 1 });
    await assertRefused(await opWith(owner, auth), "AA32 paymaster expired or not due");
  });
});

describe("after the honest operations and the refused ones", () => {
  test("everything the paymaster paid was charged to the tank, to the wei", async () => {
    await confirm();
    await settlement().tick();
    const paidWei = paid.reduce((sum, op) => sum + op.costWei, 0n);
    assert.equal(paid.length, 4);
    const deposit = await paymasterDeposit(chain, stack);
    assert.equal(initialDeposit - deposit, paidWei);
    const parity = await chainParity(t, operatorToken);
    assert.deepEqual(
      [parity.operations, parity.paidOnChain, parity.billed, parity.unattributed, parity.inSync],
      [paid.length, paidWei.toString(), paidWei.toString(), "0", true],
    );
    assert.equal(parity.entryPointDeposit, deposit.toString());
    // The tank paid the operations and still holds the refused authorizations' reservations.
    assert.equal(BigInt(parity.tanks) + BigInt(parity.openReservations), DEPOSIT_WEI - paidWei);
    assert.equal(await balanceOf(t, p), BigInt(parity.tanks));
  });
});
