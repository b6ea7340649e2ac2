/**
 * Migrations 035–039 (issue 23) give every tank, ledger entry, allowlist entry, policy counter and rollup a
 * chain. A database at the schema before them, with a funded project, a settled and a pending
 * operation, a checkpoint, a day of usage and of rollups, an allowlist entry and a rule with its
 * counter, migrates with all of it on chain 14601, the project's home chain (the rule stays one
 * for every chain), and nothing else changed: the balance, every entry, the checkpoint, the day's
 * usage and the rollups read the same, parity is in sync from the checkpoint and from scratch, and
 * what happens next (the pending reservation released, a deposit credited before) lands on 14601.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { creditDeposit, parity, release } from "../src/ledger/ledger.ts";
import { openTestDb } from "./support/app.ts";

const BEFORE = "034_ascending_indexes.sql";
const PROJECT = "prj_chains";
const SETTLED = `0x${"a1".repeat(32)}`;
const PENDING = `0x${"b2".repeat(32)}`;
const DEPOSIT_REF = `14601:0x${"f6".repeat(32)}:0`;
const DEPOSIT = 10n ** 18n;
const MAX = 10n ** 15n;
const COST = 4n * 10n ** 14n;
const BALANCE = DEPOSIT - COST - MAX;

let db: Db;
let drop: () => Promise<void>;
let entriesBefore: { id: string; kind: string; amount: string; reference: string }[];

before(async () => {
  ({ db, drop } = await openTestDb({ until: BEFORE }));
  // Rows as the code before 035 wrote them (no function file is applied at that schema).
  const [org] = await db.query<{ id: string }>(
    "INSERT INTO organizations (name, slug) VALUES ('Studio', 'studio') RETURNING id::text",
  );
  await db.query(
    `INSERT INTO projects (id, org_id, owner, name, deposit_address, gas_tank_balance, sponsorships_seq, daily_cap)
     VALUES ($1, $2, 'owner', 'Game', $3, $4, 2, $5)`,
    [PROJECT, org!.id, `0x${"de".repeat(20)}`, BALANCE.toString(), (10n * MAX).toString()],
  );
  const sponsorship = `INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector,
      estimated_gas, max_gas_cost, valid_after, valid_until, status, actual_gas, actual_gas_cost, paymaster, seq,
      settled_at)
    VALUES ($1, $2, 14601, $3, $3, '0xa0712d68', 150000, $4, 0, 4000000000, $5, $6, $7, $8, $9,
      CASE WHEN $5 = 'pending' THEN NULL ELSE now() END)`;
  const pm = `0x${"77".repeat(20)}`;
  const sender = `0x${"5e".repeat(20)}`;
  await db.query(sponsorship, [
    SETTLED,
    PROJECT,
    sender,
    MAX.toString(),
    "success",
    90000,
    COST.toString(),
    pm,
    1,
  ]);
  await db.query(sponsorship, [PENDING, PROJECT, sender, MAX.toString(), "pending", 0, "0", pm, 2]);
  const entry = "INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES ($1, $2, $3, $4)";
  await db.query(entry, [PROJECT, "deposit", DEPOSIT.toString(), DEPOSIT_REF]);
  await db.query(entry, [PROJECT, "reserve", (-MAX).toString(), SETTLED]);
  await db.query(entry, [PROJECT, "reserve", (-MAX).toString(), PENDING]);
  // A checkpoint through the first three entries, then the settlement after it.
  await db.query(
    `INSERT INTO ledger_checkpoints (project_id, last_entry_id, balance, entries)
     SELECT $1, max(id), sum(amount), count(*) FROM ledger_entries WHERE project_id = $1`,
    [PROJECT],
  );
  await db.query(entry, [PROJECT, "settle", (MAX - COST).toString(), SETTLED]);
  await db.query(
    "INSERT INTO daily_usage (project_id, day, spent) VALUES ($1, (now() AT TIME ZONE 'UTC')::date, $2)",
    [PROJECT, (COST + MAX).toString()],
  );
  await db.query(
    `INSERT INTO rollup_project_days (project_id, day, authorized, success, gas_used, cost_wei)
     VALUES ($1, (now() AT TIME ZONE 'UTC')::date, 2, 1, 90000, $2)`,
    [PROJECT, COST.toString()],
  );
  await db.query(
    "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, '0xa0712d68')",
    [PROJECT, `0x${"7a".repeat(20)}`],
  );
  await db.query(
    `INSERT INTO policy_rules (project_id, id, kind, max_operations, window_kind)
     VALUES ($1, 'five-a-day', 'sender_count_cap', 5, 'day')`,
    [PROJECT],
  );
  await db.query(
    `INSERT INTO policy_usage (project_id, rule_id, subject, window_start, spent, ops)
     VALUES ($1, 'five-a-day', $2, date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', $3, 2)`,
    [PROJECT, sender, (2n * MAX).toString()],
  );
  entriesBefore = await db.query(
    "SELECT id::text, kind, amount::text, reference FROM ledger_entries WHERE project_id = $1 ORDER BY id",
    [PROJECT],
  );
  const applied = await migrate(db);
  assert.ok(applied.migrations.includes("035_chain_tanks.sql"));
});

after(() => drop());

describe("migrating to a tank per chain", () => {
  it("puts the balance, every entry, the checkpoint, the day's usage and the rollups on 14601, unchanged", async () => {
    const [project] = await db.query<{ home: number; balance: string }>(
      "SELECT home_chain_id AS home, gas_tank_balance::text AS balance FROM projects WHERE id = $1",
      [PROJECT],
    );
    assert.deepEqual(project, { home: 14601, balance: BALANCE.toString() });
    assert.deepEqual(await db.query("SELECT count(*)::int AS n FROM gas_tanks"), [{ n: 0 }]);
    const entries = await db.query<{ chain_id: number }>(
      "SELECT id::text, kind, amount::text, reference, chain_id FROM ledger_entries WHERE project_id = $1 ORDER BY id",
      [PROJECT],
    );
    assert.deepEqual(
      entries,
      entriesBefore.map((e) => ({ ...e, chain_id: 14601 })),
    );
    assert.deepEqual(
      await db.query(
        "SELECT chain_id, balance::text, entries::int FROM ledger_checkpoints WHERE project_id = $1",
        [PROJECT],
      ),
      [{ chain_id: 14601, balance: (DEPOSIT - 2n * MAX).toString(), entries: 3 }],
    );
    assert.deepEqual(
      await db.query("SELECT chain_id, spent::text FROM daily_usage WHERE project_id = $1", [PROJECT]),
      [{ chain_id: 14601, spent: (COST + MAX).toString() }],
    );
    assert.deepEqual(
      await db.query(
        "SELECT chain_id, authorized::int, success::int, cost_wei::text FROM rollup_project_days WHERE project_id = $1",
        [PROJECT],
      ),
      [{ chain_id: 14601, authorized: 2, success: 1, cost_wei: COST.toString() }],
    );
    // Rebuilt per chain from the sponsorships (migration 039).
    assert.deepEqual(
      await db.query(
        `SELECT chain_id, pending::int, success::int, cost_wei::text FROM rollup_project_totals
         WHERE project_id = $1`,
        [PROJECT],
      ),
      [{ chain_id: 14601, pending: 1, success: 1, cost_wei: COST.toString() }],
    );
  });

  it("keeps the allowlist entries 14601's, the rules for every chain, and their counters 14601's", async () => {
    assert.deepEqual(
      await db.query("SELECT chain_id FROM allowlist_entries WHERE project_id = $1", [PROJECT]),
      [{ chain_id: 14601 }],
    );
    assert.deepEqual(
      await db.query("SELECT id, chain_id FROM policy_rules WHERE project_id = $1", [PROJECT]),
      [{ id: "five-a-day", chain_id: null }],
    );
    assert.deepEqual(
      await db.query("SELECT chain_id, ops::int, spent::text FROM policy_usage WHERE project_id = $1", [
        PROJECT,
      ]),
      [{ chain_id: 14601, ops: 2, spent: (2n * MAX).toString() }],
    );
  });

  it("keeps parity in sync from the checkpoint and from scratch, with the home chain's tank alone", async () => {
    for (const fromScratch of [false, true]) {
      const [report] = await parity(db, [PROJECT], { fromScratch });
      assert.deepEqual(report, {
        projectId: PROJECT,
        ledgerBalance: BALANCE.toString(),
        cachedBalance: BALANCE.toString(),
        delta: "0",
        inSync: true,
        chains: [
          {
            chainId: 14601,
            ledgerBalance: BALANCE.toString(),
            cachedBalance: BALANCE.toString(),
            delta: "0",
            inSync: true,
          },
        ],
      });
    }
  });

  it("moves the next money on 14601: the pending reservation released once, a deposit credited before not again", async () => {
    assert.equal(await release(db, PENDING), true);
    assert.equal(await release(db, PENDING), false);
    assert.equal(
      await creditDeposit(db, { projectId: PROJECT, reference: DEPOSIT_REF, amountWei: DEPOSIT }),
      false,
    );
    const [released] = await db.query<{ chain_id: number; amount: string }>(
      "SELECT chain_id, amount::text FROM ledger_entries WHERE kind = 'release' AND reference = $1",
      [PENDING],
    );
    assert.deepEqual(released, { chain_id: 14601, amount: MAX.toString() });
    const [project] = await db.query<{ balance: string }>(
      "SELECT gas_tank_balance::text AS balance FROM projects WHERE id = $1",
      [PROJECT],
    );
    assert.equal(project!.balance, (BALANCE + MAX).toString());
    assert.deepEqual(
      await db.query("SELECT chain_id, spent::text FROM daily_usage WHERE project_id = $1", [PROJECT]),
      [{ chain_id: 14601, spent: COST.toString() }],
    );
    const [report] = await parity(db, [PROJECT]);
    assert.equal(report!.inSync, true);
  });
});
