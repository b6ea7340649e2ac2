/**
 * A reorganisation deeper than the confirmation depth under the settlement watcher, on a real
 * anvil (`anvil_reorg`): a settlement taken from a replaced block is compensated (the tank gets
 * the charge back, as the chain gave the paymaster its deposit back); an operation the new chain
 * includes again is charged again, once; and chain parity reports the reorganisation and stays
 * exact: paid on chain = billed = the paymaster's deposit drop.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Hex, parseEther } from "viem";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import type { SettlementWatcher } from "../../src/settlement/watcher.ts";
import { seedProject, type TestApp } from "../support/app.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import type { DevnetStack } from "../support/chain/devnet.ts";
import { handleOps } from "../support/chain/userop.ts";
import {
  allowlist,
  authorize,
  balanceOf,
  type ChainParity,
  chainParity,
  gasFor,
  MINT_SELECTOR,
  mintCall,
  type Project,
  paymasterDeposit,
  type ServiceOnChain,
  settlementWatcherOn,
  startServiceOnChain,
  totalGas,
  userOpWith,
} from "../support/chain-service.ts";
import { accountInitCode, randomAccount } from "../support/userop.ts";

const CONFIRMATIONS = 1;
const OPERATOR = "ops@example.com";
const TANK_WEI = parseEther("1");

let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let watcher: SettlementWatcher;
let depositAtStart: bigint;

before(async () => {
  service = await startServiceOnChain({ confirmations: CONFIRMATIONS, operator: OPERATOR });
  ({ chain, stack, t } = service);
  p = await seedProject(t);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, { projectId: p.projectId, reference: "reorg:tank", amountWei: TANK_WEI });
  watcher = settlementWatcherOn(service, {
    confirmations: CONFIRMATIONS,
    startBlock: await chain.publicClient.getBlockNumber(),
  });
  depositAtStart = await paymasterDeposit(chain, stack);
});

after(async () => {
  await service?.stop();
});

type Request = (args: { method: string; params: unknown[] }) => Promise<unknown>;
const rpc = (method: string, params: unknown[]) =>
  (chain.publicClient.request as unknown as Request)({ method, params });

/** A sponsored mint, authorized by the service, on chain and confirmed; its raw transaction for re-inclusion. */
async function sponsoredMint() {
  await t.services.feeOracle.refresh();
  const owner = randomAccount();
  const { sender } = await userOpWith(chain, stack, owner, {
    target: stack.gameItems,
    data: mintCall,
    paymasterAndData: "0x",
  });
  const auth = await authorize(t, p, {
    user: sender,
    target: stack.gameItems,
    selector: MINT_SELECTOR,
    estimatedGas: totalGas(),
    initCode: accountInitCode(stack.accountFactory, owner.address),
  });
  const { userOp } = await userOpWith(chain, stack, owner, {
    target: stack.gameItems,
    data: mintCall,
    paymasterAndData: auth.paymasterAndData,
    gas: gasFor(auth),
  });
  const receipt = await handleOps(chain.publicClient, chain.wallets[1]!, stack.entryPoint, [userOp]);
  assert.equal(receipt.status, "success");
  const raw = (await rpc("eth_getRawTransactionByHash", [receipt.transactionHash])) as Hex;
  await chain.testClient.mine({ blocks: CONFIRMATIONS });
  return { auth, receipt, raw };
}

async function parity() {
  return (await chainParity(t, await t.token(OPERATOR))) as ChainParity & {
    reorgs: { detected: number; unreconciled: number };
  };
}

/** Paid on chain = billed = what left the paymaster's deposit, and the tank agrees. */
async function assertExact() {
  const drop = depositAtStart - (await paymasterDeposit(chain, stack));
  const report = await parity();
  assert.equal(report.paidOnChain, drop.toString());
  assert.equal(report.billed, drop.toString());
  assert.equal(report.unattributed, "0");
  const [open] = await t.db.query<{ reserved: string }>(
    "SELECT COALESCE(sum(max_gas_cost), 0)::text AS reserved FROM sponsorships WHERE status = 'pending'",
  );
  assert.equal(await balanceOf(t, p), TANK_WEI - drop - BigInt(open!.reserved));
  return report;
}

describe("settlement under reorganisations deeper than the confirmation depth", () => {
  test("a settled operation whose block is replaced is compensated, and parity reports the reorganisation", async () => {
    const { receipt } = await sponsoredMint();
    await watcher.tick();
    await assertExact();
    assert.ok((await paymasterDeposit(chain, stack)) < depositAtStart, "the operation was paid");

    const head = await chain.publicClient.getBlockNumber();
    await rpc("anvil_reorg", [Number(head - receipt.blockNumber + 1n), []]);
    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const report = await watcher.tick();
    assert.equal(report.reorg?.compensated, 1);
    assert.equal(
      await paymasterDeposit(chain, stack),
      depositAtStart,
      "the chain gave the paymaster its deposit back",
    );
    const after = await assertExact();
    assert.equal(after.reorgs.detected, 1);
    assert.equal(after.reorgs.unreconciled, 0);
    assert.equal(after.inSync, true);
    const [row] = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE kind = 'reversal' AND project_id = $1",
      [p.projectId],
    );
    assert.equal(row!.n, 1);
  });

  test("an operation the new chain includes again is charged again, once", async () => {
    const { auth, receipt, raw } = await sponsoredMint();
    await watcher.tick();
    const head = await chain.publicClient.getBlockNumber();
    await rpc("anvil_reorg", [Number(head - receipt.blockNumber + 1n), [[raw, 0]]]);
    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    const report = await watcher.tick();
    assert.equal(report.reorg?.compensated, 1);
    await watcher.tick();
    const [row] = await t.db.query<{ status: string; actual_gas_cost: string; tx_hash: string }>(
      "SELECT status, actual_gas_cost::text, '0x' || encode(tx_hash, 'hex') AS tx_hash FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
      [auth.authorizationId.toLowerCase()],
    );
    assert.equal(row?.status, "success", "charged again from the new block");
    assert.ok((await paymasterDeposit(chain, stack)) < depositAtStart);
    const after = await assertExact();
    assert.equal(after.reorgs.detected, 2);
    assert.equal(after.inSync, true);
  });
});
