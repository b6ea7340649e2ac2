import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { LightMyRequestResponse } from "fastify";
import pg from "pg";
import { loadConfig } from "../src/config.ts";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPglite } from "../src/db/pglite.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { DatabaseUnavailable, unavailableReason } from "../src/db/unavailable.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { type PgCluster, startPgCluster } from "./support/pg-cluster.ts";
import { startRedisServer } from "./support/redis-server.ts";

/**
 * Hardening (issue 9): a database that is away, restarting, or holding a row lock too long is a
 * 503 `unavailable` with Retry-After, never a 500. The fault tests need a PostgreSQL server they
 * may stop and start, so this file starts one of its own (test/support/pg-cluster.ts) in both
 * passes; the shared server on 5432 is never touched.
 */

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const MINT = "0xa0712d68";
const USER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const GAS = 150_000;
// TEST_FEES (1 gwei base, 1 gwei priority) give a fee ceiling of 2.5 gwei.
const COST = BigInt(GAS) * 2_500_000_000n;

let cluster: PgCluster;
before(async () => {
  cluster = await startPgCluster();
});
after(async () => {
  await cluster?.destroy();
});

const bodyFor = (projectId: string, clientNonce?: string) => ({
  projectId,
  user: USER,
  target: GAME,
  selector: MINT,
  estimatedGas: GAS,
  chainId: 14601,
  ...(clientNonce ? { clientNonce } : {}),
});

/** A project with an allowlisted (GAME, MINT) and `balanceWei` in its tank. */
async function fundedProject(t: TestApp, balanceWei: bigint, opts: Parameters<typeof seedProject>[1] = {}) {
  const p = await seedProject(t, opts);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: GAME, functionSelector: MINT },
  });
  assert.equal(allow.statusCode, 201, allow.body);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    reference: `fund:${p.projectId}`,
    amountWei: balanceWei,
  });
  return p;
}

const authorize = (t: TestApp, apiKey: string, body: Record<string, unknown>) =>
  t.request({ method: "POST", url: "/sponsor/authorize", token: apiKey, payload: body });

async function balanceOf(db: Db, projectId: string): Promise<bigint> {
  const [row] = await db.query<{ b: string }>(
    "SELECT gas_tank_balance::text AS b FROM projects WHERE id = $1",
    [projectId],
  );
  return BigInt(row!.b);
}

async function countOf(db: Db, sql: string, params: unknown[]): Promise<number> {
  const [row] = await db.query<{ n: number }>(sql, params);
  return row!.n;
}

function assertUnavailable(res: LightMyRequestResponse) {
  assert.equal(res.statusCode, 503, res.body);
  assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
  assert.equal(res.json().code, "unavailable");
  const retryAfter = Number(res.headers["retry-after"]);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 10, `Retry-After ${retryAfter}`);
  assert.doesNotMatch(res.body, /SELECT|ECONN|pglite|postgres|terminated|at \w+ \(|\.ts:/i);
}

/** The log lines of one level (pino: 40 warn, 50 error) that carry `msg`. */
const logsAt = (t: TestApp, level: number, msg?: string) =>
  t.logs.map((l) => JSON.parse(l)).filter((l) => l.level === level && (msg === undefined || l.msg === msg));

/** A migrated store in a schema of its own on `url`, with the given bounds. */
async function schemaStore(
  url: string,
  bounds: { lockTimeoutMs?: number; statementTimeoutMs?: number } = {},
): Promise<TestDb> {
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const db = await openPostgres({ url, schema, ...bounds });
  await migrate(db);
  return {
    db,
    schema,
    async drop() {
      await db.query(`DROP SCHEMA ${schema} CASCADE`);
      await db.close();
    },
  };
}

describe("database errors are classified in the db layer", () => {
  it("connection loss, shutdown, overload, lock and statement timeouts, closed stores: unavailable; the rest: not", () => {
    const e = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});
    const cases: [unknown, string | null][] = [
      [e("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED"), "connection"],
      [e("read ECONNRESET", "ECONNRESET"), "connection"],
      [e("connect ETIMEDOUT", "ETIMEDOUT"), "connection"],
      [
        Object.assign(new AggregateError([e("x", "ECONNREFUSED"), e("y", "ECONNREFUSED")], ""), {}),
        "connection",
      ],
      [e("Connection terminated unexpectedly"), "connection"],
      [e("Connection terminated due to connection timeout"), "connection"],
      [e("timeout exceeded when trying to connect"), "connection"],
      [e("Client has encountered a connection error and is not queryable"), "connection"],
      [e("connection failure", "08006"), "connection"],
      [e("terminating connection due to administrator command", "57P01"), "shutdown"],
      [e("terminating connection due to crash of another server process", "57P02"), "shutdown"],
      [e("the database system is starting up", "57P03"), "shutdown"],
      [e("sorry, too many clients already", "53300"), "too_many_connections"],
      [e("canceling statement due to lock timeout", "55P03"), "lock_timeout"],
      [e("canceling statement due to statement timeout", "57014"), "statement_timeout"],
      [e("deadlock detected", "40P01"), "contention"],
      [e("could not serialize access due to concurrent update", "40001"), "contention"],
      [e("PGlite is closed"), "closed"],
      [e("Cannot use a pool after calling end on the pool"), "closed"],
      [e('duplicate key value violates unique constraint "x"', "23505"), null],
      [e("division by zero", "22012"), null],
      [e("insufficient_balance"), null],
      [new Error("boom"), null],
      ["not an error", null],
    ];
    for (const [err, reason] of cases) assert.equal(unavailableReason(err), reason, String(err));
  });
});

describe("a deadlock on the real PostgreSQL is contention, retried, not a 500", () => {
  // PGlite has one connection and cannot deadlock: both passes use the machine's PostgreSQL.
  it("the driver's 40P01 is classified as contention", async () => {
    const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
    const a = new pg.Client({ connectionString: url });
    const b = new pg.Client({ connectionString: url });
    await a.connect();
    await b.connect();
    const table = `deadlock_${process.pid}`;
    try {
      await a.query(`CREATE TABLE ${table} (id int PRIMARY KEY, n int)`);
      await a.query(`INSERT INTO ${table} VALUES (1, 0), (2, 0)`);
      await a.query("BEGIN");
      await b.query("BEGIN");
      await a.query(`UPDATE ${table} SET n = 1 WHERE id = 1`);
      await b.query(`UPDATE ${table} SET n = 1 WHERE id = 2`);
      const results = await Promise.allSettled([
        a.query(`UPDATE ${table} SET n = 2 WHERE id = 2`),
        b.query(`UPDATE ${table} SET n = 2 WHERE id = 1`),
      ]);
      const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      assert.equal(failed.length, 1, "PostgreSQL breaks the deadlock by aborting one side");
      assert.equal((failed[0]!.reason as { code?: string }).code, "40P01");
      assert.equal(unavailableReason(failed[0]!.reason), "contention");
    } finally {
      await a.query("ROLLBACK").catch(() => {});
      await b.query("ROLLBACK").catch(() => {});
      await a.query(`DROP TABLE IF EXISTS ${table}`).catch(() => {});
      await a.end();
      await b.end();
    }
  });
});

describe("a closed store answers 503 unavailable with Retry-After, logged once at warn", () => {
  it(`on ${process.env.DATABASE_URL ? "PostgreSQL" : "PGlite"}: REST and JSON-RPC`, async () => {
    const store = await openTestDb();
    const t = await startTestApp({ db: store });
    const p = await fundedProject(t, 10n * COST);
    const reads = await t.token("reader@example.com");
    await store.db.close();
    try {
      const requests = [
        await t.request({ method: "GET", url: "/orgs", token: reads }),
        await authorize(t, p.apiKey, bodyFor(p.projectId)),
      ];
      for (const res of requests) assertUnavailable(res);
      assert.equal(
        logsAt(t, 40, "database unavailable").length,
        requests.length,
        "one warn line per request",
      );
      assert.deepEqual(logsAt(t, 50), [], "nothing at error level");
      // /rpc answers the same refusal as a JSON-RPC error (the key lookup meets the closed store).
      const rpc = await t.app.inject({
        method: "POST",
        url: "/rpc",
        headers: { authorization: `Bearer ${p.apiKey}`, "content-type": "application/json" },
        payload: { jsonrpc: "2.0", id: 7, method: "pm_getPaymasterStubData", params: [] },
      });
      assert.equal(rpc.statusCode, 200);
      const body = rpc.json();
      assert.equal(body.id, 7);
      assert.equal(body.error.data.code, "unavailable", rpc.body);
      assert.equal(body.error.code, -32002);
      assert.ok(body.error.data.retryAfterSec >= 1);
    } finally {
      await t.close();
      if (store.schema) {
        const admin = await openPostgres({ url: process.env.DATABASE_URL! });
        await admin.query(`DROP SCHEMA ${store.schema} CASCADE`);
        await admin.close();
      }
    }
  });
});

/**
 * Holds a project's row lock from a connection of its own, as a stuck transaction elsewhere
 * would, until release() is called.
 */
async function holdProjectRow(url: string, schema: string, projectId: string) {
  const holder = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await holder.connect();
  await holder.query("BEGIN");
  await holder.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  return {
    async release() {
      await holder.query("ROLLBACK");
      await holder.end();
    },
  };
}

describe("a request waiting on a locked project row", () => {
  // The PostgreSQL pass uses the shared server; the embedded pass this file's own server.
  const pgUrl = () => process.env.DATABASE_URL ?? cluster.url;

  for (const bound of ["lock_timeout", "statement_timeout"] as const) {
    it(`on PostgreSQL: ends at ${bound} in 503 with Retry-After, changing nothing`, async () => {
      // DB_LOCK_TIMEOUT_MS is the service's setting; statement_timeout below it must be the bound that fires.
      const config = loadConfig({ DB_LOCK_TIMEOUT_MS: bound === "lock_timeout" ? "300" : "10000" });
      const store = await schemaStore(pgUrl(), {
        lockTimeoutMs: config.dbLockTimeoutMs,
        ...(bound === "statement_timeout" ? { statementTimeoutMs: 400 } : {}),
      });
      const t = await startTestApp({ db: store });
      try {
        const p = await fundedProject(t, 10n * COST);
        const body = bodyFor(p.projectId, "locked-1");
        const lock = await holdProjectRow(pgUrl(), store.schema!, p.projectId);
        let res: LightMyRequestResponse;
        try {
          res = await authorize(t, p.apiKey, body);
        } finally {
          await lock.release();
        }
        assertUnavailable(res);
        assert.deepEqual(
          logsAt(t, 40, "database unavailable").map((l) => l.reason),
          [bound],
        );
        assert.deepEqual(logsAt(t, 50), []);
        assert.equal(await balanceOf(t.db, p.projectId), 10n * COST, "nothing reserved");
        assert.equal(await countOf(t.db, "SELECT count(*)::int AS n FROM sponsorships", []), 0);
        // Once the lock is gone the same request goes through, once.
        const retry = await authorize(t, p.apiKey, body);
        assert.equal(retry.statusCode, 200, retry.body);
        assert.equal(await balanceOf(t.db, p.projectId), 9n * COST);
      } finally {
        await t.close();
        await store.drop();
      }
    });
  }

  it("on PGlite: waits for the holder (one connection, no row-lock wait to bound), then succeeds once", async () => {
    // PGlite is a single connection: a transaction holds the whole database, and every other
    // statement queues behind it in this process, so there is no lock wait for lock_timeout to
    // end (and no second connection that could hold a row). What matters is that the request
    // neither fails nor double-reserves: it is answered when the holder commits.
    const db = await openPglite("memory://");
    await migrate(db);
    const store: TestDb = { db, schema: null, drop: () => db.close() };
    const t = await startTestApp({ db: store });
    try {
      const p = await fundedProject(t, 10n * COST);
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const holder = db.transaction(async (tx) => {
        await tx.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [p.projectId]);
        await held;
      });
      let answered = false;
      const pending = authorize(t, p.apiKey, bodyFor(p.projectId, "locked-1")).then((r) => {
        answered = true;
        return r;
      });
      await sleep(300);
      assert.equal(answered, false, "queued behind the transaction");
      release();
      await holder;
      const res = await pending;
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(await balanceOf(db, p.projectId), 9n * COST);
    } finally {
      await t.close();
      await store.drop();
    }
  });
});

interface Answer {
  nonce: string;
  status: number;
  phase: Phase;
  res: LightMyRequestResponse;
}
type Phase = "up" | "stopping" | "down" | "starting" | "restarted";

/**
 * Drives authorize requests from `workers` loops, each with a clientNonce of its own, until
 * stopped; remembers every answer with the phase of the outage it was sent in.
 */
function loadGenerator(t: TestApp, apiKey: string, projectId: string, workers: number) {
  const answers: Answer[] = [];
  const state = { phase: "up" as Phase, stopped: false, seq: 0, failure: null as unknown };
  const loops = Array.from({ length: workers }, async () => {
    try {
      while (!state.stopped) {
        const nonce = `load-${state.seq++}`;
        const phase = state.phase;
        const res = await authorize(t, apiKey, bodyFor(projectId, nonce));
        answers.push({ nonce, status: res.statusCode, phase, res });
        if (res.statusCode !== 200) await sleep(10);
      }
    } catch (err) {
      // A response the OpenAPI document does not allow (t.request checks each one).
      state.failure ??= err;
      state.stopped = true;
    }
  });
  return {
    answers,
    state,
    /** Resolves once `predicate` holds for the answers; fails after `deadlineMs`. */
    async until(what: string, predicate: () => boolean, deadlineMs = 60_000) {
      const end = Date.now() + deadlineMs;
      while (!predicate()) {
        if (state.failure) throw state.failure;
        assert.ok(Date.now() < end, `waited ${deadlineMs} ms for ${what}`);
        await sleep(20);
      }
    },
    async stop() {
      state.stopped = true;
      await Promise.all(loops);
      if (state.failure) throw state.failure;
    },
  };
}

describe("PostgreSQL stopped and started under load (a server of this file's own)", () => {
  // immediate: the server dies (connections drop, "Connection terminated unexpectedly");
  // fast: sessions are ended with 57P01 and new connections refused with 57P03 while it stops.
  for (const mode of ["immediate", "fast"] as const) {
    it(`stop -m ${mode}: only 503s with Retry-After while it is down, 200s again after, an exact ledger`, {
      timeout: 180_000,
    }, async (ctx) => {
      // A test that failed midway may have left the server stopped.
      if (!cluster.running) await cluster.start();
      const db = await openPostgres({ url: cluster.url, max: 10 });
      await migrate(db);
      const t = await startTestApp({
        db: { db, schema: null, drop: () => db.close() },
        env: { DATABASE_URL: cluster.url },
      });
      const load = { stop: async () => {} };
      try {
        const creditedWei = 100_000n * COST;
        const p = await fundedProject(t, creditedWei);
        const gen = loadGenerator(t, p.apiKey, p.projectId, 8);
        load.stop = gen.stop;
        const count = (status: number, phase?: Phase) =>
          gen.answers.filter((a) => a.status === status && (!phase || a.phase === phase)).length;
        await gen.until("20 answers before the outage", () => count(200, "up") >= 20);

        // A transaction open across the outage: its client's 'error' must not end the process.
        let releaseTx!: () => void;
        const txHeld = new Promise<void>((resolve) => {
          releaseTx = resolve;
        });
        let entered!: () => void;
        const inside = new Promise<void>((resolve) => {
          entered = resolve;
        });
        const openTx = db
          .transaction(async (tx) => {
            await tx.query("SELECT 1");
            entered();
            await txHeld;
            await tx.query("SELECT 1");
          })
          .then(
            () => null,
            (err: unknown) => err,
          );
        await inside;

        gen.state.phase = "stopping";
        await cluster.stop(mode);
        gen.state.phase = "down";
        releaseTx();
        const txError = await openTx;
        assert.ok(txError instanceof DatabaseUnavailable && txError.connectionLost, String(txError));
        const downSince = Date.now();
        await gen.until(
          "30 answers and a second while down",
          () => count(503, "down") >= 30 && Date.now() - downSince > 1000,
        );
        const ready = await t.app.inject({ method: "GET", url: "/health/ready" });
        assert.equal(ready.statusCode, 503);
        assert.equal(ready.json().checks.database.status, "down");

        gen.state.phase = "starting";
        await cluster.start();
        gen.state.phase = "restarted";
        await gen.until("20 answers of 200 after the restart", () => count(200, "restarted") >= 20, 60_000);
        await gen.stop();

        const wrong = gen.answers.filter((a) => a.status !== 200 && a.status !== 503);
        assert.deepEqual(
          wrong.map((a) => `${a.phase} ${a.status} ${a.res.body}`),
          [],
          "only 200 or 503 during the outage",
        );
        assert.equal(count(200, "down"), 0, "nothing succeeds while the server is down");
        for (const a of gen.answers.filter((x) => x.status === 503)) assertUnavailable(a.res);
        assert.deepEqual(logsAt(t, 50), [], "nothing logged at error level");

        // Every nonce refused during the outage is retried until it is answered 200: it either
        // went through before the connection died (a replay now) or it is reserved now, once.
        const final = new Map<string, LightMyRequestResponse>();
        for (const a of gen.answers) if (a.status === 200) final.set(a.nonce, a.res);
        for (const a of gen.answers) {
          if (final.has(a.nonce)) continue;
          const res = await authorize(t, p.apiKey, bodyFor(p.projectId, a.nonce));
          assert.equal(res.statusCode, 200, res.body);
          final.set(a.nonce, res);
        }
        ctx.diagnostic(
          `${gen.answers.length} answers: ${count(200)} × 200, ${count(503)} × 503; ` +
            `${final.size} reservations, ${final.size - count(200)} of them settled by a retry`,
        );
        // A nonce answered 200 replays byte for byte and reserves nothing more.
        const [someNonce, firstAnswer] = [...final][0]!;
        const replay = await authorize(t, p.apiKey, bodyFor(p.projectId, someNonce));
        assert.equal(replay.body, firstAnswer.body);
        assert.equal(replay.headers["idempotent-replayed"], "true");

        const authIds = [...final.values()].map((r) => r.json().authorizationId as string);
        const reservedWei = [...final.values()].reduce((sum, r) => sum + BigInt(r.json().maxGasCost), 0n);
        const stored = await db.query<{ auth_id: string }>(
          "SELECT '0x' || encode(auth_id, 'hex') AS auth_id FROM sponsorships WHERE project_id = $1",
          [p.projectId],
        );
        assert.deepEqual(
          stored.map((r) => r.auth_id).sort(),
          [...authIds].sort(),
          "each 200 reserved exactly once",
        );
        assert.equal(
          await countOf(
            db,
            "SELECT count(*)::int AS n FROM ledger_entries WHERE project_id = $1 AND kind = 'reserve'",
            [p.projectId],
          ),
          final.size,
        );
        assert.equal(await balanceOf(db, p.projectId), creditedWei - reservedWei);
        const parity = await t.request({
          method: "GET",
          url: `/projects/${p.projectId}/funds/parity`,
          token: p.ownerToken,
        });
        assert.equal(parity.statusCode, 200);
        assert.equal(parity.json().inSync, true);
        assert.equal(parity.json().cachedBalance, (creditedWei - reservedWei).toString());
      } finally {
        await load.stop().catch(() => {});
        await t.close();
        await db.close();
      }
    });
  }
});

describe("Redis killed under load (a server of this file's own)", () => {
  it("authorize keeps answering 200 or 429, never 500; readiness reports degraded", {
    timeout: 60_000,
  }, async (ctx) => {
    const redis = await startRedisServer();
    const t = await startTestApp({ env: { REDIS_URL: redis.url } });
    const load = { stop: async () => {} };
    try {
      const p = await fundedProject(t, 100_000n * COST, { rateLimit: 150 });
      const gen = loadGenerator(t, p.apiKey, p.projectId, 4);
      load.stop = gen.stop;
      await gen.until("answers counted in Redis", () => gen.answers.length >= 40);
      await redis.stop();
      gen.state.phase = "down";
      const at = gen.answers.length;
      await gen.until("answers with Redis gone", () => gen.answers.length >= at + 300);
      await gen.stop();
      const statuses = new Set(gen.answers.map((a) => a.status));
      ctx.diagnostic(
        `${gen.answers.length} answers: ${[...statuses].map((s) => `${gen.answers.filter((a) => a.status === s).length} × ${s}`).join(", ")}`,
      );
      assert.deepEqual(
        [...statuses].filter((s) => s !== 200 && s !== 429),
        [],
        `statuses seen: ${[...statuses].join(", ")}`,
      );
      assert.ok(
        gen.answers.some((a) => a.phase === "down" && a.status === 200),
        "served from memory",
      );
      assert.ok(
        gen.answers.some((a) => a.status === 429),
        "the budget is still enforced",
      );
      const ready = await t.app.inject({ method: "GET", url: "/health/ready" });
      assert.equal(ready.statusCode, 200);
      assert.equal(ready.json().checks.redis.status, "degraded");
    } finally {
      await load.stop().catch(() => {});
      await t.close();
      await redis.stop();
    }
  });
});
