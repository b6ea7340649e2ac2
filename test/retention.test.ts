import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { maintenance } from "../src/retention/maintenance.ts";
import { forgetExpiredReplays, REPLAY_RETENTION_MS } from "../src/retention/replays.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

let clock = Date.parse("2026-11-20T12:00:00Z");
let t: TestApp;
before(async () => {
  t = await startTestApp({ now: () => clock });
});
after(() => t.close());

const TARGET = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const SELECTOR = "0xa0712d68";

async function fundedProject() {
  const p = await seedProject(t);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    reference: `ret:${p.projectId}`,
    amountWei: 10n ** 18n,
  });
  const res = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: TARGET, functionSelector: SELECTOR },
  });
  assert.equal(res.statusCode, 201);
  return p;
}

function authorize(p: { projectId: string; apiKey: string }, clientNonce: string) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      target: TARGET,
      selector: SELECTOR,
      estimatedGas: 50_000,
      chainId: 14601,
      clientNonce,
    },
  });
}

/** The replays kept for the project (migration 020's table), oldest first. */
async function kept(projectId: string) {
  return t.db.query<{ nonce: string; digest: string | null; response: string | null }>(
    `SELECT client_nonce AS nonce, request_digest AS digest, response FROM sponsorship_replays
     WHERE project_id = $1 ORDER BY created_at, client_nonce`,
    [projectId],
  );
}

/** Each sponsorship's row version (xmin): it changes whenever the row is written. */
async function versions(projectId: string) {
  return t.db.query<{ auth_id: string; v: string }>(
    "SELECT '0x' || encode(auth_id, 'hex') AS auth_id, xmin::text AS v FROM sponsorships WHERE project_id = $1 ORDER BY id",
    [projectId],
  );
}

describe("replay retention", () => {
  it("forgets the stored response, digest and nonce once 24 hours are over, and only then", async () => {
    const p = await fundedProject();
    const first = await authorize(p, "order-1");
    assert.equal(first.statusCode, 200);
    clock += 2 * 3_600_000;
    const recent = await authorize(p, "order-2");
    assert.equal(recent.statusCode, 200);
    // Within 24 hours the nonce replays byte for byte.
    assert.equal((await authorize(p, "order-1")).body, first.body);

    clock += REPLAY_RETENTION_MS - 3_600_000; // order-1 is 23 h + 1 h old, order-2 23 h.
    const before = await versions(p.projectId);
    assert.equal(await forgetExpiredReplays(t.db, clock, 1000), 1);
    const [young, ...rest] = await kept(p.projectId);
    assert.deepEqual(rest, []);
    assert.equal(young!.nonce, "order-2");
    assert.ok(young!.response && young!.digest);
    // Forgetting writes no sponsorship: the rows keep their versions, so the job leaves no dead
    // row behind in sponsorships and no new entry in its indexes.
    assert.deepEqual(await versions(p.projectId), before);

    // Past 24 hours the nonce is a new request, as it was before retention existed.
    const again = await authorize(p, "order-1");
    assert.equal(again.statusCode, 200);
    assert.notEqual(again.body, first.body);
    assert.deepEqual(
      (await kept(p.projectId)).map((r) => r.nonce),
      ["order-2", "order-1"],
    );
    assert.equal((await versions(p.projectId)).length, 3);
    // The figures are untouched by forgetting (the rollups ignore these columns).
    const events = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/events`,
      token: p.ownerToken,
    });
    assert.equal(events.json().total, 3);
  });

  it("works in bounded batches that instances can share, until nothing is left", async () => {
    const p = await fundedProject();
    for (let i = 0; i < 7; i++) assert.equal((await authorize(p, `batch-${i}`)).statusCode, 200);
    clock += REPLAY_RETENTION_MS + 1000;
    const job = maintenance(t.db, {
      intervalMs: 0,
      batchSize: 3,
      checkpointEvery: 1_000_000,
      webhookRetentionDays: 30,
      now: () => clock,
    });
    // Two passes side by side (two instances): SKIP LOCKED shares the rows, none is cleared twice.
    const [a, b] = await Promise.all([job.pass(), job.pass()]);
    assert.ok(a.forgotten + b.forgotten >= 7);
    assert.deepEqual(await kept(p.projectId), []);
    assert.equal((await job.pass()).forgotten, 0);
  });
});

describe("per-sender day counts", () => {
  it("go once their day is final (the chain operations' retention and a day more), and the day's actives stay", async () => {
    const p = await seedProject(t);
    const dayOf = (daysAgo: number) => new Date(clock - daysAgo * 86_400_000).toISOString().slice(0, 10);
    const sender = (i: number) => i.toString(16).padStart(40, "0");
    // Four days back to twenty, two senders each, with the day rows they were counted into.
    for (const daysAgo of [20, 9, 8, 1]) {
      for (const i of [1, 2]) {
        await t.db.query(
          `INSERT INTO rollup_project_sender_days (project_id, chain_id, day, sender, operations)
           VALUES ($1, 14601, $2::date, decode($3, 'hex'), 1)`,
          [p.projectId, dayOf(daysAgo), sender(i)],
        );
      }
      await t.db.query(
        `INSERT INTO rollup_project_days (project_id, chain_id, day, active_senders) VALUES ($1, 14601, $2::date, 2)`,
        [p.projectId, dayOf(daysAgo)],
      );
    }
    const job = maintenance(t.db, {
      intervalMs: 0,
      batchSize: 1,
      checkpointEvery: 1_000_000,
      webhookRetentionDays: 30,
      chainOperationRetentionDays: 7,
      now: () => clock,
    });
    // Seven days of paid operations, a day more: the days 9 and 20 back are final, 8 is not.
    const pass = await job.pass();
    assert.ok(pass.senderDaysForgotten >= 4, JSON.stringify(pass));
    const days = await t.db.query<{ day: string; n: number }>(
      `SELECT day::text, count(*)::int AS n FROM rollup_project_sender_days WHERE project_id = $1
       GROUP BY day ORDER BY day`,
      [p.projectId],
    );
    assert.deepEqual(days, [
      { day: dayOf(8), n: 2 },
      { day: dayOf(1), n: 2 },
    ]);
    const actives = await t.db.query<{ n: number }>(
      "SELECT active_senders::int AS n FROM rollup_project_days WHERE project_id = $1 ORDER BY day",
      [p.projectId],
    );
    assert.deepEqual(
      actives.map((r) => r.n),
      [2, 2, 2, 2],
      "the days' active senders are untouched",
    );
    assert.equal((await job.pass()).senderDaysForgotten, 0, "nothing more to forget");
  });
});
