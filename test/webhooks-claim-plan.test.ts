import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { claimStatement, recordAttempts } from "../src/webhooks/deliveries.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { deliveriesRead, emitBalanceLow, rolledBack } from "./support/events.ts";
import { addWebhookEndpoint } from "./support/receiver.ts";

/**
 * Issue 22: the claim and the record of attempts are functions of the database
 * (db/functions/webhook_claim.sql, webhook_record_attempts.sql), so PostgreSQL plans them once per
 * connection instead of at every call. A plan kept that way is the one made when it was made: these
 * tests make it while the deliveries table is empty and never analysed (a file of its own, so a
 * fresh store), then grow the table within the same transaction (the same connection, so the same
 * kept plan) and count what the next call reads. As statements named by the service, the kept
 * plans read the whole table (the claim's final update) or a partial index in full (the record).
 */

let t: TestApp;

before(async () => {
  t = await startTestApp();
});
after(async () => {
  await t.close();
});

async function project() {
  const tag = randomBytes(3).toString("hex");
  return seedProject(t, { slug: `plan-${tag}`, email: `plan-${tag}@example.com` });
}

describe("the claim's and the record's kept plans, made on an empty table", () => {
  it("a claim reads a bounded window of a large backlog with the plan it kept from an empty table", async () => {
    const [busy, other] = [await project(), await project()];
    const busyEndpoint = await addWebhookEndpoint(t, busy, "https://hooks.example.com/busy", ["balance.low"]);
    await addWebhookEndpoint(t, other, "https://hooks.example.com/other", ["balance.low"]);
    const caps = { perEndpoint: 2, perProject: 4 };
    const idle = { byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
    const atCap = { byEndpoint: new Map([[busyEndpoint.id, 2]]), byProject: new Map([[busy.projectId, 2]]) };
    const { read, claimed } = await rolledBack(t.db, async (tx) => {
      // More calls than the five after which PostgreSQL may keep one generic plan.
      for (let i = 0; i < 10; i++) {
        const warm = claimStatement(16, 60_000, caps, i % 2 === 0 ? idle : atCap);
        await tx.query(warm.text, warm.values);
      }
      await emitBalanceLow(tx, busy.projectId, 3_000);
      await emitBalanceLow(tx, other.projectId, 1);
      const claim = claimStatement(16, 60_000, caps, atCap);
      const before = await deliveriesRead(tx);
      const rows = await tx.query<{ project_id: string }>(claim.text, claim.values);
      return { read: (await deliveriesRead(tx)) - before, claimed: rows.map((r) => r.project_id) };
    });
    assert.deepEqual(claimed, [other.projectId]);
    assert.ok(read < 16 * 8 + 50, `the claim read ${read} rows of webhook_deliveries with 3,000 waiting`);
  });

  it("a record finds its rows by primary key with the plan it kept from an empty table", async () => {
    const p = await project();
    await addWebhookEndpoint(t, p, "https://hooks.example.com/recorded", ["balance.low"]);
    const caps = { perEndpoint: 16, perProject: 16 };
    const idle = { byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
    const result = {
      startedAt: new Date(),
      latencyMs: 3,
      statusCode: 200,
      error: null,
      next: { kind: "succeeded" as const },
    };
    const { read, moved } = await rolledBack(t.db, async (tx) => {
      // Ten records of one attempt each, while the table holds ten rows.
      await emitBalanceLow(tx, p.projectId, 10);
      const first = claimStatement(10, 60_000, caps, idle);
      for (const c of await tx.query<{ id: number; attempts: number; claim_seq: number }>(
        first.text,
        first.values,
      )) {
        await recordAttempts(tx, [
          { delivery: { id: c.id, attempt: c.attempts, claim: c.claim_seq }, result },
        ]);
      }
      await emitBalanceLow(tx, p.projectId, 3_000);
      const claim = claimStatement(4, 60_000, caps, idle);
      const claimed = await tx.query<{ id: number; attempts: number; claim_seq: number }>(
        claim.text,
        claim.values,
      );
      assert.equal(claimed.length, 4);
      const items = claimed.map((c) => ({
        delivery: { id: c.id, attempt: c.attempts, claim: c.claim_seq },
        result,
      }));
      const before = await deliveriesRead(tx);
      const moved = await recordAttempts(tx, items);
      return { read: (await deliveriesRead(tx)) - before, moved };
    });
    assert.deepEqual(moved, [true, true, true, true]);
    assert.ok(
      read <= 4 * 4,
      `the record of 4 attempts read ${read} rows of webhook_deliveries with 3,000 pending`,
    );
  });
});
