import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey } from "viem/accounts";
import { encodeCursor } from "../src/analytics/store.ts";
import type { Db } from "../src/db/db.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { localIssuer } from "../src/identity/tokens.ts";
import { writeCheckpoints } from "../src/ledger/checkpoints.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { forgetExpiredReplays } from "../src/retention/replays.ts";
import { startChain } from "../test/support/chain/anvil.ts";
import { benchDatabase } from "./database.ts";
import { type Child, REPO_ROOT, startChild } from "./processes.ts";

/**
 * `npm run bench:scale`: the reads of a project with a long history, over real HTTP against the
 * compiled service on PostgreSQL. It starts the service on a fresh database (created beside
 * DATABASE_URL's and dropped afterwards), seeds one project with SCALE_OPS settled operations
 * (default 10 million) with bulk INSERT … SELECT generate_series in chunks, into sponsorships and
 * ledger_entries with every trigger on (so the rollups are kept exactly as in production, one
 * aggregate upsert per chunk), writes the project's ledger checkpoint, adds a tail of entries
 * after it, and times the overview, events (first page, a deep offset, a cursor deep in the
 * history, a sender filter), the per-day figures, the top senders, parity and the multi-project
 * parity report. It prints a table with
 * the database size and the bytes per operation. A benchmark: it measures and asserts nothing.
 *
 * Bytes per operation before and after replay retention: with SCALE_RETENTION=1 (the default up
 * to 2 million operations) every operation is seeded with a stored replay (nonce, digest and
 * response, as authorize keeps them for 24 hours), measured, then the retention job runs over the
 * operations older than 24 hours and the table is rewritten (VACUUM FULL, the steady state in
 * which freed space is reused by new rows) and measured again. Above that, only the last 24
 * hours are seeded with replays, as the job would have left them.
 *
 * Knobs: SCALE_OPS (10,000,000), SCALE_CHUNK (100,000), SCALE_RUNS (20 timed requests per read),
 * SCALE_PROJECTS (20 more small projects in the parity report), SCALE_RETENTION (see above),
 * SCALE_KEEP=1 (keep the database afterwards, to look at plans; drop it yourself),
 * DATABASE_URL (postgres://postgres@127.0.0.1:5432/test).
 */

const ops = Number(process.env.SCALE_OPS ?? 10_000_000);
const chunk = Number(process.env.SCALE_CHUNK ?? 100_000);
const runs = Number(process.env.SCALE_RUNS ?? 20);
const extraProjects = Number(process.env.SCALE_PROJECTS ?? 20);
const withReplays = (process.env.SCALE_RETENTION ?? (ops <= 2_000_000 ? "1" : "0")) === "1";
const databaseUrl = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
const SENDERS = 50_000;
const TARGETS = 8;
const HISTORY_DAYS = 90;
// Entries after the checkpoint: the most a parity read meets before the next checkpoint.
const TAIL_OPS = Math.min(5_000, Math.max(1, Math.floor(ops / 10)));

async function main() {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString("hex")}`;
  const dataDir = mkdtempSync(join(tmpdir(), "gss-scale-"));
  const build = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], {
    cwd: REPO_ROOT,
    stdio: "inherit",
  });
  if (build.status !== 0) throw new Error("the build failed");
  const chain = await startChain();
  const database = await benchDatabase(databaseUrl, runId);
  let service: Child | null = null;
  let db: Db | null = null;
  try {
    console.log(
      `bench:scale ${runId}: ${ops.toLocaleString("en")} operations, database ${database.created ?? "(given)"}`,
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
    const token = await (await localIssuer(dataDir)).issue(`scale-${runId}@example.com`, 3600);
    const api = apiOf(service.baseUrl, token);
    const slug = `scale-${runId}`;
    const projectId = `scale-${runId}`;
    await api("POST", "/orgs", { name: slug, slug });
    for (const id of [projectId, ...Array.from({ length: extraProjects }, (_, i) => `${projectId}-${i}`)]) {
      await api("POST", "/projects", { id, name: id, owner: slug });
    }
    // Seeding chunks, VACUUM FULL and the first checkpoint run far longer than a request may.
    db = await openPostgres({ url: database.url, statementTimeoutMs: 3_600_000 });
    const seeded = await seed(db, projectId, runId);
    for (let i = 0; i < extraProjects; i++) {
      await creditDeposit(db, {
        projectId: `${projectId}-${i}`,
        reference: `scale:${runId}:${i}`,
        amountWei: 10n ** 18n,
      });
    }
    const sizes = await measureSizes(db, projectId, seeded);
    await db.query("VACUUM ANALYZE");

    const midId = Number(
      (
        await db.query<{ id: string }>(
          "SELECT id FROM sponsorships WHERE project_id = $1 ORDER BY id LIMIT 1 OFFSET $2",
          [projectId, Math.floor(ops / 2)],
        )
      )[0]!.id,
    );
    const deepOffset = Math.min(1_000_000, Math.max(0, ops - 50));
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
      ["daily figures, 90 days", `/projects/${projectId}/analytics/daily?from=${dayOf(-89)}&to=${dayOf(0)}`],
      ["top senders by operations", `/projects/${projectId}/analytics/senders?by=operations&limit=10`],
      ["top senders by cost", `/projects/${projectId}/analytics/senders?by=cost&limit=10`],
      ["parity, one project", `/projects/${projectId}/funds/parity`],
      [`parity report, ${extraProjects + 1} projects`, "/projects/funds/parity-report"],
    ];
    const rows: string[][] = [];
    for (const [name, path] of reads) rows.push([name, ...(await time(service.baseUrl, token, path))]);
    const inSync = (await api("GET", `/projects/${projectId}/funds/parity`)) as { inSync: boolean };
    printTable(rows, sizes, inSync.inSync);
  } finally {
    await db?.close();
    await service?.stop();
    await chain.stop();
    if (process.env.SCALE_KEEP === "1") console.log(`kept database ${database.url}`);
    else await database.drop();
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

/**
 * The history, oldest first, spread evenly over HISTORY_DAYS up to now: every operation
 * reserved and settled (2 % reverted), its two ledger entries, and the cached balance moved by
 * the same amounts. Then the checkpoint, then a tail of operations after it.
 */
async function seed(db: Db, projectId: string, runId: string) {
  await creditDeposit(db, { projectId, reference: `scale:${runId}`, amountWei: 10n ** 30n });
  await db.query(
    "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
    [projectId, senderOf(1), "0xa0712d68"],
  );
  const started = Date.now();
  const nowMs = Date.now();
  const main = ops - TAIL_OPS;
  for (let from = 1; from <= main; from += chunk) {
    await seedChunk(db, projectId, runId, from, Math.min(main, from + chunk - 1), nowMs);
    if (process.stdout.isTTY)
      process.stdout.write(`\rseeded ${Math.min(main, from + chunk - 1).toLocaleString("en")} operations`);
  }
  const checkpointStarted = Date.now();
  await writeCheckpoints(db, [projectId]);
  const checkpointMs = Date.now() - checkpointStarted;
  await seedChunk(db, projectId, runId, main + 1, ops, nowMs);
  console.log(
    `\rseeded ${ops.toLocaleString("en")} operations in ${((Date.now() - started) / 1000).toFixed(0)} s (first checkpoint ${checkpointMs} ms)`,
  );
  return { nowMs };
}

async function seedChunk(db: Db, projectId: string, runId: string, from: number, to: number, nowMs: number) {
  await db.transaction(async (tx) => {
    const [moved] = await tx.query<{ spent: string }>(
      `WITH s AS (
         INSERT INTO sponsorships (auth_id, project_id, chain_id, sender, target, selector, estimated_gas,
           max_gas_cost, max_fee_per_gas, max_priority_fee_per_gas, paymaster, valid_after, valid_until, status,
           actual_gas, actual_gas_cost, tx_hash, user_op_hash, client_nonce, request_digest, response, created_at, settled_at,
           seq)
         SELECT '0x' || md5($2 || g) || md5(g || $2), $1, 14601,
           '0x' || lpad(to_hex(g % ${SENDERS}), 40, '0'), '0x' || lpad(to_hex(g % ${TARGETS} + 1), 40, '0'),
           '0xa0712d68', 150000, 300000000000000, 2000000000, 1000000000, '0x00000000000000000000000000000000000000aa',
           extract(epoch FROM c.at)::bigint - 60, extract(epoch FROM c.at)::bigint + 300,
           CASE WHEN g % 50 = 0 THEN 'reverted' ELSE 'success' END, 90000 + g % 1000, 90000000000000 + g % 1000,
           '0x' || md5('t' || g) || md5(g || 't'), '0x' || md5('u' || g) || md5(g || 'u'),
           r.nonce, r.digest, r.response, c.at, c.at + interval '30 seconds', g
         FROM generate_series($3::bigint, $4::bigint) g,
           LATERAL (SELECT $5::timestamptz - ($6::bigint - g) * (interval '${HISTORY_DAYS} days' / $6::bigint) AS at) c,
           LATERAL (SELECT CASE WHEN $7 OR c.at >= $5::timestamptz - interval '24 hours' THEN true ELSE false END AS keep) k,
           LATERAL (SELECT
             CASE WHEN k.keep THEN 'order-' || g END AS nonce,
             CASE WHEN k.keep THEN md5('d' || g) || md5(g || 'd') END AS digest,
             CASE WHEN k.keep THEN '{"authorized":true,"paymasterAndData":"0x' || repeat(md5('p' || g), 12) ||
               '","signature":"0x' || md5('s' || g) || md5(g || 's') || md5('x' || g) || '1b' ||
               '","validUntil":' || (extract(epoch FROM c.at)::bigint + 300) || ',"validAfter":' ||
               (extract(epoch FROM c.at)::bigint - 60) || '}' END AS response) r
         RETURNING auth_id, max_gas_cost, actual_gas_cost, created_at, settled_at),
       l AS (
         INSERT INTO ledger_entries (project_id, kind, amount, reference, created_at)
         SELECT $1, e.kind, e.amount, s.auth_id, e.at FROM s,
           LATERAL (VALUES ('reserve', -s.max_gas_cost, s.created_at),
                           ('settle', s.max_gas_cost - s.actual_gas_cost, s.settled_at)) e(kind, amount, at)
         ORDER BY s.auth_id, e.kind)
       SELECT sum(actual_gas_cost)::text AS spent FROM s`,
      [projectId, runId, from, to, new Date(nowMs), ops, withReplays],
    );
    // Operation g is the project's g-th (migration 013's sequence), as the reservation would number it.
    await tx.query(
      "UPDATE projects SET gas_tank_balance = gas_tank_balance - $2::numeric, sponsorships_seq = $3 WHERE id = $1",
      [projectId, moved!.spent, to],
    );
  });
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
];

async function relationBytes(db: Db): Promise<number> {
  const [row] = await db.query<{ n: string }>(
    `SELECT sum(pg_total_relation_size(r::regclass))::text AS n FROM unnest($1::text[]) r`,
    [RELATIONS],
  );
  return Number(row!.n);
}

async function measureSizes(db: Db, _projectId: string, seeded: { nowMs: number }) {
  const before = await relationBytes(db);
  let after = before;
  let retentionMs = 0;
  if (withReplays) {
    const started = Date.now();
    while ((await forgetExpiredReplays(db, seeded.nowMs, 50_000)) === 50_000) {}
    retentionMs = Date.now() - started;
    await db.query("VACUUM FULL sponsorships");
    after = await relationBytes(db);
  }
  const [database] = await db.query<{ n: string }>("SELECT pg_database_size(current_database())::text AS n");
  const byRelation = await db.query<{ r: string; n: string }>(
    "SELECT r, pg_total_relation_size(r::regclass)::text AS n FROM unnest($1::text[]) r",
    [RELATIONS],
  );
  return {
    before,
    after,
    retentionMs,
    databaseBytes: Number(database!.n),
    byRelation: byRelation.map((x) => [x.r, Number(x.n)] as const),
  };
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

function printTable(
  rows: string[][],
  sizes: {
    before: number;
    after: number;
    retentionMs: number;
    databaseBytes: number;
    byRelation: (readonly [string, number])[];
  },
  inSync: boolean,
) {
  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
  console.log(
    `\nReads at ${ops.toLocaleString("en")} settled operations (PostgreSQL, ${runs} sequential requests each)`,
  );
  console.log("| read | p50 ms | p95 ms |");
  console.log("|---|---:|---:|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
  console.log(`\ndatabase size: ${mb(sizes.databaseBytes)}; parity in sync: ${inSync}`);
  console.log(
    withReplays
      ? `bytes per operation (sponsorships + ledger + rollups + checkpoints, indexes included): ${(sizes.before / ops).toFixed(0)} with every replay stored, ${(sizes.after / ops).toFixed(0)} after retention (job ${sizes.retentionMs} ms, then VACUUM FULL)`
      : `bytes per operation (sponsorships + ledger + rollups + checkpoints, indexes included; replays kept for the last 24 hours only): ${(sizes.after / ops).toFixed(0)}`,
  );
  console.log(
    `  of which, per operation: ${sizes.byRelation.map(([r, n]) => `${r} ${(n / ops).toFixed(0)}`).join(", ")}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
