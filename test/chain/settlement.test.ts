/**
 * The settlement watcher on a real chain, with every authorization issued by the service: after a
 * mix of sponsored operations (some whose game call reverts, some in one bundle, one that drives
 * the EntryPoint into its prefund-too-low path) the tank holds exactly
 * deposits − Σ actualGasCost − open reservations, which is also exactly what left the
 * paymaster's EntryPoint deposit, and the chain parity report agrees; every paid operation is
 * recorded in chain_operations and fully billed. Unused reservations are released by chain time
 * only once it has passed validUntil plus the margin. Repeats (a tick twice, one range applied
 * twice), restarts with a lost cursor and RPC outages change nothing twice and lose nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, type Hex, parseEther, parseEventLogs, type TransactionReceipt } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { pollLoop } from "../../src/chains/poll-loop.ts";
import { confirmedHead, createChainClient } from "../../src/chains/rpc.ts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { createMetrics, weiToEther } from "../../src/metrics/metrics.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import { type SettlementWatcher, settlementWatcher } from "../../src/settlement/watcher.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployAdversarialAccount, deployStack } from "../support/chain/devnet.ts";
import {
  allowlist,
  authorize,
  authorizedUserOp,
  balanceOf,
  chainParity,
  eventually,
  FAIL_SELECTOR,
  failCall,
  MINT_SELECTOR,
  mintCall,
  type Project,
  paymasterDeposit,
  sponsorUnknownAccounts,
  totalGas,
  watcherClient,
} from "../support/chain-service.ts";
import { prefundTooLowGas } from "../support/gas-search.ts";
import { parseExposition } from "../support/prometheus.ts";
import {
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountNonce,
  getUserOpHash,
  handleOps,
  randomAccount,
  requiredPrefundWei,
} from "../support/userop.ts";

const CONFIRMATIONS = 1;
const RELEASE_MARGIN_SEC = 60;
const DEPOSIT_WEI = parseEther("3");
const OPERATOR = "operator@example.com";

let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let operatorToken: string;

/** What the chain charged, per authorization, read from the receipts' EntryPoint events. */
interface Charge {
  cost: bigint;
  gas: bigint;
  success: boolean;
  prefundTooLow: boolean;
  txHash: Hex;
  userOpHash: Hex;
}
const charged = new Map<Hex, Charge>();
/** Authorizations issued and not used: their reservations are held until released. */
const open = new Map<Hex, { maxGasCost: bigint; validUntil: number }>();
let depositBefore: bigint;

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
  t = await startTestApp({
    env: {
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
      CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
      OPERATOR_EMAILS: OPERATOR,
    },
    feeOracle: "chain",
  });
  operatorToken = await t.token(OPERATOR);
  p = await seedProject(t);
  // One test's account is hostile code the registry does not know (an AdversarialAccount): the
  // project sponsors unknown accounts on caps alone. Known accounts stay bound. Set before any
  // authorization, since the service caches a project's terms for KEY_CACHE_TTL_MS.
  await sponsorUnknownAccounts(t, p);
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
  // Nothing sponsored yet: from here on, every wei that leaves the deposit must reach a tank.
  depositBefore = await paymasterDeposit(chain, stack);
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

function common() {
  return { db: t.db, chainId: chain.chainId, confirmations: CONFIRMATIONS, startBlock: 0n };
}

/** What the settlement watchers of these tests counted (issue 20's settlement series). */
const metrics = createMetrics({ version: "t", clusterWorker: false });

function watcher(rpcUrl = chain.rpcUrl): SettlementWatcher {
  return settlementWatcher({
    ...common(),
    client: createChainClient(rpcUrl, { timeoutMs: 2_000, retryCount: 0 }),
    entryPoint: stack.entryPoint,
    paymaster: stack.paymaster,
    releaseMarginSec: RELEASE_MARGIN_SEC,
    metrics,
  });
}

/** The settlement counters of `metrics` for this chain, by outcome. */
async function settledSeries() {
  const { samples } = parseExposition(await metrics.exposition());
  const of = (name: string, outcome: string) =>
    samples.find(
      (x) => x.name === name && x.labels.chain_id === String(chain.chainId) && x.labels.outcome === outcome,
    )?.value ?? 0;
  return {
    success: of("gss_settled_operations_total", "success"),
    reverted: of("gss_settled_operations_total", "reverted"),
    successEther: of("gss_settled_gas_cost_ether_total", "success"),
    revertedEther: of("gss_settled_gas_cost_ether_total", "reverted"),
  };
}

const bundler = () => chain.wallets[1]!;

/** An operation of a fresh account calling mint or fail, authorized through the service. */
async function sponsoredOp(data: Hex) {
  const op = await authorizedUserOp(t, p, chain, stack, randomAccount(), { target: stack.gameItems, data });
  return { ...op, authId: op.auth.authorizationId };
}

function record(receipt: TransactionReceipt, ops: { userOpHash: Hex; authId: Hex }[]) {
  assert.equal(receipt.status, "success");
  const events = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationEvent",
  });
  const tooLow = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationPrefundTooLow",
  });
  for (const op of ops) {
    const e = events.find((x) => x.args.userOpHash === op.userOpHash);
    assert.ok(e, "the operation did not run");
    assert.equal(e.args.paymaster, stack.paymaster);
    charged.set(op.authId, {
      cost: e.args.actualGasCost,
      gas: e.args.actualGasUsed,
      success: e.args.success,
      prefundTooLow: tooLow.some((x) => x.args.userOpHash === op.userOpHash),
      txHash: receipt.transactionHash,
      userOpHash: op.userOpHash,
    });
  }
}

const sum = (values: Iterable<bigint>) => [...values].reduce((a, b) => a + b, 0n);
const totalCharged = () => sum([...charged.values()].map((c) => c.cost));
const totalOpen = () => sum([...open.values()].map((o) => o.maxGasCost));

async function sponsorships() {
  return t.db.query<{
    auth_id: Hex;
    status: string;
    actual_gas: string;
    actual_gas_cost: string;
    tx_hash: string | null;
    user_op_hash: string | null;
  }>(
    `SELECT '0x' || encode(auth_id, 'hex') AS auth_id, status, actual_gas::text, actual_gas_cost::text, '0x' || encode(tx_hash, 'hex') AS tx_hash,
       '0x' || encode(user_op_hash, 'hex') AS user_op_hash
     FROM sponsorships WHERE project_id = $1 ORDER BY auth_id`,
    [p.projectId],
  );
}

async function chainOperations() {
  return t.db.query<{
    auth_id: string | null;
    project_id: string | null;
    tx_hash: string;
    user_op_hash: string;
    success: boolean;
    prefund_too_low: boolean;
    actual_gas_used: string;
    actual_gas_cost: string;
    billed: string;
    unbilled_reason: string | null;
  }>(
    `SELECT '0x' || encode(auth_id, 'hex') AS auth_id, project_id, '0x' || encode(tx_hash, 'hex') AS tx_hash,
       '0x' || encode(user_op_hash, 'hex') AS user_op_hash, success, prefund_too_low, actual_gas_used::text,
       actual_gas_cost::text, billed::text, unbilled_reason
     FROM chain_operations WHERE chain_id = $1 ORDER BY block_number, log_index`,
    [chain.chainId],
  );
}

async function snapshot() {
  const [cursor] = await t.db.query<{ next_block: string }>(
    "SELECT next_block::text FROM chain_cursors WHERE watcher = 'settlement'",
  );
  const entries = await t.db.query<{ kind: string; amount: string; reference: string }>(
    "SELECT kind, amount::text, reference FROM ledger_entries WHERE project_id = $1 ORDER BY id",
    [p.projectId],
  );
  return {
    balance: await balanceOf(t, p),
    cursor: cursor?.next_block,
    entries,
    sponsorships: await sponsorships(),
    chainOperations: await chainOperations(),
  };
}

async function projectParityInSync(): Promise<boolean> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/funds/parity`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().inSync;
}

/**
 * The books against the chain: the tank, the EntryPoint deposit, the recorded operations, every
 * authorization's row and the operators' parity report all tell the same story, to the wei.
 */
async function assertBooksMatchChain() {
  const paid = totalCharged();
  assert.equal(await balanceOf(t, p), DEPOSIT_WEI - paid - totalOpen());
  const deposit = await paymasterDeposit(chain, stack);
  assert.equal(depositBefore - deposit, paid);
  assert.equal(await projectParityInSync(), true);

  const ops = await chainOperations();
  assert.equal(ops.length, charged.size, "every paid operation is recorded once");
  for (const row of ops) {
    const c = charged.get(row.auth_id as Hex);
    assert.ok(c, `an operation recorded without a known authorization: ${row.user_op_hash}`);
    assert.deepEqual(
      [row.project_id, row.tx_hash, row.user_op_hash, row.success, row.prefund_too_low],
      [p.projectId, c.txHash, c.userOpHash, c.success, c.prefundTooLow],
    );
    assert.deepEqual([row.actual_gas_cost, row.actual_gas_used], [c.cost.toString(), c.gas.toString()]);
    assert.equal(row.billed, row.actual_gas_cost, "billed in full");
    assert.equal(row.unbilled_reason, null);
  }

  for (const row of await sponsorships()) {
    const o = open.get(row.auth_id);
    if (o) {
      assert.equal(row.status, "pending");
      continue;
    }
    const c = charged.get(row.auth_id);
    if (!c) continue; // released earlier
    assert.equal(row.status, c.success ? "success" : "reverted");
    assert.deepEqual([row.actual_gas_cost, row.actual_gas], [c.cost.toString(), c.gas.toString()]);
    assert.deepEqual([row.tx_hash, row.user_op_hash], [c.txHash, c.userOpHash]);
  }

  const parity = await chainParity(t, operatorToken);
  assert.deepEqual(
    {
      entryPointDeposit: parity.entryPointDeposit,
      tanks: parity.tanks,
      openReservations: parity.openReservations,
      promised: parity.promised,
      depositCovers: parity.depositCovers,
      operations: parity.operations,
      paidOnChain: parity.paidOnChain,
      billed: parity.billed,
      unattributed: parity.unattributed,
      unattributedCount: parity.unattributedCount,
      recentUnattributed: parity.recentUnattributed,
      inSync: parity.inSync,
    },
    {
      entryPointDeposit: deposit.toString(),
      tanks: (DEPOSIT_WEI - paid - totalOpen()).toString(),
      openReservations: totalOpen().toString(),
      promised: (DEPOSIT_WEI - paid).toString(),
      depositCovers: true,
      operations: charged.size,
      paidOnChain: paid.toString(),
      billed: paid.toString(),
      unattributed: "0",
      unattributedCount: 0,
      recentUnattributed: [],
      inSync: true,
    },
  );
}

describe("settling sponsored operations", () => {
  test("after mixed operations the tank = deposits − Σ actualGasCost − open reservations, and the paymaster's deposit fell by Σ actualGasCost", async () => {
    // Three operations in one bundle: one transaction, three pairs of logs to tell apart.
    const bundle = [await sponsoredOp(mintCall), await sponsoredOp(failCall), await sponsoredOp(mintCall)];
    const receipt = await handleOps(
      chain.publicClient,
      bundler(),
      stack.entryPoint,
      bundle.map((o) => o.userOp),
    );
    record(receipt, bundle);
    for (const data of [mintCall, failCall, mintCall]) {
      const op = await sponsoredOp(data);
      record(await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]), [op]);
    }
    // One authorization never used: its reservation stays held until chain time releases it.
    const { auth } = await authorizedUserOp(t, p, chain, stack, randomAccount(), {
      target: stack.gameItems,
      data: mintCall,
    });
    open.set(auth.authorizationId, { maxGasCost: BigInt(auth.maxGasCost), validUntil: auth.validUntil });

    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const report = await watcher().tick();
    assert.deepEqual([report.settled, report.released, report.unattributed], [6, 0, 0]);

    assert.equal([...charged.values()].filter((c) => !c.success).length, 2);
    for (const c of charged.values()) assert.ok(c.cost > 0n, "a reverted operation still costs");
    await assertBooksMatchChain();

    // The metrics counted each operation once, by outcome, with its actual cost in ether.
    const costOf = (success: boolean) =>
      [...charged.values()].filter((c) => c.success === success).reduce((sum, c) => sum + c.cost, 0n);
    const series = await settledSeries();
    assert.deepEqual([series.success, series.reverted], [4, 2]);
    assert.ok(Math.abs(series.successEther - weiToEther(costOf(true))) < 1e-12);
    assert.ok(Math.abs(series.revertedEther - weiToEther(costOf(false))) < 1e-12);
  });

  test("the chain parity report is for operators only", async () => {
    const res = await t.request({
      method: "GET",
      url: `/blockchain/chains/${chain.chainId}/parity`,
      token: p.ownerToken,
    });
    assert.equal(res.statusCode, 403, res.body);
  });

  test("running tick again changes nothing", async () => {
    const before = await snapshot();
    const counted = await settledSeries();
    const report = await watcher().tick();
    assert.deepEqual([report.settled, report.released, report.unattributed], [0, 0, 0]);
    assert.deepEqual(await snapshot(), before);
    assert.deepEqual(await settledSeries(), counted, "nothing counted twice");
  });

  test("applying the same range twice (a crash between applying and moving the cursor) charges once", async () => {
    const op = await sponsoredOp(mintCall);
    record(await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]), [op]);
    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const w = watcher();
    const head = confirmedHead(await chain.publicClient.getBlockNumber({ cacheTime: 0 }), CONFIRMATIONS);
    const range = await w.nextRange(head!);
    assert.ok(range);
    const scanned = await w.scan(range.fromBlock, range.toBlock);
    assert.deepEqual(
      scanned.ops.map((o) => [o.userOpHash, o.authId]),
      [[op.userOpHash, op.authId]],
    );
    const first = await w.apply(scanned);
    assert.equal(first[0]?.billing?.kind, "charged");
    const applied = await snapshot();
    const again = await w.apply(scanned);
    assert.deepEqual(
      again.map((r) => r.billing),
      [null],
    );
    assert.deepEqual(await snapshot(), applied);
    // The cursor never moved, so the next tick reads the range a third time: still nothing twice.
    assert.deepEqual([(await w.tick()).settled, (await w.tick()).settled], [0, 0]);
    await assertBooksMatchChain();
  });

  test("a restarted watcher, and one whose cursor was lost, re-read the blocks and apply nothing twice", async () => {
    const before = await snapshot();
    assert.equal((await watcher().tick()).settled, 0);
    await t.db.query("UPDATE chain_cursors SET next_block = 0 WHERE watcher = 'settlement'");
    assert.equal((await watcher().tick()).settled, 0);
    assert.deepEqual(await snapshot(), before);
    await t.db.query("DELETE FROM chain_cursors WHERE watcher = 'settlement'");
    assert.equal((await watcher().tick()).settled, 0);
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
    await assertBooksMatchChain();
  });

  test("an operation whose account reverts into the EntryPoint's prefund-too-low path is still charged: its whole prefund", async () => {
    // An account that ends every call in 2 KB of revert data, with limits so tight that the
    // EntryPoint's charge exceeds the prefund: no postOp could run here, and v2 needs none.
    const sender = await deployAdversarialAccount(chain, 2_048n);
    // Equal fees make the EntryPoint charge exactly maxFeePerGas per gas, the prefund's price;
    // the priority fee ceiling (the node's suggestion) is within both of the authorization's ceilings.
    const priorityWei = BigInt(await chain.publicClient.request({ method: "eth_maxPriorityFeePerGas" }));
    const tight = await prefundTooLowGas({
      chain,
      stack,
      signer: privateKeyToAccount(TEST_SIGNER_KEY),
      sender,
      target: stack.gameItems,
      data: mintCall,
      gas: {
        ...devnetUserOpGas,
        maxFeePerGas: priorityWei,
        maxPriorityFeePerGas: priorityWei,
        preVerificationGas: 21_000n,
      },
    });
    const auth = await authorize(t, p, {
      user: sender,
      target: stack.gameItems,
      selector: MINT_SELECTOR,
      estimatedGas: totalGas(tight),
    });
    assert.equal(BigInt(auth.maxPriorityFeePerGas), priorityWei);
    assert.ok(priorityWei <= BigInt(auth.maxFeePerGas));
    const unsigned = buildUserOp({
      sender,
      nonce: await getAccountNonce(chain.publicClient, stack.entryPoint, sender),
      callData: executeCallData(stack.gameItems, mintCall),
      gas: tight,
      paymasterAndData: auth.paymasterAndData,
    });
    // The account takes any signature.
    const userOpHash = await getUserOpHash(chain.publicClient, stack.entryPoint, unsigned);
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [unsigned]);
    record(receipt, [{ userOpHash, authId: auth.authorizationId }]);
    const c = charged.get(auth.authorizationId)!;
    assert.deepEqual(
      [c.success, c.prefundTooLow],
      [false, true],
      "the EntryPoint took its prefund-too-low path",
    );
    assert.equal(c.cost, requiredPrefundWei(tight, PAYMASTER_GAS_LIMITS));

    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const report = await watcher().tick();
    assert.deepEqual([report.settled, report.unattributed], [1, 0]);
    await assertBooksMatchChain();
  });
});

describe("releasing unused reservations", () => {
  /** Mines one block at exactly `timestampSec` of chain time. */
  async function mineAt(timestampSec: number) {
    await chain.testClient.setNextBlockTimestamp({ timestamp: BigInt(timestampSec) });
    await chain.testClient.mine({ blocks: 1 });
  }

  const statusOf = async (authId: Hex) => (await sponsorships()).find((r) => r.auth_id === authId)?.status;

  test("a reservation is kept while chain time is at most validUntil plus the margin, then released once", async () => {
    assert.equal(open.size, 1);
    const [authId, unused] = [...open][0]!;
    const held = await balanceOf(t, p);
    const edgeSec = unused.validUntil + RELEASE_MARGIN_SEC;
    // The watcher has read a block stamped exactly validUntil + margin (the next one confirms it).
    await mineAt(edgeSec);
    await mineAt(edgeSec + 1);
    assert.equal((await watcher().tick()).released, 0);
    assert.equal(await statusOf(authId), "pending");

    // One more block confirms the one a second later: now an operation is impossible.
    await mineAt(edgeSec + 2);
    assert.equal((await watcher().tick()).released, 1);
    assert.equal(await statusOf(authId), "expired");
    assert.equal(await balanceOf(t, p), held + unused.maxGasCost);
    open.clear();
    await assertBooksMatchChain();

    assert.equal((await watcher().tick()).released, 0);
    await assertBooksMatchChain();

    const events = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/events`,
      token: p.ownerToken,
    });
    const expired = events.json().events.find((e: { auth_id: string }) => e.auth_id === authId);
    assert.deepEqual([expired.status, expired.actual_gas, expired.actual_gas_cost], ["expired", 0, "0"]);
  });
});
