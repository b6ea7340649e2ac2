import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import {
  checkpointDueProjects,
  projectsDueForCheckpoint,
  writeCheckpoints,
} from "../src/ledger/checkpoints.ts";
import { creditDeposit, parity, reserve } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const SELECTOR = "0xa0712d68";

async function project() {
  const p = await seedProject(t);
  await t.db.query(
    "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
    [p.projectId, TARGET, SELECTOR],
  );
  return p;
}

async function activity(projectId: string, n: number) {
  for (let i = 0; i < n; i++) {
    await creditDeposit(t.db, {
      projectId,
      reference: `cp:${randomBytes(6).toString("hex")}`,
      amountWei: 1000n,
    });
    await reserve(t.db, {
      projectId,
      clientNonce: null,
      requestDigest: null,
      authId: `0x${randomBytes(32).toString("hex")}`,
      apiKeyId: null,
      chainId: 14601,
      sender: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
      target: TARGET,
      selector: SELECTOR,
      estimatedGas: 1000n,
      maxGasCostWei: 300n,
      maxFeePerGasWei: 2n,
      maxPriorityFeePerGasWei: 1n,
      paymaster: "0x00000000000000000000000000000000000000aa",
      validAfterSec: 1_800_000_000,
      validUntilSec: 1_800_000_300,
      response: null,
      requestedAtMs: Date.now(),
    });
  }
}

const both = async (id: string) => ({
  checkpoint: (await parity(t.db, [id]))[0]!,
  scratch: (await parity(t.db, [id], { fromScratch: true }))[0]!,
});

/** Runs `sql` with the append-only triggers off, as an attacker with the table's ownership could. */
async function tamper(table: string, trigger: string, sql: string, params: unknown[]) {
  await t.db.transaction(async (tx) => {
    await tx.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`);
    await tx.query(sql, params);
    await tx.query(`ALTER TABLE ${table} ENABLE TRIGGER ${trigger}`);
  });
}

describe("ledger checkpoints", () => {
  it("give the same parity as the whole ledger, before and after new entries, and only when due", async () => {
    const p = await project();
    await activity(p.projectId, 5);
    assert.ok(!(await projectsDueForCheckpoint(t.db, 11, 1000)).includes(p.projectId));
    assert.ok((await projectsDueForCheckpoint(t.db, 10, 1000)).includes(p.projectId));
    assert.deepEqual(await writeCheckpoints(t.db, [p.projectId]), [p.projectId]);
    const [cp] = await t.db.query<{ balance: string; entries: string }>(
      "SELECT balance::text, entries::text FROM ledger_checkpoints WHERE project_id = $1",
      [p.projectId],
    );
    assert.deepEqual(cp, { balance: "3500", entries: "10" });
    let r = await both(p.projectId);
    assert.deepEqual(r.checkpoint, r.scratch);
    assert.equal(r.checkpoint.ledgerBalance, "3500");
    assert.equal(r.checkpoint.inSync, true);

    await activity(p.projectId, 3);
    r = await both(p.projectId);
    assert.deepEqual(r.checkpoint, r.scratch);
    // The next checkpoint chains from the first; nothing new means nothing written.
    await checkpointDueProjects(t.db, 6, 1000);
    await checkpointDueProjects(t.db, 6, 1000);
    const rows = await t.db.query<{ balance: string; entries: string }>(
      "SELECT balance::text, entries::text FROM ledger_checkpoints WHERE project_id = $1 ORDER BY last_entry_id",
      [p.projectId],
    );
    assert.deepEqual(rows.at(-1), { balance: "5600", entries: "16" });
    assert.equal(rows.length, 2);
    assert.deepEqual((await both(p.projectId)).checkpoint, (await both(p.projectId)).scratch);
  });

  it("are append-only, and a checkpoint is not written over a drifting cache", async () => {
    const p = await project();
    await activity(p.projectId, 2);
    await writeCheckpoints(t.db, [p.projectId]);
    await assert.rejects(
      t.db.query("UPDATE ledger_checkpoints SET balance = 0 WHERE project_id = $1", [p.projectId]),
      /append-only/,
    );
    await assert.rejects(
      t.db.query("DELETE FROM ledger_checkpoints WHERE project_id = $1", [p.projectId]),
      /append-only/,
    );

    await activity(p.projectId, 1);
    await t.db.query("UPDATE projects SET gas_tank_balance = gas_tank_balance + 1 WHERE id = $1", [
      p.projectId,
    ]);
    assert.deepEqual(await writeCheckpoints(t.db, [p.projectId]), []);
    const r = await both(p.projectId);
    assert.equal(r.checkpoint.delta, "1");
    assert.deepEqual(r.checkpoint, r.scratch);
  });

  it("walk the due projects over passes: projects whose cache drifted do not take every pass's places", async () => {
    const prefix = `cpw-${randomBytes(3).toString("hex")}`;
    // Three projects first in id order, each 30 entries past no checkpoint; the first two with a
    // cache one wei short of their ledger.
    const ids = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
    for (const [i, id] of ids.entries()) {
      await seedProject(t, { projectId: id });
      await t.db.query(
        `INSERT INTO ledger_entries (project_id, chain_id, kind, amount, reference)
         SELECT $1, 14601, 'deposit', 1, 'walk:' || $1 || ':' || g FROM generate_series(1, 30) g`,
        [id],
      );
      await t.db.query("UPDATE projects SET gas_tank_balance = gas_tank_balance + $2 WHERE id = $1", [
        id,
        i < 2 ? 29 : 30,
      ]);
    }
    // Other projects of this file have at most 16 entries: only these three are due at 30.
    const first = await checkpointDueProjects(t.db, 30, 2);
    assert.deepEqual(first, { checkpointed: [], next: ids[1] }, "the two drifting projects filled the pass");
    const second = await checkpointDueProjects(t.db, 30, 2, first.next);
    assert.deepEqual(second, { checkpointed: [ids[2]], next: "" }, "the next pass went on to the third");
    const third = await checkpointDueProjects(t.db, 30, 2, second.next);
    assert.deepEqual(third, { checkpointed: [], next: ids[1] }, "and then round again");
    assert.equal((await parity(t.db, [ids[0]!]))[0]!.inSync, false);
  });

  it("detect a tampered checkpoint, and a tampered ledger (after the checkpoint; before it, from scratch)", async () => {
    const p = await project();
    await activity(p.projectId, 3);
    await writeCheckpoints(t.db, [p.projectId]);
    await activity(p.projectId, 1);
    assert.equal((await both(p.projectId)).checkpoint.inSync, true);

    await tamper(
      "ledger_checkpoints",
      "ledger_checkpoints_no_update",
      "UPDATE ledger_checkpoints SET balance = balance + 7 WHERE project_id = $1",
      [p.projectId],
    );
    let r = await both(p.projectId);
    assert.equal(r.checkpoint.inSync, false);
    assert.equal(r.checkpoint.delta, "-7");
    assert.equal(r.scratch.inSync, true, "the whole ledger still agrees with the cache");
    await tamper(
      "ledger_checkpoints",
      "ledger_checkpoints_no_update",
      "UPDATE ledger_checkpoints SET balance = balance - 7 WHERE project_id = $1",
      [p.projectId],
    );

    // An entry after the checkpoint: both reads see it.
    await tamper(
      "ledger_entries",
      "ledger_entries_no_update",
      "UPDATE ledger_entries SET amount = amount + 5 WHERE id = (SELECT max(id) FROM ledger_entries WHERE project_id = $1)",
      [p.projectId],
    );
    r = await both(p.projectId);
    assert.equal(r.checkpoint.delta, "-5");
    assert.equal(r.scratch.delta, "-5");
    // An entry before the checkpoint: the whole-ledger read (and the route's fromScratch) sees it.
    await tamper(
      "ledger_entries",
      "ledger_entries_no_update",
      "UPDATE ledger_entries SET amount = amount - 5 WHERE id = (SELECT min(id) FROM ledger_entries WHERE project_id = $1)",
      [p.projectId],
    );
    r = await both(p.projectId);
    assert.equal(r.checkpoint.delta, "-5");
    assert.equal(r.scratch.inSync, true);
    const res = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity?fromScratch=true`,
      token: p.ownerToken,
    });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), r.scratch);
  });
});

// PGlite runs one transaction at a time and cannot deadlock or wait on a lock: these use the
// machine's PostgreSQL in both passes.
describe("a checkpoint and the ledger's writers (PostgreSQL)", () => {
  /** A migrated schema of its own, a service on it, and a client of its own to watch pg_locks. */
  async function withSchema(
    run: (s: { db: Db; app: TestApp; watcher: pg.Client; url: string; schema: string }) => Promise<void>,
    lockTimeoutMs?: number,
  ) {
    const url = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
    const schema = `t_${randomBytes(6).toString("hex")}`;
    const db = await openPostgres({ url, schema, ...(lockTimeoutMs ? { lockTimeoutMs } : {}) });
    await migrate(db);
    const app = await startTestApp({ db: { db, schema, drop: async () => {} } });
    const watcher = new pg.Client({ connectionString: url });
    await watcher.connect();
    try {
      await run({ db, app, watcher, url, schema });
    } finally {
      await watcher.end();
      await app.close();
      await db.query(`DROP SCHEMA ${schema} CASCADE`);
      await db.close();
    }
  }

  /** How many locks of `mode` on the schema's `table` are granted (or waiting, with `granted` false). */
  async function locks(watcher: pg.Client, schema: string, table: string, mode: string, granted = true) {
    const { rows } = await watcher.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks
       WHERE relation = to_regclass($1) AND mode = $2 AND granted = $3`,
      [`${schema}.${table}`, mode, granted],
    );
    return rows[0]!.n;
  }

  it("a checkpoint taken while a reservation holds the project's row waits for nothing the reservation needs", async () => {
    await withSchema(async ({ db, app, watcher, schema }) => {
      const p = await seedProject(app, { slug: `dl-${randomBytes(3).toString("hex")}` });
      await creditDeposit(db, { projectId: p.projectId, reference: `dl:${p.projectId}:0`, amountWei: 10n });
      let checkpoint: Promise<string[]> | null = null;
      // The reservation's order: the project's row first, its ledger entry afterwards.
      await db.transaction(async (tx) => {
        await tx.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE", [p.projectId]);
        checkpoint = writeCheckpoints(db, [p.projectId]);
        // Until the checkpoint holds its SHARE lock on ledger_entries (or is already done).
        for (let i = 0; i < 500; i++) {
          if ((await locks(watcher, schema, "ledger_entries", "ShareLock")) > 0) break;
          await sleep(10);
        }
        await tx.query(
          "INSERT INTO ledger_entries (project_id, chain_id, kind, amount, reference) VALUES ($1, 14601, 'deposit', 5, $2)",
          [p.projectId, `dl:${p.projectId}:1`],
        );
        await tx.query("UPDATE projects SET gas_tank_balance = gas_tank_balance + 5 WHERE id = $1", [
          p.projectId,
        ]);
      });
      assert.deepEqual(await checkpoint, [p.projectId], "the checkpoint was written, with no deadlock");
      const [report] = await parity(db, [p.projectId]);
      assert.deepEqual([report!.ledgerBalance, report!.inSync], ["15", true]);
    });
  });

  it("sums the tails after its lock on the ledger is released: a long sum holds no writer back", async () => {
    await withSchema(async ({ db, app, watcher, url, schema }) => {
      const p = await seedProject(app, { slug: `lk-${randomBytes(3).toString("hex")}` });
      await creditDeposit(db, { projectId: p.projectId, reference: `lk:${p.projectId}:0`, amountWei: 10n });
      // The statement that sums the tails and writes the checkpoints is held at its start, as a
      // long sum would hold it: another client keeps ledger_checkpoints from being written.
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      let checkpoint: Promise<string[]> | null = null;
      try {
        await holder.query("BEGIN");
        await holder.query(`LOCK TABLE ${schema}.ledger_checkpoints IN EXCLUSIVE MODE`);
        checkpoint = writeCheckpoints(db, [p.projectId]);
        let waiting = 0;
        for (let i = 0; i < 500 && waiting === 0; i++) {
          await sleep(10);
          waiting = await locks(watcher, schema, "ledger_checkpoints", "RowExclusiveLock", false);
        }
        assert.equal(waiting, 1, "the checkpoint's sum is waiting to write");
        assert.equal(
          await locks(watcher, schema, "ledger_entries", "ShareLock"),
          0,
          "no SHARE lock on the ledger is held meanwhile",
        );
        // A deposit goes through while the sum is in progress (it would wait behind the lock).
        await creditDeposit(db, { projectId: p.projectId, reference: `lk:${p.projectId}:1`, amountWei: 5n });
      } finally {
        await holder.query("COMMIT");
        await holder.end();
      }
      assert.deepEqual(await checkpoint, [p.projectId]);
      // The checkpoint is the ledger as it was under the lock; the later deposit is in its tail.
      const [written] = await db.query<{ balance: string; entries: string }>(
        "SELECT balance::text, entries::text FROM ledger_checkpoints WHERE project_id = $1",
        [p.projectId],
      );
      assert.deepEqual(written, { balance: "10", entries: "1" });
      const [report] = await parity(db, [p.projectId]);
      assert.deepEqual([report!.ledgerBalance, report!.cachedBalance, report!.inSync], ["15", "15", true]);
    });
  });

  it("a project whose sum fails costs the others nothing: theirs are written, then the failure is thrown", async () => {
    await withSchema(async ({ db, app, url, schema }) => {
      const [a, b] = [await seedProject(app), await seedProject(app)];
      for (const p of [a, b])
        await creditDeposit(db, { projectId: p.projectId, reference: `f:${p.projectId}`, amountWei: 10n });
      // Another transaction is writing the checkpoint `a` would write, and does not commit: `a`'s
      // statement waits for it past the lock timeout.
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        await holder.query("BEGIN");
        await holder.query(
          `INSERT INTO ${schema}.ledger_checkpoints (project_id, chain_id, last_entry_id, balance, entries)
           SELECT project_id, chain_id, id, amount, 1 FROM ${schema}.ledger_entries WHERE project_id = $1`,
          [a.projectId],
        );
        await assert.rejects(writeCheckpoints(db, [a.projectId, b.projectId]));
      } finally {
        await holder.query("ROLLBACK");
        await holder.end();
      }
      const written = await db.query<{ project_id: string }>("SELECT project_id FROM ledger_checkpoints");
      assert.deepEqual(written, [{ project_id: b.projectId }]);
    }, 300);
  });
});
