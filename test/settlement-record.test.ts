import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { applyEffects, reorgEpoch, StaleRangeError } from "../src/chains/applied-blocks.ts";
import type { Db, Queryable } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { release } from "../src/ledger/ledger.ts";
import { recordOperation } from "../src/settlement/store.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  paidBlock,
  paidOperation,
  settlementWatcherOffChain,
  startTestApp,
  TEST_PAYMASTER,
  type TestApp,
} from "./support/app.ts";

/**
 * Recording a paid operation (settlement/store.ts): one chain_operations row, inserted once with
 * its billing, never updated afterwards; and two recorders of the same log charge it once.
 */
let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const paid = (authId: string) => paidOperation(authId, { logIndex: 3 });

async function authorized() {
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 16n);
  const res = await authorizeMint(t, p);
  assert.equal(res.statusCode, 200, res.body);
  return { p, authId: (res.json() as { authorizationId: string }).authorizationId };
}

async function balanceOf(projectId: string): Promise<bigint> {
  const [row] = await t.db.query<{ b: string }>(
    "SELECT gas_tank_balance::text AS b FROM projects WHERE id = $1",
    [projectId],
  );
  return BigInt(row!.b);
}

/**
 * What `work` adds to this transaction's counts of `table`. The transaction's view of them
 * (pg_stat_xact_user_tables) also holds the same connection's earlier counts that were not flushed
 * yet (a test before this one on a reused store, within the second PostgreSQL waits between
 * flushes), so the counts are read before and after and the difference is the work's.
 */
async function countsAdded(
  tx: Queryable,
  table: string,
  work: () => Promise<void>,
): Promise<{ ins: number; upd: number; hot: number }> {
  const counts = async () => {
    const [row] = await tx.query<{ ins: string; upd: string; hot: string }>(
      `SELECT n_tup_ins::text AS ins, n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot
       FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
      [table],
    );
    return { ins: Number(row?.ins ?? 0), upd: Number(row?.upd ?? 0), hot: Number(row?.hot ?? 0) };
  };
  const before = await counts();
  await work();
  const after = await counts();
  return { ins: after.ins - before.ins, upd: after.upd - before.upd, hot: after.hot - before.hot };
}

describe("recording a paid operation", () => {
  it("inserts its row once, with what was billed, and never updates it", async () => {
    const { p, authId } = await authorized();
    const op = paid(authId);
    const added = await t.db.transaction((tx) =>
      countsAdded(tx, "chain_operations", async () => {
        const recorded = await recordOperation(tx, 14601, TEST_PAYMASTER, op);
        assert.equal(recorded.billing?.kind, "charged");
      }),
    );
    // An insert followed by an update of the same row (the former way) would add an update here.
    assert.deepEqual({ ins: added.ins, upd: added.upd }, { ins: 1, upd: 0 });
    const [row] = await t.db.query<{ billed: string; project_id: string; unbilled_reason: string | null }>(
      "SELECT billed::text, project_id, unbilled_reason FROM chain_operations WHERE block_hash = decode(substr($1, 3), 'hex')",
      [op.blockHash],
    );
    assert.deepEqual(row, { billed: "1000000", project_id: p.projectId, unbilled_reason: null });
  });

  it("settling a sponsorship is a HOT update: no index of sponsorships names a column it writes", async () => {
    // What a settlement, release or reversal writes (ledger.ts markSettled, release, reverseBilling).
    const written = ["status", "actual_gas", "actual_gas_cost", "tx_hash", "user_op_hash", "settled_at"];
    const indexes = await t.db.query<{ def: string }>(
      `SELECT pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
       WHERE i.indrelid = 'sponsorships'::regclass`,
    );
    assert.ok(indexes.length >= 5);
    for (const { def } of indexes) {
      for (const column of written)
        assert.ok(!new RegExp(`\\b${column}\\b`).test(def), `${def} names ${column}`);
    }
    // And so the row's new version stays on its page (fillfactor leaves the room).
    const { authId } = await authorized();
    const stats = await t.db.transaction((tx) =>
      countsAdded(tx, "sponsorships", async () => {
        const recorded = await recordOperation(tx, 14601, TEST_PAYMASTER, paid(authId));
        assert.equal(recorded.billing?.kind, "charged");
      }),
    );
    // Every update recording made must be HOT, and there is at least this one.
    assert.ok(stats.upd >= 1, JSON.stringify(stats));
    assert.equal(stats.hot, stats.upd, JSON.stringify(stats));
  });

  it("the settled target's count is a HOT update too (no index names the count, migration 052)", async () => {
    // The first operation of a project inserts its target's row; the second one's update is timed.
    const { p, authId } = await authorized();
    const recorded = await t.db.transaction((tx) => recordOperation(tx, 14601, TEST_PAYMASTER, paid(authId)));
    assert.equal(recorded.billing?.kind, "charged");
    const res = await authorizeMint(t, p);
    assert.equal(res.statusCode, 200, res.body);
    const second = (res.json() as { authorizationId: string }).authorizationId;
    const stats = await t.db.transaction((tx) =>
      countsAdded(tx, "rollup_project_targets", async () => {
        const again = await recordOperation(tx, 14601, TEST_PAYMASTER, paid(second));
        assert.equal(again.billing?.kind, "charged");
      }),
    );
    assert.deepEqual(stats, { ins: 0, upd: 1, hot: 1 });
  });

  it("two recorders of the same log at once charge it once and keep one row", async () => {
    const { p, authId } = await authorized();
    const op = paid(authId);
    const before = await balanceOf(p.projectId);
    const results = await Promise.allSettled(
      [0, 1].map(() => t.db.transaction((tx) => recordOperation(tx, 14601, TEST_PAYMASTER, op))),
    );
    for (const r of results) assert.equal(r.status, "fulfilled", String((r as PromiseRejectedResult).reason));
    const recorded = results.map(
      (r) => (r as PromiseFulfilledResult<Awaited<ReturnType<typeof recordOperation>>>).value,
    );
    assert.deepEqual(recorded.map((r) => r.billing?.kind ?? null).sort(), ["charged", null]);
    const rows = await t.db.query<{ billed: string }>(
      "SELECT billed::text FROM chain_operations WHERE block_hash = decode(substr($1, 3), 'hex')",
      [op.blockHash],
    );
    assert.deepEqual(rows, [{ billed: "1000000" }]);
    // The reservation was 100,000 gas at the fee ceiling; the tank got back all but the 1,000,000 wei.
    const [s] = await t.db.query<{ max: string }>(
      "SELECT max_gas_cost::text AS max FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
      [authId],
    );
    assert.equal(await balanceOf(p.projectId), before + BigInt(s!.max) - 1_000_000n);
    const [settles] = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE reference = $1 AND kind = 'settle'",
      [authId],
    );
    assert.equal(settles!.n, 1);
  });
});

describe("a settled operation's round trips", () => {
  it("recording one charged operation is four statements: seen, its sponsorship, the charge, its row", async () => {
    const { p, authId } = await authorized();
    const before = await balanceOf(p.projectId);
    const statements: string[] = [];
    const recorded = await t.db.transaction((tx) => {
      const counting: Queryable = {
        query: (text, values, name) => {
          statements.push(text.trim().split(/\s+/).slice(0, 2).join(" "));
          return tx.query(text, values, name);
        },
      };
      return recordOperation(counting, 14601, TEST_PAYMASTER, paid(authId));
    });
    assert.equal(recorded.billing?.kind, "charged");
    // The sponsorship marked, the tank's entry, the day's count and the policy windows were four
    // statements of their own before db/functions/settle_sponsorship.sql.
    assert.deepEqual(statements, [
      "SELECT 1",
      "SELECT project_id,",
      "SELECT settle_sponsorship($1,",
      "INSERT INTO",
    ]);
    const [s] = await t.db.query<{ max: string; status: string; cost: string }>(
      `SELECT max_gas_cost::text AS max, status, actual_gas_cost::text AS cost FROM sponsorships
       WHERE auth_id = decode(substr($1, 3), 'hex')`,
      [authId],
    );
    assert.deepEqual({ status: s!.status, cost: s!.cost }, { status: "success", cost: "1000000" });
    assert.equal(await balanceOf(p.projectId), before + BigInt(s!.max) - 1_000_000n);
  });
});

describe("a release's round trips", () => {
  it("releasing an unused reservation is one statement, and gives the whole reservation back once", async () => {
    const { p, authId } = await authorized();
    const before = await balanceOf(p.projectId);
    const statements: string[] = [];
    const counting = {
      ...t.db,
      query: ((text: string, values?: unknown[], name?: string) => {
        statements.push(text);
        return t.db.query(text, values, name);
      }) as Db["query"],
    } as Db;
    assert.equal(await release(counting, authId), true);
    // BEGIN, the sponsorship marked expired, ledger_move, the day's count, the policy windows and
    // COMMIT before db/functions/release_sponsorship.sql.
    assert.deepEqual(statements, ["SELECT release_sponsorship($1) AS released"]);
    const [s] = await t.db.query<{ max: string; status: string }>(
      "SELECT max_gas_cost::text AS max, status FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
      [authId],
    );
    assert.equal(s!.status, "expired");
    assert.equal(await balanceOf(p.projectId), before + BigInt(s!.max));
    assert.equal(await release(t.db, authId), false, "at most once");
    assert.equal(await balanceOf(p.projectId), before + BigInt(s!.max));
  });
});

describe("a range applied while its watcher's reorganisation is recorded (PostgreSQL)", () => {
  it("waits for the watcher's lock, then sees the reorganisation and applies nothing", async () => {
    const url = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
    const schema = `t_${randomBytes(6).toString("hex")}`;
    const db = await openPostgres({ url, schema });
    const holder = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    try {
      await migrate(db);
      await holder.connect();
      const epoch = await reorgEpoch(db, 14601, "settlement");
      // What recordReorg does, held open: the exclusive lock, then the reorganisation's row.
      await holder.query("BEGIN");
      await holder.query("SELECT pg_advisory_xact_lock(14601, hashtext('settlement'))");
      await holder.query(
        `INSERT INTO chain_reorgs (chain_id, watcher, fork_block, depth, orphaned, beyond_memory)
         VALUES (14601, 'settlement', 10, 1, $1::jsonb, false)`,
        [JSON.stringify([{ number: "11", hash: `0x${"ab".repeat(32)}` }])],
      );
      let applied = false;
      const applying = applyEffects(
        db,
        { chainId: 14601, watcher: "settlement", epoch },
        [{ number: 12n, hash: `0x${"cd".repeat(32)}` }],
        async () => {
          applied = true;
        },
      );
      void applying.catch(() => {});
      // The range waits for the shared lock while the reorganisation is being recorded.
      for (let i = 0; i < 100; i++) {
        const { rows } = await holder.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        );
        if (rows[0]!.n > 0) break;
        await sleep(20);
      }
      assert.equal(applied, false);
      await holder.query("COMMIT");
      // Its epoch is read after the lock is granted, so it sees the reorganisation committed
      // meanwhile (db/functions/watcher_epoch_locked.sql: the read is a statement of its own).
      await assert.rejects(applying, StaleRangeError);
      assert.equal(applied, false);
    } finally {
      await holder.end().catch(() => {});
      await db.query(`DROP SCHEMA ${schema} CASCADE`);
      await db.close();
    }
  });
});

describe("a range's operations recorded several at once (settlement/watcher.ts apply)", () => {
  function watcherFor(counted: bigint[]) {
    return settlementWatcherOffChain(t, {
      applyConcurrency: 4,
      metrics: { operationSettled: (_chain, _outcome, wei) => counted.push(wei), reorgReconciled: () => {} },
    });
  }
  async function authorizations(projects: { projectId: string; apiKey: string }[], n: number) {
    const authIds: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await authorizeMint(t, projects[i % projects.length]!);
      assert.equal(res.statusCode, 200, res.body);
      authIds.push((res.json() as { authorizationId: string }).authorizationId);
    }
    return authIds;
  }

  it("charges each once, across projects, and answers in the range's order", async () => {
    const projects = [await authorized(), await authorized()];
    const authIds = await authorizations(
      projects.map(({ p }) => p),
      12,
    );
    const before = await Promise.all(projects.map(({ p }) => balanceOf(p.projectId)));
    const counted: bigint[] = [];
    const w = watcherFor(counted);
    const range = paidBlock(authIds, 70_001n, await reorgEpoch(t.db, 14601, "settlement"));
    const recorded = await w.apply(range);
    assert.deepEqual(
      recorded.map((r) => r.op),
      range.ops,
    );
    assert.ok(recorded.every((r) => r.billing?.kind === "charged"));
    assert.equal(counted.length, 12);
    // Each tank got back all but 1,000,000 wei of each of its six reservations.
    for (const [k, { p }] of projects.entries()) {
      const [s] = await t.db.query<{ max: string }>(
        "SELECT max_gas_cost::text AS max FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
        [authIds[k]!],
      );
      assert.equal(await balanceOf(p.projectId), before[k]! + 6n * (BigInt(s!.max) - 1_000_000n));
    }
    // Read again: nothing is recorded or counted twice.
    const again = await w.apply(range);
    assert.ok(again.every((r) => r.billing === null));
    assert.equal(counted.length, 12);
  });

  it("one that fails fails the range; those recorded meanwhile are counted once, and found recorded when it is read again", async () => {
    const { p } = await authorized();
    const block = 70_101n;
    const range = paidBlock(await authorizations([p], 8), block, await reorgEpoch(t.db, 14601, "settlement"));
    // The last one claims its block had another hash: remembering it fails (a range that is not one chain).
    const bad = { ...range.ops[7]!, blockHash: `0x${"ee".repeat(32)}` as `0x${string}` };
    const counted: bigint[] = [];
    const w = watcherFor(counted);
    await assert.rejects(w.apply({ ...range, ops: [...range.ops.slice(0, 7), bad] }), StaleRangeError);
    const recordedCount = async () => {
      const [row] = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM chain_operations WHERE block_number = $1",
        [block.toString()],
      );
      return row!.n;
    };
    const first = await recordedCount();
    assert.ok(first >= 1 && first <= 7, `recorded before the failure: ${first}`);
    assert.equal(counted.length, first, "each recorded operation counted as it was recorded");
    const recorded = await w.apply(range);
    assert.equal(recorded.filter((r) => r.billing !== null).length, 8 - first);
    assert.equal(counted.length, 8);
    assert.equal(await recordedCount(), 8);
  });
});
