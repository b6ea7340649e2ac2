// test-scope: store-free — it opens embedded stores of its own whatever DATABASE_URL says
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { LOCK_FILE } from "../src/db/data-dir-lock.ts";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPglite } from "../src/db/pglite.ts";
import { openPgliteThread, pgliteThreadOf } from "../src/db/pglite-thread.ts";
import { DatabaseUnavailable } from "../src/db/unavailable.ts";

/**
 * The server's embedded store runs PGlite on a thread of its own (src/db/pglite-thread.ts). It must
 * behave as PGlite in the service's own thread does, for everything the service asks of a Db: the
 * rows and their JavaScript types, errors with their SQLSTATE and constraint, transactions that
 * commit or roll back, statements outside a transaction waiting for it, and a closed or lost
 * thread reported as DatabaseUnavailable.
 */

const TYPES_SQL = `SELECT 1::int AS i, 9007199254740993::bigint AS big, 12.5::numeric AS num, 'x'::text AS t,
  '\\x00ff10'::bytea AS b, '2026-11-30T12:00:00.123Z'::timestamptz AS ts, '{"a":[1,"2",null]}'::jsonb AS j,
  ARRAY['p','q']::text[] AS arr, NULL::text AS nothing, true AS yes, $1::text AS param, $2::bigint AS param_big`;

describe("PGlite on a thread of its own", () => {
  let thread: Db;
  let inline: Db;
  before(async () => {
    [thread, inline] = await Promise.all([openPgliteThread("memory://"), openPglite("memory://")]);
    for (const db of [thread, inline]) {
      await db.query("CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)");
    }
  });
  after(async () => {
    await Promise.all([thread?.close(), inline?.close()]);
  });

  it("answers with the rows, and the JavaScript types, that PGlite in this thread gives", async () => {
    const params = ["hello", 42n];
    const [a, b] = await Promise.all([thread.query(TYPES_SQL, params), inline.query(TYPES_SQL, params)]);
    assert.deepEqual(a, b);
    const row = a[0] as Record<string, unknown>;
    assert.ok(
      row.b instanceof Uint8Array && row.ts instanceof Date,
      "bytea and timestamptz keep their types",
    );
  });

  it("reports a failed statement with its SQLSTATE, constraint and detail", async () => {
    await thread.query("INSERT INTO t VALUES (1, 'one')");
    const err = await thread.query("INSERT INTO t VALUES (1, 'again')").catch((e: unknown) => e);
    const same = await inline
      .query("INSERT INTO t VALUES (1, 'one')")
      .then(() => inline.query("INSERT INTO t VALUES (1, 'again')"))
      .catch((e: unknown) => e);
    assert.ok(err instanceof Error);
    const { code, constraint, detail } = err as Error & Record<string, unknown>;
    assert.deepEqual(
      { code, constraint, detail },
      {
        code: "23505",
        constraint: "t_pkey",
        detail: (same as Record<string, unknown>).detail,
      },
    );
    assert.equal(err.message, (same as Error).message);
    assert.ok(!(err instanceof DatabaseUnavailable), "a wrong statement is not an unavailable database");
    await thread.query("DELETE FROM t");
    await inline.query("DELETE FROM t");
  });

  it("commits a transaction, and rolls one back when its function throws, rethrowing what it threw", async () => {
    const value = await thread.transaction(async (tx) => {
      await tx.query("INSERT INTO t VALUES (2, 'two')");
      return (await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM t"))[0]!.n;
    });
    assert.equal(value, 1);
    const boom = new Error("the caller changed its mind");
    const thrown = await thread
      .transaction(async (tx) => {
        await tx.query("INSERT INTO t VALUES (3, 'three')");
        throw boom;
      })
      .catch((e: unknown) => e);
    assert.equal(thrown, boom);
    const failed = await thread
      .transaction(async (tx) => {
        await tx.query("INSERT INTO t VALUES (4, 'four')");
        await tx.query("INSERT INTO t VALUES (2, 'duplicate')");
      })
      .catch((e: unknown) => e);
    assert.equal((failed as Record<string, unknown>).code, "23505");
    assert.deepEqual(await thread.query("SELECT id FROM t ORDER BY id"), [{ id: 2 }]);
    await thread.query("DELETE FROM t");
  });

  it("makes a statement outside an open transaction wait for its end, as in this thread", async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    let inserted!: () => void;
    const open = new Promise<void>((resolve) => {
      inserted = resolve;
    });
    const order: string[] = [];
    const tx = thread.transaction(async (t) => {
      await t.query("INSERT INTO t VALUES (5, 'five')");
      inserted();
      await hold;
      order.push("commit");
    });
    // Posted while the transaction is open: it must see the committed row, not run in between.
    await open;
    const outside = thread.query<{ n: number }>("SELECT count(*)::int AS n FROM t").then((rows) => {
      order.push("outside");
      return rows[0]!.n;
    });
    // Room for a statement that did not wait to come back (it would in well under this).
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(order, [], "the statement outside waited");
    release();
    await tx;
    assert.equal(await outside, 1);
    assert.deepEqual(order, ["commit", "outside"]);
    await thread.query("DELETE FROM t");
  });

  it("runs the service's migrations", async () => {
    const db = await openPgliteThread("memory://");
    try {
      await migrate(db);
      const [row] = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'reserve_sponsorships'",
      );
      assert.equal(row!.n, 1);
    } finally {
      await db.close();
    }
  });
});

describe("a closed or lost thread", () => {
  it("fails every statement after close() as DatabaseUnavailable (closed), without calling onLost; close() twice is fine", async () => {
    const lost: Error[] = [];
    const db = await openPgliteThread("memory://", { onLost: (err) => lost.push(err) });
    await db.close();
    await db.close();
    const err = await db.query("SELECT 1").catch((e: unknown) => e);
    assert.ok(err instanceof DatabaseUnavailable);
    assert.equal(err.reason, "closed");
    assert.deepEqual(lost, [], "a close() is not a loss");
  });

  it("fails the statements in flight and every later one, and says so once, when the thread dies", async () => {
    const lost: Error[] = [];
    const db = await openPgliteThread("memory://", { onLost: (err) => lost.push(err) });
    const inFlight = db.query("SELECT pg_sleep(0.2)").catch((e: unknown) => e);
    await pgliteThreadOf(db)!.terminate();
    const [a, b] = [await inFlight, await db.query("SELECT 1").catch((e: unknown) => e)];
    for (const err of [a, b]) {
      assert.ok(err instanceof DatabaseUnavailable);
      assert.equal(err.reason, "closed");
    }
    assert.equal(lost.length, 1);
    await db.close();
    assert.equal(lost.length, 1, "close() after the loss says nothing more");
  });

  it("rejects the open itself when PGlite cannot start there, and leaves no thread behind", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gss-thread-"));
    try {
      const file = join(dir, "not-a-directory");
      writeFileSync(file, "x");
      const lost: Error[] = [];
      const err = await openPgliteThread(file, { onLost: (e) => lost.push(e) }).catch((e: unknown) => e);
      assert.ok(err instanceof Error);
      assert.deepEqual(lost, [], "a thread that never served is not lost");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("ends the server's process when its store's thread is lost: a fatal line, DATA_DIR's lock released, exit 1", () => {
    const dir = mkdtempSync(join(tmpdir(), "gss-thread-lost-"));
    try {
      const src = (path: string) => JSON.stringify(fileURLToPath(new URL(`../src/${path}`, import.meta.url)));
      const script = join(dir, "lose.mts");
      // openStore as serve() calls it, then the thread dies under it.
      writeFileSync(
        script,
        `import { openStore } from ${src("process/startup.ts")};
import { pgliteThreadOf } from ${src("db/pglite-thread.ts")};
const config = { databaseUrl: null, dataDir: ${JSON.stringify(join(dir, "data"))}, dbLockTimeoutMs: 2000, dbConnectTimeoutSec: 1 };
// What the loss uses of the server's pino logger: a fatal line, and a flush before the exit.
const log = {
  fatal: (fields, msg) => console.log(JSON.stringify({ level: 60, ...fields, msg })),
  flush: (done) => done(),
};
const store = await openStore(config, log, undefined, { embeddedThread: true });
await store.db.query("SELECT 1");
console.error("opened");
await pgliteThreadOf(store.db).terminate();
setTimeout(() => { console.error("still running"); process.exit(7); }, 10_000);
`,
      );
      const run = spawnSync(process.execPath, ["--import", "tsx", script], {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        encoding: "utf8",
        timeout: 60_000,
      });
      assert.match(run.stderr, /opened/, run.stderr);
      assert.equal(run.status, 1, `${run.stdout}\n${run.stderr}`);
      const fatal = run.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { level: number; msg: string })
        .find((l) => l.level === 60);
      assert.equal(fatal?.msg, "the embedded database's thread stopped");
      assert.equal(existsSync(join(dir, "data", LOCK_FILE)), false, "the lock is released");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
