import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { maintenance } from "../src/retention/maintenance.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { emitBalanceLow } from "./support/events.ts";
import { addWebhookEndpoint } from "./support/receiver.ts";

/**
 * The embedded store has no autovacuum (PGlite runs PostgreSQL in single-user mode), so the upkeep
 * pass vacuums and analyses its churned tables by autovacuum's own rules
 * (src/retention/embedded-vacuum.ts). With PostgreSQL, autovacuum does that and the pass leaves
 * it alone. The churn here is the webhook claim's: every delivered delivery leaves a dead entry at
 * the front of the due order until a vacuum, and the claim reads past all of them.
 */

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(async () => {
  await t.close();
});

function job() {
  return maintenance(t.db, {
    intervalMs: 0,
    batchSize: 1000,
    checkpointEvery: 1_000_000,
    webhookRetentionDays: 30,
    now: Date.now,
  });
}

/** `n` balance.low events of the project, delivered: what the worker's records leave behind. */
async function deliverEvents(projectId: string, n: number) {
  await emitBalanceLow(t.db, projectId, n);
  await t.db.query(
    "UPDATE webhook_deliveries SET status = 'succeeded', completed_at = now() WHERE status = 'pending'",
  );
}

/** Index pages (shared buffers) the claim's window reads to find the due deliveries. */
async function windowPagesRead(): Promise<number> {
  return t.db.transaction(async (tx) => {
    // The settings webhook_claim_window runs under (db/functions/webhook_claim_window.sql).
    for (const s of ["enable_bitmapscan", "enable_seqscan", "enable_sort"])
      await tx.query(`SET LOCAL ${s} = off`);
    const plan = await tx.query<{ "QUERY PLAN": string }>(
      `EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF)
       SELECT d.id FROM webhook_deliveries d
       WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND (d.leased_until IS NULL OR d.leased_until <= now())
       ORDER BY d.next_attempt_at, d.id LIMIT 128`,
    );
    const buffers = plan.map((r) => r["QUERY PLAN"]).find((line) => /Buffers: shared/.test(line)) ?? "";
    return Number(/hit=(\d+)/.exec(buffers)?.[1] ?? 0) + Number(/read=(\d+)/.exec(buffers)?.[1] ?? 0);
  });
}

async function tableStats(table: string) {
  // The connection's own counts are flushed to the view at most once a second.
  await t.db.query("SELECT pg_stat_force_next_flush()");
  const [row] = await t.db.query<{ dead: number; vacuums: number; analyzed: boolean }>(
    `SELECT n_dead_tup::int AS dead, vacuum_count::int AS vacuums, last_analyze IS NOT NULL AS analyzed
     FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = $1`,
    [table],
  );
  return row!;
}

describe("the upkeep pass on a store without autovacuum", () => {
  it("vacuums and analyses webhook_deliveries once its dead rows pass autovacuum's rule, which ends the claim's read past delivered rows", async () => {
    const tag = randomBytes(3).toString("hex");
    const p = await seedProject(t, { slug: `vac-${tag}`, email: `vac-${tag}@example.com` });
    await addWebhookEndpoint(t, p, "https://hooks.example.com/vacuum", ["balance.low"]);
    // Vacuumed first, whatever other tests of this process left: the churn below is this test's.
    await job().pass();
    for (let i = 0; i < 5; i++) await deliverEvents(p.projectId, 2000);
    // Five waiting, due now: what the next claim's window looks for.
    await emitBalanceLow(t.db, p.projectId, 5);
    const before = await tableStats("webhook_deliveries");
    const pagesBefore = await windowPagesRead();

    const pass = await job().pass();

    if (t.db.kind === "postgres") {
      // PostgreSQL's autovacuum owns this; the pass never runs VACUUM there.
      assert.deepEqual(pass.vacuumed, []);
      return;
    }
    assert.ok(before.dead >= 10_000, `${before.dead} dead rows counted before`);
    const deliveries = pass.vacuumed.find((v) => v.table === "webhook_deliveries");
    assert.ok(deliveries, JSON.stringify(pass.vacuumed));
    assert.equal(deliveries.kind, "vacuum");
    assert.ok(deliveries.deadRows >= 10_000);
    const afterStats = await tableStats("webhook_deliveries");
    assert.equal(afterStats.dead, 0);
    assert.equal(afterStats.vacuums, before.vacuums + 1);
    assert.equal(afterStats.analyzed, true);
    // The window read past 10,000 dead entries before the vacuum, and reads a page or two after.
    const pagesAfter = await windowPagesRead();
    assert.ok(
      pagesAfter * 5 < pagesBefore,
      `the claim's window read ${pagesBefore} pages before the vacuum and ${pagesAfter} after`,
    );
    // Nothing churned since: the next pass leaves the table alone.
    assert.equal(
      (await job().pass()).vacuumed.find((v) => v.table === "webhook_deliveries"),
      undefined,
    );
    await t.db.query(
      "UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE status = 'pending'",
    );
  });

  it("leaves a table whose changes stay under the rule, and analyses one that only grew", async () => {
    await job().pass();
    const tag = randomBytes(3).toString("hex");
    const p = await seedProject(t, { slug: `grow-${tag}`, email: `grow-${tag}@example.com` });
    await addWebhookEndpoint(t, p, "https://hooks.example.com/grow", ["balance.low"]);
    // Rows added, none updated or deleted: outbox and deliveries grow, nothing is dead.
    await emitBalanceLow(t.db, p.projectId, 3000);
    const pass = await job().pass();
    if (t.db.kind === "postgres") {
      // Autovacuum's job there: the pass analyses nothing either.
      assert.deepEqual(pass.vacuumed, []);
      await t.db.query(
        "UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE status = 'pending'",
      );
      return;
    }
    const outbox = pass.vacuumed.find((v) => v.table === "event_outbox");
    assert.deepEqual(outbox && { kind: outbox.kind, deadRows: outbox.deadRows }, {
      kind: "analyze",
      deadRows: 0,
    });
    assert.equal(
      pass.vacuumed.find((v) => v.table === "api_keys"),
      undefined,
      "api_keys did not change",
    );
    await t.db.query(
      "UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE status = 'pending'",
    );
  });
});
