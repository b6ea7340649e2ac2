/**
 * Migrations 029–031 (issue 21) change how existing money rows are keyed and stored: ledger
 * entries unique on a digest of (kind, reference), chain_operations' and settled sponsorships'
 * hashes as bytes, sponsorships found by the bytes of their authorization id. A database at the
 * schema before them, with a funded project, a settled and a pending operation, migrates with
 * every row intact, and the keys keep working on the rows written before: a deposit credited
 * before is not credited again, the pending reservation is released once, the recorded
 * operation and the events read back the same hashes.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { events } from "../src/analytics/store.ts";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { creditDeposit, release } from "../src/ledger/ledger.ts";
import { paidTotals, recentUnattributed } from "../src/settlement/store.ts";
import { openTestDb } from "./support/app.ts";

const BEFORE = "028_contract_abis.sql";
const PROJECT = "prj_migrated";
const PAYMASTER = `0x${"77".repeat(20)}`;
const SENDER = `0x${"5e".repeat(20)}`;
const TARGET = `0x${"7a".repeat(20)}`;
const SETTLED = `0x${"a1".repeat(32)}`;
const PENDING = `0x${"b2".repeat(32)}`;
const TX = `0x${"c3".repeat(32)}`;
const USER_OP = `0x${"d4".repeat(32)}`;
const BLOCK = `0x${"e5".repeat(32)}`;
const DEPOSIT_REF = `14601:0x${"f6".repeat(32)}:0`;
const DEPOSIT = 10n ** 18n;
const MAX = 10n ** 15n;
const COST = 4n * 10n ** 14n;

let db: Db;
let drop: () => Promise<void>;

before(async () => {
  ({ db, drop } = await openTestDb({ until: BEFORE }));
  const [last] = await db.query<{ version: string }>("SELECT max(version) AS version FROM schema_migrations");
  assert.equal(last?.version, BEFORE);
  const [functions] = await db.query<{ applied: boolean }>(
    "SELECT to_regclass('schema_functions') IS NOT NULL AS applied",
  );
  assert.equal(functions?.applied, false, "no function file was applied");
  // Yesterday's rows, written as yesterday's code wrote them (no triggers at that schema here).
  const [org] = await db.query<{ id: string }>(
    "INSERT INTO organizations (name, slug) VALUES ('Studio', 'studio') RETURNING id::text",
  );
  await db.query(
    `INSERT INTO projects (id, org_id, owner, name, deposit_address, gas_tank_balance, sponsorships_seq)
     VALUES ($1, $2, 'owner', 'Game', $3, $4, 2)`,
    [PROJECT, org!.id, `0x${"de".repeat(20)}`, (DEPOSIT - COST - MAX).toString()],
  );
  const sponsorship = `INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector,
      estimated_gas, max_gas_cost, valid_after, valid_until, status, actual_gas, actual_gas_cost, tx_hash,
      user_op_hash, settled_at, paymaster, seq)
    VALUES ($1, $2, 14601, $3, $4, '0xa0712d68', 150000, $5, 0, 4000000000, $6, $7, $8, $9, $10, $11, $12, $13)`;
  await db.query(sponsorship, [
    SETTLED,
    PROJECT,
    SENDER,
    TARGET,
    MAX.toString(),
    "success",
    90000,
    COST.toString(),
    TX,
    USER_OP,
    new Date(),
    PAYMASTER,
    1,
  ]);
  await db.query(sponsorship, [
    PENDING,
    PROJECT,
    SENDER,
    TARGET,
    MAX.toString(),
    "pending",
    0,
    "0",
    null,
    null,
    null,
    PAYMASTER,
    2,
  ]);
  const entry = "INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES ($1, $2, $3, $4)";
  await db.query(entry, [PROJECT, "deposit", DEPOSIT.toString(), DEPOSIT_REF]);
  await db.query(entry, [PROJECT, "reserve", (-MAX).toString(), SETTLED]);
  await db.query(entry, [PROJECT, "reserve", (-MAX).toString(), PENDING]);
  await db.query(entry, [PROJECT, "settle", (MAX - COST).toString(), SETTLED]);
  await db.query(
    `INSERT INTO chain_operations (chain_id, block_hash, log_index, block_number, tx_hash, paymaster,
       user_op_hash, sender, auth_id, success, actual_gas_used, actual_gas_cost, billed, project_id)
     VALUES (14601, $1, 3, 120, $2, $3, $4, $5, $6, true, 90000, $7, $7, $8)`,
    [BLOCK, TX, PAYMASTER, USER_OP, SENDER, SETTLED, COST.toString(), PROJECT],
  );
  const today = await migrate(db);
  assert.ok(today.migrations.includes("029_compact_keys.sql"), "the rest of the migrations apply");
});

after(() => drop());

async function ledger(): Promise<{ n: number; sum: string; balance: string }> {
  const [row] = await db.query<{ n: number; sum: string; balance: string }>(
    `SELECT count(*)::int AS n, sum(amount)::text AS sum,
       (SELECT gas_tank_balance::text FROM projects WHERE id = $1) AS balance
     FROM ledger_entries WHERE project_id = $1`,
    [PROJECT],
  );
  return row!;
}

describe("migrating yesterday's money rows to compact keys", () => {
  it("keeps every ledger entry and the balance, and a deposit credited before is not credited again", async () => {
    assert.deepEqual(await ledger(), {
      n: 4,
      sum: (DEPOSIT - COST - MAX).toString(),
      balance: (DEPOSIT - COST - MAX).toString(),
    });
    assert.equal(
      await creditDeposit(db, { projectId: PROJECT, reference: DEPOSIT_REF, amountWei: DEPOSIT }),
      false,
    );
    assert.equal((await ledger()).n, 4);
  });

  it("finds a reservation written before by its authorization id: released once, its entry unique", async () => {
    assert.equal(await release(db, PENDING), true);
    assert.equal(await release(db, PENDING), false);
    assert.deepEqual(await ledger(), {
      n: 5,
      sum: (DEPOSIT - COST).toString(),
      balance: (DEPOSIT - COST).toString(),
    });
  });

  it("reads the recorded operation's hashes and totals back as they were written", async () => {
    const totals = await paidTotals(db, 14601, PAYMASTER, null);
    assert.equal(totals.operations, 1);
    assert.equal(totals.paidWei, COST);
    assert.equal(totals.unattributedWei, 0n);
    assert.deepEqual(await recentUnattributed(db, 14601, 10), []);
    const [row] = await db.query<{ block_hash: string; auth_id: string; sender: string }>(
      `SELECT '0x' || encode(block_hash, 'hex') AS block_hash, '0x' || encode(auth_id, 'hex') AS auth_id,
         '0x' || encode(sender, 'hex') AS sender FROM chain_operations`,
    );
    assert.deepEqual(row, { block_hash: BLOCK, auth_id: SETTLED, sender: SENDER });
  });

  it("lists the settled operation with its hashes, through the sender and target filters", async () => {
    for (const filters of [{ sender: SENDER }, { target: TARGET }, { sender: SENDER, target: TARGET }]) {
      const page = await events(db, PROJECT, { limit: 10, offset: 0, filters });
      assert.deepEqual(
        page.events.map((e) => [e.auth_id, e.status, e.tx_hash, e.user_op_hash]),
        [
          [PENDING, "expired", null, null],
          [SETTLED, "success", TX, USER_OP],
        ],
      );
    }
    const other = await events(db, PROJECT, {
      limit: 10,
      offset: 0,
      filters: { sender: `0x${"00".repeat(20)}` },
    });
    assert.equal(other.events.length, 0);
  });
});
