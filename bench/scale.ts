import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey } from "viem/accounts";
import { encodeCursor } from "../src/analytics/store.ts";
import { projectKey } from "../src/db/bytes.ts";
import type { Db } from "../src/db/db.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { type ErrorCode, statusOf } from "../src/http/catalogue.ts";
import { localIssuer } from "../src/identity/tokens.ts";
import { writeCheckpoints } from "../src/ledger/checkpoints.ts";
import { creditDeposit, type Reservation, reserveMany } from "../src/ledger/ledger.ts";
import { type RefusalRecorder, refusalRecorder } from "../src/refusals/recorder.ts";
import { foldOldChainOperations } from "../src/retention/chain-operations.ts";
import { forgetOldRefusals } from "../src/retention/refusals.ts";
import { forgetExpiredReplays } from "../src/retention/replays.ts";
import { forgetOldSenderDays } from "../src/retention/sender-days.ts";
import { startChain } from "../test/support/chain/anvil.ts";
import { startPgCluster } from "../test/support/pg-cluster.ts";
import { benchDatabase } from "./database.ts";
import { type Child, REPO_ROOT, startChild } from "./processes.ts";

/**
 * `npm run bench:scale`: the reads of a project with a long history, over real HTTP against the
 * compiled service on PostgreSQL, and the bytes each operation costs, in the state production
 * leaves the tables in.
 *
 * It starts a PostgreSQL server of its own (initdb into a temporary directory, another port) with
 * autovacuum on, as a production server runs it (the machine's shared server has it off), unless
 * SCALE_DATABASE_URL names a database to use. The service migrates it; one project is then seeded
 * with SCALE_OPS operations (default 10 million) through the production lifecycle (see seed():
 * reserve → settle → the replay forgotten after 24 hours, in statements of production's sizes).
 * Nothing vacuums or analyzes by hand: autovacuum alone has run when the reads are timed and the
 * sizes taken. It times the overview, events (first page, a deep offset, a cursor deep in the
 * history, a sender filter, one day 60 days back, from yesterday on), the per-day figures, the top
 * senders, parity and the multi-project parity report, the refusal log (its latest page, a code
 * filter, one day back in its retention, the counts per day and code over 90 days), and prints a table with the sizes, the
 * bytes per operation, the updates that stayed HOT and the dead rows autovacuum had not yet
 * reclaimed. A benchmark: it measures and asserts nothing.
 *
 * Refusals are seeded beside the operations, one for every REFUSAL_EVERY operations, through the
 * service's refusal recorder (counts exact, details sampled at REFUSAL_DETAIL_PER_MINUTE of
 * simulated time) and its retention (REFUSAL_RETENTION_DAYS of details).
 *
 * Knobs: SCALE_OPS (10,000,000), SCALE_BATCH (50 reservations per call, one block of settlements),
 * SCALE_RUNS (20 timed requests per read), SCALE_PROJECTS (20 more small projects in the parity
 * report), RETENTION_BATCH_SIZE (1,000, the service's default), SCALE_DATABASE_URL (a server to
 * create the run's database on instead of one of its own: its autovacuum settings are its own),
 * SCALE_KEEP=1 (with SCALE_DATABASE_URL: keep that database afterwards, to look at plans),
 * SCALE_FILLFACTOR=table:percent (try a fillfactor before seeding, before making it a migration),
 * SCALE_SETTLE (each: a transaction per settled operation, as the watcher; block: one per block),
 * SCALE_PROGRESS (1,000,000: a progress line with the bytes so far every so many operations),
 * SCALE_LANES (1: how many projects are seeded side by side, SCALE_OPS / SCALE_LANES operations
 * each, on a connection each; the reads are timed on the first lane's project). The seeding is one
 * PostgreSQL backend's work per lane. On this two-core machine (2026-11-29, 10 million asked, the
 * first two minutes): one lane seeded about 660 operations a second, two lanes about 1,090 together,
 * both backends at 94 % of a core each; 10 million would still take some 2.5 hours.
 */

const ops = Number(process.env.SCALE_OPS ?? 10_000_000);
const lanes = Number(process.env.SCALE_LANES ?? 1);
if (!Number.isInteger(lanes) || lanes < 1 || lanes > 8) throw new Error("SCALE_LANES is 1 to 8");
/** The operations of each lane's project. */
const laneOps = Math.floor(ops / lanes);
const batch = Number(process.env.SCALE_BATCH ?? 50);
const settleMode = process.env.SCALE_SETTLE ?? "each";
if (settleMode !== "each" && settleMode !== "block") throw new Error("SCALE_SETTLE is each or block");
const runs = Number(process.env.SCALE_RUNS ?? 20);
const extraProjects = Number(process.env.SCALE_PROJECTS ?? 20);
const SENDERS = 50_000;
const TARGETS = 8;
const HISTORY_DAYS = 90;
const SELECTOR = "0xa0712d68";
/** One refusal seeded for every this many operations (10 %), cycling through these codes. */
const REFUSAL_EVERY = 10;
const REFUSAL_CODES: ErrorCode[] = [
  "not_allowlisted",
  "sender_blocked",
  "insufficient_balance",
  "daily_cap_exceeded",
];
const REFUSAL_DETAIL_PER_MINUTE = 20;
const REFUSAL_RETENTION_DAYS = 14;
const CHAIN_OPERATION_RETENTION_DAYS = 7;
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
const MAX_COST = 300_000_000_000_000n;
// Operations after the checkpoint: the most a parity read meets before the next checkpoint.
const TAIL_OPS = Math.min(5_000, Math.max(1, Math.floor(laneOps / 10)));

async function main() {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString("hex")}`;
  const dataDir = mkdtempSync(join(tmpdir(), "gss-scale-"));
  const build = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], {
    cwd: REPO_ROOT,
    stdio: "inherit",
  });
  if (build.status !== 0) throw new Error("the build failed");
  const chain = await startChain();
  const given = process.env.SCALE_DATABASE_URL;
  const cluster = given ? null : await startPgCluster();
  const database = given ? await benchDatabase(given, runId) : await benchDatabase(cluster!.url, runId);
  let service: Child | null = null;
  let db: Db | null = null;
  try {
    console.log(
      `bench:scale ${runId}: ${(laneOps * lanes).toLocaleString("en")} operations${lanes > 1 ? ` in ${lanes} projects seeded side by side (${laneOps.toLocaleString("en")} each; the reads on the first)` : ""}, database ${database.created ?? "(given)"}${cluster ? ` on a server of its own (port ${cluster.port}, autovacuum ${await setting(database.url, "autovacuum")})` : ""}; settled ${settleMode === "each" ? "a transaction per operation" : "a transaction per block"}`,
    );
    service = await startChild({
      name: "service",
      entry: "dist/server.js",
      loader: "none",
      env: {
        ...(process.env as Record<string, string>),
        NODE_ENV: "development",
        DATA_DIR: dataDir,
        DATABASE_URL: database.url,
        SIGNER_PRIVATE_KEY: generatePrivateKey(),
        CHAIN_14601_PAYMASTER_ADDRESS: "0x00000000000000000000000000000000000000aa",
        CHAIN_14601_RPC_URL: chain.rpcUrl,
        LOG_LEVEL: "warn",
        // The bench writes the checkpoint itself, at a known point; the job would race it.
        MAINTENANCE_INTERVAL_MS: "0",
      },
      logPath: join(dataDir, "service.log"),
      readyPath: "/health",
    });
    // Seeding 10 million operations takes well over an hour: the token must outlive it (a run at
    // 10 million lost its reads to a one-hour token).
    const token = await (await localIssuer(dataDir)).issue(`scale-${runId}@example.com`, 86_400);
    const api = apiOf(service.baseUrl, token);
    const slug = `scale-${runId}`;
    const projectId = `scale-${runId}`;
    await api("POST", "/orgs", { name: slug, slug });
    const laneProjects = [
      projectId,
      ...Array.from({ length: lanes - 1 }, (_, k) => `${projectId}-lane-${k + 1}`),
    ];
    for (const id of [
      ...laneProjects,
      ...Array.from({ length: extraProjects }, (_, i) => `${projectId}-${i}`),
    ]) {
      await api("POST", "/projects", { id, name: id, owner: slug });
    }
    // The first checkpoint runs far longer than a request may.
    db = await openPostgres({ url: database.url, statementTimeoutMs: 3_600_000 });
    // A storage setting to try before it becomes a migration: "table:fillfactor", e.g. sponsorships:65.
    const fill = process.env.SCALE_FILLFACTOR?.match(/^([a-z_]+):(\d{2,3})$/);
    if (fill) await db.query(`ALTER TABLE ${fill[1]} SET (fillfactor = ${Number(fill[2])})`);
    await db.query(settleProcedure);
    await seed(db, laneProjects, runId);
    for (let i = 0; i < extraProjects; i++) {
      await creditDeposit(db, {
        projectId: `${projectId}-${i}`,
        reference: `scale:${runId}:${i}`,
        amountWei: 10n ** 18n,
      });
    }
    const sizes = await measureSizes(db);

    const midId = Number(
      (
        await db.query<{ id: string }>(
          "SELECT id FROM sponsorships WHERE project_id = $1 ORDER BY id LIMIT 1 OFFSET $2",
          [projectId, Math.floor(laneOps / 2)],
        )
      )[0]!.id,
    );
    const deepOffset = Math.min(1_000_000, Math.max(0, laneOps - 50));
    const reads: [string, string][] = [
      ["overview", `/projects/${projectId}/analytics/overview`],
      ["events, first page (50)", `/projects/${projectId}/analytics/events?limit=50`],
      [
        `events, offset ${deepOffset.toLocaleString("en")}`,
        `/projects/${projectId}/analytics/events?limit=50&offset=${deepOffset}`,
      ],
      [
        "events, cursor mid-history",
        `/projects/${projectId}/analytics/events?limit=50&cursor=${encodeCursor(midId)}`,
      ],
      ["events, sender filter", `/projects/${projectId}/analytics/events?limit=50&sender=${senderOf(7)}`],
      [
        "events, one day 60 days back",
        `/projects/${projectId}/analytics/events?limit=50&from=${dayOf(-60)}T00:00:00Z&to=${dayOf(-59)}T00:00:00Z`,
      ],
      [
        "events, from yesterday",
        `/projects/${projectId}/analytics/events?limit=50&from=${dayOf(-1)}T00:00:00Z`,
      ],
      ["daily figures, 90 days", `/projects/${projectId}/analytics/daily?from=${dayOf(-89)}&to=${dayOf(0)}`],
      ["top senders by operations", `/projects/${projectId}/analytics/senders?by=operations&limit=10`],
      ["top senders by cost", `/projects/${projectId}/analytics/senders?by=cost&limit=10`],
      ["parity, one project", `/projects/${projectId}/funds/parity`],
      [`parity report, ${extraProjects + lanes} projects`, "/projects/funds/parity-report"],
      ["refusals, latest page (50)", `/projects/${projectId}/refusals?limit=50`],
      ["refusals, code filter", `/projects/${projectId}/refusals?limit=50&code=sender_blocked`],
      [
        "refusals, one day 10 days back",
        `/projects/${projectId}/refusals?limit=50&from=${dayOf(-10)}T00:00:00Z&to=${dayOf(-9)}T00:00:00Z`,
      ],
      [
        "refusal counts, 90 days",
        `/projects/${projectId}/analytics/refusals?from=${dayOf(-89)}&to=${dayOf(0)}`,
      ],
    ];
    const rows: string[][] = [];
    for (const [name, path] of reads) rows.push([name, ...(await time(service.baseUrl, token, path))]);
    const inSync = (await api("GET", `/projects/${projectId}/funds/parity`)) as { inSync: boolean };
    printTable(rows, sizes, inSync.inSync);
  } finally {
    await db?.close();
    await service?.stop();
    await chain.stop();
    // A server of the bench's own goes with it; SCALE_KEEP keeps a database on a given server.
    if (process.env.SCALE_KEEP === "1" && !cluster) console.log(`kept database ${database.url}`);
    else await database.drop();
    await cluster?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The UTC day `offset` days from today, YYYY-MM-DD. */
function dayOf(offset: number): string {
  return new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
}

function senderOf(i: number): string {
  return `0x${(i % SENDERS).toString(16).padStart(40, "0")}`;
}

function targetOf(i: number): string {
  return `0x${((i % TARGETS) + 1).toString(16).padStart(40, "0")}`;
}

/**
 * The history, oldest first, spread evenly over HISTORY_DAYS up to now, written the way
 * production writes it, step by step in simulated time:
 * - reservations through `reserveMany` (the reservation function authorize's batcher calls), in
 *   batches of SCALE_BATCH with a client nonce, a request digest and the stored response each;
 * - each batch then settled 30 s later as one block: the rows `recordOperation` and `billOperation`
 *   write for each operation (its chain_operations row with its billing, the sponsorship marked
 *   settled, a `settle` entry, the balance and daily usage moved), each operation in a transaction
 *   of its own as the watcher does (settle; SCALE_SETTLE=block: the block in one transaction,
 *   one statement per table); 2 % of operations revert;
 * - every simulated 10 minutes (the maintenance interval is 1 minute; the batches it clears are
 *   the same rows), the retention jobs (batches of RETENTION_BATCH_SIZE) forget the replays older
 *   than 24 hours (`forgetExpiredReplays`) and fold the paid operations older than 7 days into
 *   their paymaster's totals (`foldOldChainOperations`), and forget the per-sender day counts of
 *   the days that are final (`forgetOldSenderDays`).
 * Autovacuum does what it does meanwhile; nothing vacuums by hand. Then the checkpoint, then a tail
 * of operations after it, the same way.
 */
async function seed(db: Db, laneProjects: string[], runId: string) {
  const started = Date.now();
  const nowMs = Date.now();
  const firstMs = nowMs - HISTORY_DAYS * 86_400_000;
  // The retention jobs are the service's, over every project: the first lane runs them.
  const clock = { retainedAtMs: firstMs };
  const checkpoint = checkpointBarrier(db, laneProjects);
  const [checkpointMs] = await Promise.all(
    laneProjects.map((projectId, lane) =>
      seedLane(db, projectId, runId, lane, firstMs, lane === 0 ? clock : null, checkpoint),
    ),
  );
  // The operations of the last 24 hours are settled but keep their replays, as they would.
  await retention(db, nowMs, clock);
  console.log(
    `\rseeded ${(laneOps * laneProjects.length).toLocaleString("en")} operations in ${((Date.now() - started) / 1000).toFixed(0)} s${laneProjects.length > 1 ? ` (${laneProjects.length} lanes at once; the phases are summed over them)` : ""}: reservations ${(phases.reserve / 1000).toFixed(0)} s, settlements ${(phases.settle / 1000).toFixed(0)} s, refusals ${(phases.refusals / 1000).toFixed(0)} s, retention ${(phases.retention / 1000).toFixed(0)} s (first checkpoint ${checkpointMs} ms)`,
  );
  return { nowMs };
}

/**
 * The lanes' first checkpoint: once every lane has seeded its history up to the tail, one
 * writeCheckpoints over all their projects (as the maintenance job writes those due), and every
 * lane then goes on with its tail. Each lane's call answers how long the checkpoint took, in ms.
 *
 * A lane used to checkpoint alone while the others still wrote. The checkpoint then summed a whole
 * history, millions of entries, under its SHARE lock on ledger_entries (the service's job
 * checkpoints every 10,000, so its lock was short), and a 5-million run in two lanes (2026-11-30)
 * lost 72 minutes of seeding at 4.9 million when one lane's checkpoint outlasted the other lane's
 * lock_timeout. The sums now run after the lock (ledger/checkpoints.ts), and the lanes still write
 * their first checkpoint together, as the maintenance job writes the projects that are due.
 */
function checkpointBarrier(db: Db, projects: string[]): () => Promise<number> {
  let arrived = 0;
  let settle!: { ok: (ms: number) => void; fail: (err: unknown) => void };
  const written = new Promise<number>((ok, fail) => {
    settle = { ok, fail };
  });
  return () => {
    arrived += 1;
    if (arrived === projects.length) {
      const started = Date.now();
      writeCheckpoints(db, projects).then(() => settle.ok(Date.now() - started), settle.fail);
    }
    return written;
  };
}

/**
 * One project's history (see seed); returns how long the first checkpoint took, in ms. `clock` is
 * the retention jobs' on the lane that runs them, null on the others; `checkpoint` waits for the
 * other lanes and the checkpoint (checkpointBarrier).
 */
async function seedLane(
  db: Db,
  projectId: string,
  runId: string,
  lane: number,
  firstMs: number,
  clock: { retainedAtMs: number } | null,
  checkpoint: () => Promise<number>,
): Promise<number> {
  await creditDeposit(db, { projectId, reference: `scale:${runId}:lane-${lane}`, amountWei: 10n ** 30n });
  for (let t = 0; t < TARGETS; t++) {
    await db.query(
      "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
      [projectId, targetOf(t), SELECTOR],
    );
  }
  const stepMs = (HISTORY_DAYS * 86_400_000) / laneOps;
  const refusals = refusalRecorder(db, {
    flushIntervalMs: 3_600_000,
    detailPerMinute: REFUSAL_DETAIL_PER_MINUTE,
  });
  const step = { projectId, runId: `${runId}:${lane}:`, clock, refusals };
  const main = laneOps - TAIL_OPS;
  const started = Date.now();
  let reported = 0;
  for (let from = 1; from <= main; from += batch) {
    const to = Math.min(main, from + batch - 1);
    await lifecycleStep(db, step, from, to, firstMs + from * stepMs);
    if (lane === 0 && process.stdout.isTTY && to - reported >= 10_000) {
      reported = to;
      process.stdout.write(`\rseeded ${(to * lanes).toLocaleString("en")} operations`);
    }
    if (
      lane === 0 &&
      Math.floor((to * lanes) / progressEvery) > Math.floor(((from - 1) * lanes) / progressEvery)
    )
      await progress(db, to * lanes, started);
  }
  const checkpointMs = await checkpoint();
  for (let from = main + 1; from <= laneOps; from += batch) {
    const to = Math.min(laneOps, from + batch - 1);
    await lifecycleStep(db, step, from, to, firstMs + from * stepMs);
  }
  await refusals.stop();
  return checkpointMs;
}

/**
 * A line for the record every SCALE_PROGRESS operations (over all lanes, counted on the first):
 * the time so far, the rate, and the bytes per operation of the figure's tables at that point, so
 * that a long run leaves its trail in the output even if it does not reach the end. The other
 * lanes run about level with the first; their rows are in the bytes, so the count is the first
 * lane's times the lanes.
 */
const progressEvery = Number(process.env.SCALE_PROGRESS ?? 1_000_000);

async function progress(db: Db, seeded: number, started: number) {
  const seconds = (Date.now() - started) / 1000;
  const bytes = await relationBytes(db);
  console.log(
    `\r${new Date().toISOString().slice(11, 19)} UTC: ${seeded.toLocaleString("en")} operations seeded in ${seconds.toFixed(0)} s (${(seeded / seconds).toFixed(0)} a second), ${(bytes / seeded).toFixed(0)} bytes per operation so far`,
  );
}

const RETENTION_EVERY_MS = 10 * 60_000;
const RETENTION_BATCH = Number(process.env.RETENTION_BATCH_SIZE ?? 1000);

async function retention(db: Db, atMs: number, clock: { retainedAtMs: number }) {
  if (atMs - clock.retainedAtMs < RETENTION_EVERY_MS) return;
  clock.retainedAtMs = atMs;
  while ((await forgetExpiredReplays(db, atMs, RETENTION_BATCH)) === RETENTION_BATCH) {}
  while ((await forgetOldRefusals(db, atMs, REFUSAL_RETENTION_DAYS, RETENTION_BATCH)) === RETENTION_BATCH) {}
  while (
    (await foldOldChainOperations(db, atMs, CHAIN_OPERATION_RETENTION_DAYS, RETENTION_BATCH)) ===
    RETENTION_BATCH
  ) {}
  while (
    (await forgetOldSenderDays(db, atMs, CHAIN_OPERATION_RETENTION_DAYS, RETENTION_BATCH)) === RETENTION_BATCH
  ) {}
}

async function lifecycleStep(
  db: Db,
  lane: {
    projectId: string;
    runId: string;
    /** The retention jobs' clock on the lane that runs them; null on the others. */
    clock: { retainedAtMs: number } | null;
    refusals: RefusalRecorder;
  },
  from: number,
  to: number,
  atMs: number,
) {
  const { projectId, runId, clock, refusals } = lane;
  const atSec = Math.floor(atMs / 1000);
  for (let g = from; g <= to; g++) {
    if (g % REFUSAL_EVERY !== 0) continue;
    const code = REFUSAL_CODES[(g / REFUSAL_EVERY) % REFUSAL_CODES.length]!;
    refusals.record({
      projectId,
      atMs,
      code,
      status: statusOf(code),
      rpcCode: null,
      route: "/sponsor/authorize",
      apiKeyId: null,
      sender: senderOf(g),
      target: targetOf(g + 1),
      selector: SELECTOR,
      chainId: 14601,
      estimatedGas: "150000",
      ruleId: null,
      requestId: `req-${g}`,
    });
  }
  const items: Reservation[] = [];
  for (let g = from; g <= to; g++) {
    const authId = `0x${hex32(`a${runId}${g}`)}`;
    items.push({
      projectId,
      clientNonce: `order-${g}`,
      requestDigest: hex32(`d${g}`),
      authId,
      apiKeyId: null,
      chainId: 14601,
      sender: senderOf(g),
      target: targetOf(g),
      selector: SELECTOR,
      estimatedGas: 150_000n,
      maxGasCostWei: MAX_COST,
      maxFeePerGasWei: 2_000_000_000n,
      maxPriorityFeePerGasWei: 1_000_000_000n,
      paymaster: PAYMASTER,
      validAfterSec: atSec - 60,
      validUntilSec: atSec + 300,
      response: JSON.stringify({
        authorized: true,
        paymasterAndData: `0x${hex32(`p${g}`).repeat(6)}`,
        signature: `0x${hex32(`s${g}`)}${hex32(`x${g}`)}1b`,
        validUntil: atSec + 300,
        validAfter: atSec - 60,
      }),
      requestedAtMs: atMs,
    });
  }
  let t0 = performance.now();
  const outcomes = await reserveMany(db, projectId, items);
  phases.reserve += performance.now() - t0;
  const refused = outcomes.find((o) => o.kind !== "reserved");
  if (refused) throw new Error(`a seeded reservation was refused: ${JSON.stringify(refused)}`);
  t0 = performance.now();
  await settle(db, projectId, from, to, atMs + 30_000);
  phases.settle += performance.now() - t0;
  t0 = performance.now();
  // The service flushes about once a second, a few batches of operations at production's pace.
  await refusals.flush();
  phases.refusals += performance.now() - t0;
  if (clock) {
    t0 = performance.now();
    await retention(db, atMs, clock);
    phases.retention += performance.now() - t0;
  }
}

/** Where the seeding's time went (ms), printed with its total. */
const phases = { reserve: 0, settle: 0, refusals: 0, retention: 0 };

/**
 * A block's settlements, with the same row writes as recordOperation and billOperation for each
 * operation: its chain_operations row with its billing, the sponsorship marked settled, a `settle`
 * entry and the balance through ledger_move, the daily usage given back.
 *
 * The settlement watcher records and bills each operation in a transaction of its own
 * (settlement/watcher.ts: applyEffects per operation), and so does the bench by default: the
 * procedure below commits after each operation (CALL outside a transaction may COMMIT), in the
 * database, so the seeding pays no round trip per statement. One transaction per operation matters
 * for the bytes: a settlement rewrites its sponsorship row, and the new version can stay on its
 * page (HOT, no new index entries) only where the page has room, which it has once the versions
 * earlier transactions left there are pruned; a transaction settling a whole block leaves every
 * row of its pages two versions at once. SCALE_SETTLE=block settles the block in one transaction
 * (one statement per table), as the bench did until 2026-11-27.
 */
async function settle(db: Db, projectId: string, from: number, to: number, atMs: number) {
  await db.query("CALL bench_settle($1, $2, $3, $4, $5)", [
    projectId,
    from,
    to,
    new Date(atMs),
    settleMode === "each",
  ]);
}

const settleProcedure = `
CREATE OR REPLACE PROCEDURE bench_settle(p_project text, p_from bigint, p_to bigint, p_at timestamptz, p_each boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_last bigint;
  v_refunds numeric[];
  v_refs text[];
BEGIN
  -- Each operation of the block in a transaction of its own, or the whole block in one.
  FOR v_first IN p_from..p_to LOOP
    v_last := CASE WHEN p_each THEN v_first ELSE p_to END;
    WITH s AS (
      UPDATE sponsorships SET status = CASE WHEN seq % 50 = 0 THEN 'reverted' ELSE 'success' END,
        actual_gas = 90000 + seq % 1000, actual_gas_cost = 90000000000000 + seq % 1000,
        tx_hash = decode(md5('t' || p_project || p_from) || md5(p_from || 't'), 'hex'),
        user_op_hash = decode(md5('u' || p_project || seq) || md5(seq || 'u'), 'hex'), settled_at = p_at
      WHERE ${projectKey("project_id")} = ${projectKey("p_project")} AND project_id = p_project
        AND seq BETWEEN v_first AND v_last AND status = 'pending'
      RETURNING auth_id, seq, sender, paymaster, status, actual_gas, max_gas_cost - actual_gas_cost AS refund,
        actual_gas_cost, tx_hash, user_op_hash),
    o AS (
      INSERT INTO chain_operations (chain_id, block_hash, log_index, block_number, tx_hash, paymaster,
          user_op_hash, sender, auth_id, success, prefund_too_low, actual_gas_used, actual_gas_cost,
          billed, unbilled_reason, project_id, created_at)
      SELECT 14601, decode(md5('b' || p_project || p_from) || md5(p_from || 'b'), 'hex'), s.seq - p_from, p_from,
        s.tx_hash, decode(substr(s.paymaster, 3), 'hex'), s.user_op_hash, decode(substr(s.sender, 3), 'hex'),
        s.auth_id, s.status = 'success', false, s.actual_gas,
        s.actual_gas_cost, s.actual_gas_cost, NULL, p_project, p_at
      FROM s ORDER BY s.seq)
    SELECT array_agg(s.refund ORDER BY s.seq), array_agg('0x' || encode(s.auth_id, 'hex') ORDER BY s.seq)
      INTO v_refunds, v_refs FROM s;
    IF v_refs IS NOT NULL THEN
      PERFORM ledger_move(p_project, 14601, 'settle', v_refunds, v_refs);
      PERFORM daily_usage_adjust(p_project, 14601, ((p_at - interval '30 seconds') AT TIME ZONE 'UTC')::date,
        -(SELECT sum(r) FROM unnest(v_refunds) r));
    END IF;
    COMMIT;
    EXIT WHEN v_last = p_to;
  END LOOP;
END $$`;

function hex32(seed: string): string {
  return createHash("sha256").update(seed).digest("hex");
}

const RELATIONS = [
  "sponsorships",
  "ledger_entries",
  "rollup_project_totals",
  "rollup_project_days",
  "rollup_project_targets",
  "rollup_project_senders",
  "rollup_project_sender_days",
  "ledger_checkpoints",
  "chain_operations",
  "daily_usage",
  "event_outbox",
  "sponsorship_replays",
  "sponsorship_status_index",
];

async function relationBytes(db: Db): Promise<number> {
  const [row] = await db.query<{ n: string }>(
    `SELECT sum(pg_total_relation_size(r::regclass))::text AS n FROM unnest($1::text[]) r`,
    [RELATIONS],
  );
  return Number(row!.n);
}

async function measureSizes(db: Db) {
  const bytes = await relationBytes(db);
  const [database] = await db.query<{ n: string }>("SELECT pg_database_size(current_database())::text AS n");
  const byRelation = await db.query<{ r: string; n: string }>(
    "SELECT r, pg_total_relation_size(r::regclass)::text AS n FROM unnest($1::text[]) r",
    [RELATIONS],
  );
  // What autovacuum and HOT did: updates that stayed on their page without new index entries,
  // dead rows not yet reclaimed, and how often autovacuum ran on each table.
  const stats = await db.query<{
    relname: string;
    upd: string;
    hot: string;
    del: string;
    dead: string;
    live: string;
    vacuums: string;
  }>(
    `SELECT relname, n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot, n_tup_del::text AS del,
       n_dead_tup::text AS dead, n_live_tup::text AS live, autovacuum_count::text AS vacuums
     FROM pg_stat_user_tables WHERE relname = ANY($1::text[]) AND n_tup_upd + n_tup_del > 0 ORDER BY relname`,
    [RELATIONS],
  );
  // The refusal log is bounded by its retention, not by the operations: its size apart.
  const [refusalLog] = await db.query<{ details: string; days: string; bytes: string }>(
    `SELECT (SELECT count(*) FROM refusals)::text AS details, (SELECT count(*) FROM refusal_days)::text AS days,
       (pg_total_relation_size('refusals') + pg_total_relation_size('refusal_days'))::text AS bytes`,
  );
  return {
    bytes,
    refusalLog: refusalLog!,
    databaseBytes: Number(database!.n),
    byRelation: byRelation.map((x) => [x.r, Number(x.n)] as const),
    stats,
  };
}

async function setting(url: string, name: string): Promise<string> {
  const db = await openPostgres({ url });
  try {
    const [row] = await db.query<{ v: string }>("SELECT current_setting($1) AS v", [name]);
    return row!.v;
  } finally {
    await db.close();
  }
}

function apiOf(baseUrl: string, token: string) {
  return async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
    return JSON.parse(text);
  };
}

/** Median and 95th percentile of `runs` sequential requests after three warm-up ones, in ms. */
async function time(baseUrl: string, token: string, path: string): Promise<string[]> {
  const once = async () => {
    const started = process.hrtime.bigint();
    const res = await fetch(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${text}`);
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  for (let i = 0; i < 3; i++) await once();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) samples.push(await once());
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return [at(0.5).toFixed(1), at(0.95).toFixed(1)];
}

function printTable(rows: string[][], sizes: Awaited<ReturnType<typeof measureSizes>>, inSync: boolean) {
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  console.log(
    `\nReads at ${ops.toLocaleString("en")} operations seeded through the production lifecycle (PostgreSQL, ${runs} sequential requests each)`,
  );
  console.log("| read | p50 ms | p95 ms |");
  console.log("|---|---:|---:|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
  console.log(`\ndatabase size: ${mb(sizes.databaseBytes)}; parity in sync: ${inSync}`);
  console.log(
    `bytes per operation (${RELATIONS.join(", ")}; indexes included; no manual VACUUM): ${(sizes.bytes / ops).toFixed(0)}`,
  );
  console.log(
    `  of which, per operation: ${sizes.byRelation.map(([r, n]) => `${r} ${(n / ops).toFixed(0)}`).join(", ")}`,
  );
  console.log(
    `refusal log: ${sizes.refusalLog.details} detailed refusals (${REFUSAL_RETENTION_DAYS} days kept, ${REFUSAL_DETAIL_PER_MINUTE} a minute at most), ${sizes.refusalLog.days} daily counts, ${mb(Number(sizes.refusalLog.bytes))}`,
  );
  console.log("| table | updates | of them HOT | deletes | dead rows left | live rows | autovacuum runs |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const t of sizes.stats) {
    const share = Number(t.upd) > 0 ? ` (${((100 * Number(t.hot)) / Number(t.upd)).toFixed(0)} %)` : "";
    console.log(
      `| ${t.relname} | ${t.upd} | ${t.hot}${share} | ${t.del} | ${t.dead} | ${t.live} | ${t.vacuums} |`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
