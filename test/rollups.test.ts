import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { daily, overview, topSenders } from "../src/analytics/store.ts";
import type { Queryable } from "../src/db/db.ts";
import {
  billOperation,
  creditDeposit,
  type Reservation,
  release,
  reserve,
  reverseBilling,
} from "../src/ledger/ledger.ts";
import { forgetExpiredReplays } from "../src/retention/replays.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const TARGETS = ["0x5fbdb2315678afecb367f032d93f642f64180aa3", "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512"];
const SENDERS = [
  "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
  "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
];
const SELECTOR = "0xa0712d68";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
const DAY_MS = 86_400_000;
/** Histories run on two chains at once (the rollups are per chain, migration 039). */
const CHAINS = [14601, 31337];

function reservation(
  projectId: string,
  o: { cost: bigint; sender: number; target: number; daysAgo: number; nonce: number | null; chain?: number },
): Reservation {
  return {
    projectId,
    clientNonce: o.nonce === null ? null : `n-${o.nonce}`,
    requestDigest: o.nonce === null ? null : `d-${o.nonce}`,
    authId: `0x${randomBytes(32).toString("hex")}`,
    apiKeyId: null,
    chainId: CHAINS[o.chain ?? 0]!,
    sender: SENDERS[o.sender]!,
    target: TARGETS[o.target]!,
    selector: SELECTOR,
    estimatedGas: 100_000n,
    maxGasCostWei: o.cost,
    maxFeePerGasWei: 2_000_000_000n,
    maxPriorityFeePerGasWei: 1_000_000_000n,
    paymaster: PAYMASTER,
    validAfterSec: 1_800_000_000,
    validUntilSec: 1_800_000_300,
    response: o.nonce === null ? null : `{"replay":${o.nonce}}`,
    requestedAtMs: Date.now() - o.daysAgo * DAY_MS,
  };
}

/** The rollups as stored, without rows that add nothing. */
async function stored(db: Queryable, projectId: string) {
  const [totals, days, targets, senders, senderDays, open] = await Promise.all([
    db.query(
      `SELECT chain_id, pending::int, success::int, reverted::int, expired::int, gas_used::text, cost_wei::text
       FROM rollup_project_totals WHERE project_id = $1
         AND (pending, success, reverted, expired, gas_used, cost_wei) <> (0, 0, 0, 0, 0, 0)
       ORDER BY chain_id`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, day::text, authorized::int, success::int, reverted::int, expired::int, gas_used::text, cost_wei::text,
         active_senders::int, latest_senders::int
       FROM rollup_project_days WHERE project_id = $1
         AND (authorized, success, reverted, expired, gas_used, cost_wei, active_senders, latest_senders)
           <> (0, 0, 0, 0, 0, 0, 0, 0)
       ORDER BY chain_id, day`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, target, calls::int, gas_used::text FROM rollup_project_targets
       WHERE project_id = $1 AND (calls <> 0 OR gas_used <> 0) ORDER BY chain_id, target`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, sender, last_settled_at, operations::int, cost_wei::text FROM rollup_project_senders
       WHERE project_id = $1 ORDER BY chain_id, sender`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, day::text, '0x' || encode(sender, 'hex') AS sender, operations::int FROM rollup_project_sender_days
       WHERE project_id = $1 AND operations <> 0 ORDER BY chain_id, day, sender`,
      [projectId],
    ),
    // The open reservations' running sums (migration 054) that the deposit probe reads.
    db.query(
      `SELECT chain_id, paymaster, reserved_wei::text FROM open_reservations
       WHERE project_id = $1 AND reserved_wei <> 0 ORDER BY chain_id, paymaster`,
      [projectId],
    ),
  ]);
  return { totals, days, targets, senders, senderDays, open };
}

const SETTLED = "status IN ('success', 'reverted')";

/** The same figures recomputed from every sponsorship of the project. */
async function recomputed(db: Queryable, projectId: string) {
  const [totals, days, targets, senders, senderDays, open] = await Promise.all([
    db.query(
      `SELECT chain_id, count(*) FILTER (WHERE status = 'pending')::int AS pending,
         count(*) FILTER (WHERE status = 'success')::int AS success,
         count(*) FILTER (WHERE status = 'reverted')::int AS reverted,
         count(*) FILTER (WHERE status = 'expired')::int AS expired,
         COALESCE(sum(actual_gas) FILTER (WHERE ${SETTLED}), 0)::text AS gas_used,
         COALESCE(sum(actual_gas_cost) FILTER (WHERE ${SETTLED}), 0)::text AS cost_wei
       FROM sponsorships WHERE project_id = $1 GROUP BY chain_id ORDER BY chain_id`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, day::text, sum(a)::int AS authorized, sum(s)::int AS success, sum(r)::int AS reverted,
         sum(e)::int AS expired, sum(g)::text AS gas_used, sum(c)::text AS cost_wei,
         count(DISTINCT sender) FILTER (WHERE s + r > 0)::int AS active_senders, sum(l)::int AS latest_senders
       FROM (
         SELECT chain_id, (created_at AT TIME ZONE 'UTC')::date AS day, 1 AS a, 0 AS s, 0 AS r, 0 AS e,
           0::numeric AS g, 0::numeric AS c, NULL AS sender, 0 AS l
         FROM sponsorships WHERE project_id = $1
         UNION ALL
         SELECT chain_id, (settled_at AT TIME ZONE 'UTC')::date, 0, (status = 'success')::int, (status = 'reverted')::int,
           (status = 'expired')::int,
           CASE WHEN ${SETTLED} THEN actual_gas ELSE 0 END, CASE WHEN ${SETTLED} THEN actual_gas_cost ELSE 0 END,
           sender, 0
         FROM sponsorships WHERE project_id = $1 AND status <> 'pending'
         UNION ALL
         SELECT chain_id, (max(settled_at) AT TIME ZONE 'UTC')::date, 0, 0, 0, 0, 0, 0, NULL, 1
         FROM sponsorships WHERE project_id = $1 AND ${SETTLED} GROUP BY chain_id, sender) x
       GROUP BY chain_id, day ORDER BY chain_id, day`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, target, count(*)::int AS calls, sum(actual_gas)::text AS gas_used FROM sponsorships
       WHERE project_id = $1 AND ${SETTLED} GROUP BY chain_id, target ORDER BY chain_id, target`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, sender, max(settled_at) AS last_settled_at, count(*)::int AS operations,
         sum(actual_gas_cost)::text AS cost_wei FROM sponsorships
       WHERE project_id = $1 AND ${SETTLED} GROUP BY chain_id, sender ORDER BY chain_id, sender`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, (settled_at AT TIME ZONE 'UTC')::date::text AS day, sender, count(*)::int AS operations
       FROM sponsorships WHERE project_id = $1 AND ${SETTLED} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
      [projectId],
    ),
    db.query(
      `SELECT chain_id, coalesce(paymaster, '') AS paymaster, sum(max_gas_cost)::text AS reserved_wei
       FROM sponsorships WHERE project_id = $1 AND status = 'pending'
       GROUP BY 1, 2 HAVING sum(max_gas_cost) <> 0 ORDER BY 1, 2`,
      [projectId],
    ),
  ]);
  return { totals, days, targets, senders, senderDays, open };
}

/** The overview as it was computed before the rollups (a scan of the project's sponsorships). */
async function overviewFromScratch(db: Queryable, projectId: string, nowMs: number, chainId = 14601) {
  const dayStart = new Date(nowMs);
  dayStart.setUTCHours(0, 0, 0, 0);
  const [totals] = await db.query<{ n: number; saved: string }>(
    `SELECT count(*)::int AS n, COALESCE(sum(actual_gas_cost), 0)::text AS saved
     FROM sponsorships WHERE project_id = $1 AND chain_id = $2 AND ${SETTLED}`,
    [projectId, chainId],
  );
  const [active] = await db.query<{ n: number }>(
    `SELECT count(DISTINCT sender)::int AS n FROM sponsorships
     WHERE project_id = $1 AND chain_id = $3 AND ${SETTLED} AND settled_at >= $2`,
    [projectId, new Date(nowMs - 30 * DAY_MS), chainId],
  );
  const [today] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1 AND chain_id = $3 AND ${SETTLED} AND settled_at >= $2`,
    [projectId, dayStart, chainId],
  );
  const top = await db.query<{ address: string; calls: number; gasUsed: string }>(
    `SELECT target AS address, count(*)::int AS calls, COALESCE(sum(actual_gas), 0)::text AS "gasUsed"
     FROM sponsorships WHERE project_id = $1 AND chain_id = $2 AND ${SETTLED}
     GROUP BY target ORDER BY calls DESC, target LIMIT 10`,
    [projectId, chainId],
  );
  return {
    totalSponsored: totals!.n,
    totalGasSaved: totals!.saved,
    activeUsers: active!.n,
    today: today!.n,
    top,
  };
}

/** The per-day figures and the top senders recomputed from the project's sponsorships. */
async function dailyFromScratch(db: Queryable, projectId: string, from: string, to: string, chainId = 14601) {
  const rows = await db.query<{
    day: string;
    authorized: number;
    sponsored: number;
    expired: number;
    cost: string;
    senders: number;
  }>(
    `SELECT g.day::date::text AS day,
       (SELECT count(*)::int FROM sponsorships WHERE project_id = $1 AND chain_id = $4
         AND (created_at AT TIME ZONE 'UTC')::date = g.day::date) AS authorized,
       (SELECT count(*)::int FROM sponsorships WHERE project_id = $1 AND chain_id = $4 AND ${SETTLED}
         AND (settled_at AT TIME ZONE 'UTC')::date = g.day::date) AS sponsored,
       (SELECT count(*)::int FROM sponsorships WHERE project_id = $1 AND chain_id = $4 AND status = 'expired'
         AND (settled_at AT TIME ZONE 'UTC')::date = g.day::date) AS expired,
       (SELECT COALESCE(sum(actual_gas_cost), 0)::text FROM sponsorships WHERE project_id = $1 AND chain_id = $4 AND ${SETTLED}
         AND (settled_at AT TIME ZONE 'UTC')::date = g.day::date) AS cost,
       (SELECT count(DISTINCT sender)::int FROM sponsorships WHERE project_id = $1 AND chain_id = $4 AND ${SETTLED}
         AND (settled_at AT TIME ZONE 'UTC')::date = g.day::date) AS senders
     FROM generate_series($2::date, $3::date, interval '1 day') g(day) ORDER BY 1`,
    [projectId, from, to, chainId],
  );
  return rows;
}

async function topSendersFromScratch(db: Queryable, projectId: string, chainId = 14601) {
  return db.query<{ sender: string; operations: number; costWei: string; pending: number }>(
    `SELECT sender, count(*) FILTER (WHERE ${SETTLED})::int AS operations,
       COALESCE(sum(actual_gas_cost) FILTER (WHERE ${SETTLED}), 0)::text AS "costWei",
       count(*) FILTER (WHERE status = 'pending')::int AS pending
     FROM sponsorships WHERE project_id = $1 AND chain_id = $2 GROUP BY sender
     HAVING count(*) FILTER (WHERE ${SETTLED}) > 0
     ORDER BY 2 DESC, sum(actual_gas_cost) FILTER (WHERE ${SETTLED}) DESC, sender`,
    [projectId, chainId],
  );
}

type Op =
  | { kind: "deposit"; amount: bigint; chain: number }
  | {
      kind: "reserve";
      cost: bigint;
      sender: number;
      target: number;
      daysAgo: number;
      nonce: number | null;
      chain: number;
    }
  | { kind: "settle"; pick: number; fraction: number; reverted: boolean; gas: number }
  | { kind: "release"; pick: number }
  | { kind: "reverse"; pick: number }
  | { kind: "retention"; hoursAhead: number }
  | { kind: "backdate"; pick: number; days: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("deposit" as const),
    amount: fc.bigInt(1n, 10n ** 18n),
    chain: fc.integer({ min: 0, max: CHAINS.length - 1 }),
  }),
  fc.record({
    kind: fc.constant("reserve" as const),
    cost: fc.bigInt(0n, 10n ** 17n),
    sender: fc.integer({ min: 0, max: SENDERS.length - 1 }),
    target: fc.integer({ min: 0, max: TARGETS.length - 1 }),
    daysAgo: fc.integer({ min: 0, max: 40 }),
    // A small pool of nonces, so that repeats (replays, and reuse past 24 hours) happen.
    nonce: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
    chain: fc.integer({ min: 0, max: CHAINS.length - 1 }),
  }),
  fc.record({
    kind: fc.constant("settle" as const),
    pick: fc.nat(),
    fraction: fc.integer({ min: 0, max: 100 }),
    reverted: fc.boolean(),
    gas: fc.integer({ min: 0, max: 500_000 }),
  }),
  fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("reverse" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant("retention" as const), hoursAhead: fc.integer({ min: 0, max: 48 }) }),
  // Settlement dates itself now; this moves a settled or expired operation to an earlier day,
  // so that senders are active on several days and their latest day moves both ways.
  fc.record({
    kind: fc.constant("backdate" as const),
    pick: fc.nat(),
    days: fc.integer({ min: 1, max: 40 }),
  }),
);

async function apply(
  projectId: string,
  op: Op,
  authIds: { authId: string; cost: bigint; chainId: number }[],
) {
  const pick = (n: number) => authIds[n % authIds.length]!;
  switch (op.kind) {
    case "deposit":
      await creditDeposit(t.db, {
        projectId,
        chainId: CHAINS[op.chain]!,
        reference: `${projectId}:${randomBytes(4).toString("hex")}`,
        amountWei: op.amount,
      });
      return;
    case "reserve": {
      const r = reservation(projectId, op);
      if ((await reserve(t.db, r)).kind === "reserved")
        authIds.push({ authId: r.authId, cost: op.cost, chainId: r.chainId });
      return;
    }
    case "settle": {
      if (authIds.length === 0) return;
      const a = pick(op.pick);
      await t.db.transaction((tx) =>
        billOperation(tx, {
          authId: a.authId,
          chainId: a.chainId,
          paymaster: PAYMASTER,
          outcome: op.reverted ? "reverted" : "success",
          actualGasUsed: BigInt(op.gas),
          actualGasCostWei: (a.cost * BigInt(op.fraction)) / 100n,
          txHash: `0x${"1".repeat(64)}`,
          userOpHash: `0x${"2".repeat(64)}`,
        }),
      );
      return;
    }
    case "release":
      if (authIds.length > 0) await release(t.db, pick(op.pick).authId);
      return;
    case "reverse": {
      if (authIds.length === 0) return;
      const a = pick(op.pick);
      const [row] = await t.db.query<{ status: string; cost: string }>(
        "SELECT status, actual_gas_cost::text AS cost FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
        [a.authId],
      );
      if (row?.status !== "success" && row?.status !== "reverted") return;
      await t.db.transaction((tx) =>
        reverseBilling(tx, {
          authId: a.authId,
          projectId,
          chainId: a.chainId,
          billedWei: BigInt(row.cost),
          reference: `rev:${a.authId}:${randomBytes(3).toString("hex")}`,
        }),
      );
      return;
    }
    case "retention":
      await forgetExpiredReplays(t.db, Date.now() + op.hoursAhead * 3_600_000, 1000);
      return;
    case "backdate":
      if (authIds.length === 0) return;
      await t.db.query(
        `UPDATE sponsorships SET settled_at = settled_at - $2::int * interval '1 day'
         WHERE auth_id = decode(substr($1, 3), 'hex') AND settled_at IS NOT NULL`,
        [pick(op.pick).authId, op.days],
      );
      return;
  }
}

describe("analytics rollups", () => {
  it("equal a full recomputation, and the overview equals the scan it replaced, after random reserve/settle/release/reversal/deposit/replay/retention/backdating histories", async () => {
    const seeded = await seedProject(t);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30 }), async (ops) => {
        const projectId = `roll-${run++}-${randomBytes(3).toString("hex")}`;
        await t.db.query(
          "INSERT INTO projects (id, org_id, owner, name, deposit_address) SELECT $1, org_id, owner, 'rollups', $2 FROM projects WHERE id = $3",
          [projectId, `0x${randomBytes(20).toString("hex")}`, seeded.projectId],
        );
        for (const target of TARGETS) {
          await t.db.query(
            "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
            [projectId, target, SELECTOR],
          );
        }
        await creditDeposit(t.db, { projectId, reference: `${projectId}:seed`, amountWei: 10n ** 18n });
        const authIds: { authId: string; cost: bigint; chainId: number }[] = [];
        for (const op of ops) await apply(projectId, op, authIds);

        assert.deepEqual(await stored(t.db, projectId), await recomputed(t.db, projectId));
        const nowMs = Date.now();
        for (const chainId of CHAINS) {
          const fast = await overview(t.db, projectId, chainId, nowMs);
          const slow = await overviewFromScratch(t.db, projectId, nowMs, chainId);
          assert.deepEqual(
            {
              totalSponsored: fast.totalSponsored,
              totalGasSaved: fast.totalGasSaved,
              activeUsers: fast.activeUsers,
              today: fast.today.sponsored,
              top: fast.topContracts,
            },
            slow,
          );
          const from = new Date(nowMs - 41 * DAY_MS).toISOString().slice(0, 10);
          const to = new Date(nowMs).toISOString().slice(0, 10);
          assert.deepEqual(
            (await daily(t.db, projectId, chainId, from, to)).map((d) => ({
              day: d.day,
              authorized: d.authorized,
              sponsored: d.sponsored,
              expired: d.expired,
              cost: d.costWei,
              senders: d.activeSenders,
            })),
            await dailyFromScratch(t.db, projectId, from, to, chainId),
          );
          assert.deepEqual(
            await topSenders(t.db, projectId, chainId, "operations", 100),
            await topSendersFromScratch(t.db, projectId, chainId),
          );
        }
        // Every sponsorship's id lies within its day's bounds (migration 023), which the events'
        // time filters read as an id range.
        assert.deepEqual(
          await t.db.query(
            `SELECT s.id::text FROM sponsorships s
             LEFT JOIN rollup_project_days r ON r.project_id = s.project_id AND r.chain_id = s.chain_id
               AND r.day = (s.created_at AT TIME ZONE 'UTC')::date
             WHERE s.project_id = $1 AND (r.first_id IS NULL OR s.id NOT BETWEEN r.first_id AND r.last_id)`,
            [projectId],
          ),
          [],
        );
        // sponsorship_status_index (migration 021) holds exactly the sponsorships that are not a
        // success, with their columns as they are now.
        const copied = `project_id, chain_id, status, sender, paymaster, valid_after::text, valid_until::text,
          max_gas_cost::text`;
        assert.deepEqual(
          await t.db.query(
            `SELECT sponsorship_id::text AS sid, ${copied} FROM sponsorship_status_index
             WHERE project_id = $1 ORDER BY sponsorship_id`,
            [projectId],
          ),
          await t.db.query(
            `SELECT id::text AS sid, ${copied} FROM sponsorships WHERE project_id = $1 AND status <> 'success'
             ORDER BY id`,
            [projectId],
          ),
        );
      }),
      { numRuns: 20 },
    );
  });

  const SENDER_DAYS_BACKFILL =
    "SELECT project_id, chain_id, (settled_at AT TIME ZONE 'UTC')::date, sender, count(*)";

  it("are rebuilt by the migration's backfill exactly as the triggers kept them (an upgraded database)", async () => {
    const projects = (
      await t.db.query<{ id: string }>("SELECT DISTINCT project_id AS id FROM sponsorships ORDER BY 1")
    ).map((r) => r.id);
    assert.ok(projects.length > 0);
    const kept = await Promise.all(projects.map((id) => stored(t.db, id)));
    const backfill = ["039_rollups_per_chain.sql", "054_open_reservations.sql"]
      .map((file) => readFileSync(new URL(`../src/db/migrations/${file}`, import.meta.url), "utf8"))
      .map((sql) => sql.slice(sql.indexOf("-- BEGIN BACKFILL"), sql.indexOf("-- END BACKFILL")))
      .join(";\n")
      // An upgraded database ran that backfill, then migration 047 turned the per-day senders into
      // their bytes; replayed on today's schema, the backfill writes them as 047 left them.
      .replace(
        SENDER_DAYS_BACKFILL,
        SENDER_DAYS_BACKFILL.replace(", sender, ", ", decode(substr(sender, 3), 'hex'), "),
      );
    assert.ok(backfill.includes("decode(substr(sender, 3), 'hex'), count(*)"));
    await t.db.transaction(async (tx) => {
      for (const table of [
        "rollup_project_totals",
        "rollup_project_days",
        "rollup_project_targets",
        "rollup_project_senders",
        "rollup_project_sender_days",
        "open_reservations",
      ]) {
        await tx.query(`DELETE FROM ${table}`);
      }
      for (const statement of backfill
        .split(/;\s*\n/)
        .map((s) => s.replace(/^\s*--.*$/gm, "").trim())
        .filter(Boolean)) {
        await tx.query(statement);
      }
    });
    const rebuilt = await Promise.all(projects.map((id) => stored(t.db, id)));
    assert.deepEqual(rebuilt, kept);
    assert.deepEqual(rebuilt, await Promise.all(projects.map((id) => recomputed(t.db, id))));
  });

  it("count a sender active in the last 30 days to the microsecond, on either side of the day 30 days ago", async () => {
    const p = await seedProject(t);
    const nowMs = Date.UTC(2031, 5, 15, 12, 0, 0);
    const monthAgo = nowMs - 30 * DAY_MS;
    const settled: [string, number][] = [
      ["0x00000000000000000000000000000000000000a1", monthAgo + 1_000], // counted: the same day, after
      ["0x00000000000000000000000000000000000000b2", monthAgo - 1_000], // not: the same day, before
      ["0x00000000000000000000000000000000000000c3", Date.UTC(2031, 4, 17)], // counted: the next day's first instant
      ["0x00000000000000000000000000000000000000d4", nowMs - 40 * DAY_MS], // counted once, on its latest day
      ["0x00000000000000000000000000000000000000d4", nowMs - DAY_MS],
      ["0x00000000000000000000000000000000000000e5", nowMs - 31 * DAY_MS], // not: the day before
      ["0x00000000000000000000000000000000000000f6", monthAgo], // counted: exactly 30 days ago
    ];
    await t.db.query(
      `INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector, estimated_gas,
         max_gas_cost, valid_after, valid_until, status, actual_gas, actual_gas_cost, created_at, settled_at)
       SELECT decode(lpad('a' || to_hex(n), 64, '0'), 'hex'), $1, 14601, x.sender, $2, $3, 1000, 100, 1, 2, 'success', 10, 7,
         x.at, x.at
       FROM unnest($4::text[], $5::timestamptz[]) WITH ORDINALITY AS x(sender, at, n)`,
      [p.projectId, TARGETS[0], SELECTOR, settled.map((s) => s[0]), settled.map((s) => new Date(s[1]))],
    );
    assert.equal(new Date(monthAgo).toISOString(), "2031-05-16T12:00:00.000Z");
    const o = await overview(t.db, p.projectId, 14601, nowMs);
    assert.equal(o.activeUsers, 4);
    assert.equal(o.activeUsers, (await overviewFromScratch(t.db, p.projectId, nowMs)).activeUsers);
    assert.deepEqual(await stored(t.db, p.projectId), await recomputed(t.db, p.projectId));
  });

  it("serve the per-day figures over HTTP: 30 days by default, bounded ranges, clear 400s", async () => {
    const p = await seedProject(t);
    const get = (query: string) =>
      t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/daily${query}`,
        token: p.ownerToken,
      });
    const byDefault = await get("");
    assert.equal(byDefault.statusCode, 200);
    const days = byDefault.json().days as { day: string; sponsored: number; activeSenders: number }[];
    assert.equal(days.length, 30);
    assert.equal(days.at(-1)!.day, new Date().toISOString().slice(0, 10));
    assert.ok(days.every((d) => d.sponsored === 0 && d.activeSenders === 0));
    assert.equal((await get("?from=2025-01-01&to=2025-12-31")).json().days.length, 365);
    assert.equal((await get("?from=2024-03-01&to=2024-03-01")).json().days[0].day, "2024-03-01");
    for (const query of [
      "?from=2025-01-02&to=2025-01-01",
      "?from=2024-01-01&to=2025-01-01",
      "?from=2025-02-30",
      "?to=yesterday",
      "?from=2025-01-01T00:00:00Z",
      "?days=7",
    ]) {
      const res = await get(query);
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.headers["content-type"], "application/problem+json; charset=utf-8", query);
      assert.equal(res.json().code, "invalid_request", query);
    }
  });

  it("count a batch of rows written in one statement once (statement-level triggers see every row)", async () => {
    const p = await seedProject(t);
    await t.db.query(
      `INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector, estimated_gas,
         max_gas_cost, valid_after, valid_until, status, actual_gas, actual_gas_cost, settled_at)
       SELECT decode(lpad(to_hex(g), 64, '0'), 'hex'), $1, 14601, $2, $3, $4, 1000, 100, 1, 2,
         CASE WHEN g % 2 = 0 THEN 'success' ELSE 'pending' END, CASE WHEN g % 2 = 0 THEN 10 ELSE 0 END,
         CASE WHEN g % 2 = 0 THEN 7 ELSE 0 END, CASE WHEN g % 2 = 0 THEN now() END
       FROM generate_series(1, 50) g`,
      [p.projectId, SENDERS[0], TARGETS[0], SELECTOR],
    );
    await t.db.query(
      "UPDATE sponsorships SET status = 'expired', settled_at = now() WHERE project_id = $1 AND status = 'pending'",
      [p.projectId],
    );
    assert.deepEqual(await stored(t.db, p.projectId), await recomputed(t.db, p.projectId));
    const o = await overview(t.db, p.projectId, 14601, Date.now());
    assert.equal(o.totalSponsored, 25);
    assert.equal(o.totalGasSaved, "175");
    assert.deepEqual(o.topContracts, [{ address: TARGETS[0], calls: 25, gasUsed: "250" }]);
  });

  it("forget deleted sponsorships everywhere, the status index included (its trigger, not a foreign key)", async () => {
    const p = await seedProject(t);
    await t.db.query(
      `INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector, estimated_gas,
         max_gas_cost, valid_after, valid_until, status, actual_gas, actual_gas_cost, settled_at)
       SELECT decode(lpad('d' || to_hex(g), 64, '0'), 'hex'), $1, 14601, $2, $3, $4, 1000, 100, 1, 2,
         (ARRAY['pending', 'success', 'reverted', 'expired'])[g % 4 + 1], 0, 0, CASE WHEN g % 4 <> 0 THEN now() END
       FROM generate_series(1, 12) g`,
      [p.projectId, SENDERS[0], TARGETS[0], SELECTOR],
    );
    const indexed = async () =>
      (
        await t.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM sponsorship_status_index x
           WHERE x.project_id = $1 AND NOT EXISTS (SELECT 1 FROM sponsorships s WHERE s.id = x.sponsorship_id)`,
          [p.projectId],
        )
      )[0]!.n;
    const count = async () =>
      (
        await t.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM sponsorship_status_index WHERE project_id = $1",
          [p.projectId],
        )
      )[0]!.n;
    assert.equal(await count(), 9);
    await t.db.query(
      "DELETE FROM sponsorships WHERE project_id = $1 AND (encode(auth_id, 'hex') LIKE '%d1' OR encode(auth_id, 'hex') LIKE '%d4')",
      [p.projectId],
    );
    await t.db.query("DELETE FROM sponsorships WHERE project_id = $1 AND status IN ('reverted', 'expired')", [
      p.projectId,
    ]);
    assert.equal(await indexed(), 0, "no status row outlives its sponsorship");
    assert.equal(await count(), 2, "the pending rows that are left stay indexed");
    assert.deepEqual(await stored(t.db, p.projectId), await recomputed(t.db, p.projectId));
  });
});
