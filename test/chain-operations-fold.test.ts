import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { foldOldChainOperations } from "../src/retention/chain-operations.ts";
import { maintenance } from "../src/retention/maintenance.ts";
import type { ChainOperation } from "../src/settlement/scan.ts";
import { orphanOperations, paidTotals, recordOperation } from "../src/settlement/store.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  paidOperation,
  startTestApp,
  TEST_PAYMASTER,
  type TestApp,
} from "./support/app.ts";

/**
 * Paid operations folded into their paymaster's totals once old (migration 033,
 * retention/chain-operations.ts): the chain parity's figures do not move, a log of a folded block
 * is still recorded once, unbilled spend stays listed, and two folders at once add nothing twice.
 */
let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const CHAIN = 14601;
const paymaster = TEST_PAYMASTER.toLowerCase();
const paid = (authId: string | null, blockNumber: bigint, costWei: bigint) =>
  paidOperation(authId, { blockNumber, costWei });

async function authorized(): Promise<string> {
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 16n);
  const res = await authorizeMint(t, p);
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { authorizationId: string }).authorizationId;
}

const record = (op: ChainOperation) => t.db.transaction((tx) => recordOperation(tx, CHAIN, paymaster, op));

/** Backdates every row recorded so far, as if recorded `days` ago. */
async function age(days: number) {
  await t.db.query("UPDATE chain_operations SET created_at = now() - make_interval(days => $1)", [days]);
}

async function rowsLeft(): Promise<{ block: string; reason: string | null }[]> {
  return t.db.query(
    `SELECT block_number::text AS block, unbilled_reason AS reason FROM chain_operations
     WHERE chain_id = $1 ORDER BY block_number`,
    [CHAIN],
  );
}

async function drain(batchSize: number): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await foldOldChainOperations(t.db, Date.now(), 7, batchSize);
    total += n;
    if (n < batchSize) return total;
  }
}

describe("folding old paid operations into totals", () => {
  it("keeps the chain parity's figures, the unbilled rows, and the watcher's record-once", async () => {
    const billed = paid(await authorized(), 1000n, 1_000_000n);
    assert.equal((await record(billed)).billing?.kind, "charged");
    const unattributed = paid(null, 1001n, 700_000n);
    assert.equal((await record(unattributed)).billing?.kind, "unbilled");
    const reorged = paid(await authorized(), 1002n, 3_000_000n);
    assert.equal((await record(reorged)).billing?.kind, "charged");
    assert.equal(await orphanOperations(t.db, CHAIN, [reorged.blockHash]), 1);
    await age(8);
    const recent = paid(await authorized(), 2000n, 5_000_000n);
    assert.equal((await record(recent)).billing?.kind, "charged");

    const before = await paidTotals(t.db, CHAIN, paymaster, null);
    assert.equal(before.operations, 3);
    assert.equal(before.paidWei, 6_700_000n);
    assert.equal(before.unattributedWei, 700_000n);

    // The billed and the orphaned rows are folded; the unbilled one and the recent one stay.
    assert.equal(await drain(1), 2);
    assert.deepEqual(await rowsLeft(), [
      { block: "1001", reason: "no_authorization_log" },
      { block: "2000", reason: null },
    ]);
    const [totals] = await t.db.query(
      `SELECT first_block::text, through_block::text, operations::text, paid::text, billed::text
       FROM chain_operation_totals WHERE chain_id = $1`,
      [CHAIN],
    );
    assert.deepEqual(totals, {
      first_block: "1000",
      through_block: "1002",
      operations: "1",
      paid: "1000000",
      billed: "1000000",
    });
    assert.deepEqual(await paidTotals(t.db, CHAIN, paymaster, null), before);
    assert.deepEqual(await paidTotals(t.db, CHAIN, paymaster, 900n), { ...before, fromBlock: 900n });

    // A count from inside the folded range starts after it, and says so.
    const inside = await paidTotals(t.db, CHAIN, paymaster, 1001n);
    assert.equal(inside.fromBlock, 1003n);
    assert.equal(inside.operations, 1);
    assert.equal(inside.paidWei, 5_000_000n);
    const later = await paidTotals(t.db, CHAIN, paymaster, 1500n);
    assert.equal(later.operations, 1);
    assert.equal(later.unattributedWei, 0n);

    // The watcher reading the folded range again records nothing and charges nothing.
    const again = await record(billed);
    assert.equal(again.billing, null);
    const unseenButFolded = await record(paid(await authorized(), 999n, 9_000_000n));
    assert.equal(unseenButFolded.billing, null);
    assert.equal((await rowsLeft()).length, 2);
    assert.deepEqual(await paidTotals(t.db, CHAIN, paymaster, null), before);

    // Nothing more to fold until the recent row is old too; folding again changes nothing.
    assert.equal(await drain(10), 0);
    assert.deepEqual(await paidTotals(t.db, CHAIN, paymaster, null), before);
  });

  it("two folders at once add every row once, and the upkeep pass folds", async () => {
    const start = await paidTotals(t.db, CHAIN, paymaster, null);
    // Forty old, fully billed rows of a later stretch of blocks, written as the recorder writes them.
    await t.db.query(
      `INSERT INTO chain_operations (chain_id, block_hash, log_index, block_number, tx_hash, paymaster,
         user_op_hash, sender, success, actual_gas_used, actual_gas_cost, billed, created_at)
       SELECT $1, decode(md5('fold' || i) || md5(i || 'fold'), 'hex'), 0, 3000 + i,
         decode(md5('t' || i) || md5(i || 't'), 'hex'), decode(substr($2, 3), 'hex'),
         decode(md5('u' || i) || md5(i || 'u'), 'hex'), decode(repeat('ee', 20), 'hex'), true,
         50000, 1000 + i, 1000 + i, now() - interval '9 days'
       FROM generate_series(1, 40) AS i`,
      [CHAIN, paymaster],
    );
    const folded = await Promise.all([drain(3), drain(3)]);
    assert.equal(folded[0]! + folded[1]!, 40);
    const after = await paidTotals(t.db, CHAIN, paymaster, null);
    assert.equal(after.operations, start.operations + 40);
    assert.equal(after.paidWei, start.paidWei + 40n * 1000n + 820n);
    assert.equal(after.unattributedWei, start.unattributedWei);
    assert.equal(after.throughBlock, 3040n);

    // The upkeep pass runs the fold with CHAIN_OPERATION_RETENTION_DAYS.
    await t.db.query(
      `INSERT INTO chain_operations (chain_id, block_hash, log_index, block_number, tx_hash, paymaster,
         user_op_hash, sender, success, actual_gas_used, actual_gas_cost, billed, created_at)
       VALUES ($1, decode(repeat('ab', 32), 'hex'), 0, 4000, decode(repeat('cd', 32), 'hex'),
         decode(substr($2, 3), 'hex'), decode(repeat('ef', 32), 'hex'), decode(repeat('ee', 20), 'hex'),
         true, 50000, 7, 7, now() - interval '3 days')`,
      [CHAIN, paymaster],
    );
    const upkeep = (days: number) =>
      maintenance(t.db, {
        intervalMs: 0,
        batchSize: 100,
        checkpointEvery: 1_000_000,
        webhookRetentionDays: 30,
        chainOperationRetentionDays: days,
        now: () => Date.now(),
      }).pass();
    assert.equal((await upkeep(7)).chainOperationsFolded, 0);
    assert.equal((await upkeep(2)).chainOperationsFolded, 1);
    assert.equal((await paidTotals(t.db, CHAIN, paymaster, null)).paidWei, after.paidWei + 7n);
  });
});
