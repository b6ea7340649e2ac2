/**
 * Database functions live one per file in src/db/functions/ and are re-applied when a file
 * changes; migrations hold table changes only, so no function body is ever copied into a new
 * migration.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { authIdKey, bytes, projectAddressKey, projectIdsAbove, projectKey } from "../src/db/bytes.ts";
import { migrate } from "../src/db/migrate.ts";
import { openTestDb, type TestDb } from "./support/app.ts";

const DB_DIR = new URL("../src/db/", import.meta.url);
const sqlFiles = (dir: string) =>
  readdirSync(new URL(dir, DB_DIR))
    .filter((f) => f.endsWith(".sql"))
    .sort();
const read = (dir: string, file: string) =>
  readFileSync(new URL(`${dir}${file}`, DB_DIR), "utf8")
    .split("\n")
    .filter((line) => !/^\s*--/.test(line))
    .join("\n");

// One migrated store for the tests below that need a database.
let store: TestDb;
before(async () => {
  store = await openTestDb();
});
after(async () => {
  await store.drop();
});

describe("database functions in files of their own", () => {
  it("no migration defines a function or a trigger", () => {
    for (const file of sqlFiles("migrations/")) {
      const sql = read("migrations/", file);
      assert.doesNotMatch(sql, /CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|TRIGGER|PROCEDURE)/i, file);
    }
  });

  it("each file defines the function it is named after, and only triggers that call it", () => {
    const files = sqlFiles("functions/");
    assert.ok(files.length > 20, "the functions are there");
    for (const file of files) {
      const name = file.replace(/\.sql$/, "");
      const sql = read("functions/", file);
      const functions = [...sql.matchAll(/CREATE\s+OR\s+REPLACE\s+FUNCTION\s+([a-z_0-9]+)/gi)].map(
        (m) => m[1],
      );
      assert.deepEqual(functions, [name], `${file} defines ${name} alone, with CREATE OR REPLACE`);
      assert.doesNotMatch(sql, /CREATE\s+FUNCTION/i, file);
      for (const trigger of sql.matchAll(
        /CREATE\s+(OR\s+REPLACE\s+)?TRIGGER[\s\S]*?EXECUTE\s+FUNCTION\s+([a-z_0-9]+)/gi,
      )) {
        assert.ok(trigger[1], `${file}: a trigger is created with CREATE OR REPLACE`);
        assert.equal(trigger[2], name, `${file}: its triggers call ${name}`);
      }
    }
  });
});

describe("one writer per money table", () => {
  /** The function files and TypeScript sources under src/ whose text matches `writes`. */
  const writersOf = (writes: RegExp) =>
    [
      ...sqlFiles("functions/").map((f) => ({ file: `src/db/functions/${f}`, text: read("functions/", f) })),
      ...sourceFiles(new URL("../src/", import.meta.url)).map((file) => ({
        file,
        text: readFileSync(file, "utf8"),
      })),
    ]
      .filter((f) => writes.test(f.text))
      .map((f) => f.file);

  it("daily_usage is written by daily_usage_adjust.sql alone, in SQL and in TypeScript alike", () => {
    assert.deepEqual(writersOf(/(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+daily_usage\b/i), [
      "src/db/functions/daily_usage_adjust.sql",
    ]);
  });

  it("ledger entries and the tanks' balances are written by ledger_move.sql alone", () => {
    assert.deepEqual(
      writersOf(/(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(ledger_entries|gas_tanks)\b|gas_tank_balance\s*=/i),
      ["src/db/functions/ledger_move.sql"],
    );
  });
});

/** Every TypeScript file under a folder, by path relative to the repository. */
function sourceFiles(dir: URL): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

describe("the migrator and the function files", () => {
  it("a migrated store applies nothing again", async () => {
    assert.deepEqual(await migrate(store.db), { migrations: [], functions: [], newer: [] });
  });

  it("a function file whose content changed is applied again, alone", async () => {
    // What the store holds for one file no longer matches it, as after an edit of the file.
    await store.db.query("UPDATE schema_functions SET sha256 = 'stale' WHERE name = 'emit_event.sql'");
    await store.db.query("DROP FUNCTION emit_event(text, text, jsonb)");
    assert.deepEqual(await migrate(store.db), { migrations: [], functions: ["emit_event.sql"], newer: [] });
    const [row] = await store.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'emit_event' AND pronamespace = current_schema()::regnamespace",
    );
    assert.equal(row?.n, 1, "the function is back");
  });

  it("a database a newer release migrated keeps that release's functions", async () => {
    // During an upgrade an instance of the previous release may start after the new one migrated:
    // its function files are older than what is applied, and applying them would put back what
    // the newer release changed or dropped (migration 055 drops a trigger the older files create).
    await store.db.query("INSERT INTO schema_migrations (version) VALUES ('999_from_a_newer_release.sql')");
    await store.db.query("UPDATE schema_functions SET sha256 = 'newer' WHERE name = 'emit_event.sql'");
    try {
      assert.deepEqual(await migrate(store.db), {
        migrations: [],
        functions: [],
        newer: ["999_from_a_newer_release.sql"],
      });
      const [kept] = await store.db.query<{ sha256: string }>(
        "SELECT sha256 FROM schema_functions WHERE name = 'emit_event.sql'",
      );
      assert.equal(kept?.sha256, "newer", "left as the newer release applied it");
    } finally {
      await store.db.query("DELETE FROM schema_migrations WHERE version = '999_from_a_newer_release.sql'");
    }
    // This release's own database again: its file is applied.
    assert.deepEqual(await migrate(store.db), { migrations: [], functions: ["emit_event.sql"], newer: [] });
  });

  it("every function file is recorded with its digest, and every function the files define exists", async () => {
    const rows = await store.db.query<{ name: string }>("SELECT name FROM schema_functions ORDER BY name");
    assert.deepEqual(
      rows.map((r) => r.name),
      sqlFiles("functions/"),
    );
    const defined = await store.db.query<{ proname: string }>(
      "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace ORDER BY proname",
    );
    assert.deepEqual(
      defined.map((r) => r.proname),
      sqlFiles("functions/").map((f) => f.replace(/\.sql$/, "")),
    );
  });
});

describe("the sponsorships' address indexes and the reads that need them", () => {
  // An index on an expression serves only a query that repeats the expression (db/bytes.ts).
  it("a reversal's re-read of a sender writes the key as the helper does (migration 045)", () => {
    const sql = read("functions/", "rollup_refresh_senders.sql").replace(/\s+/g, " ");
    for (const side of ["s", "t"]) {
      assert.ok(
        sql.includes(projectAddressKey(`${side}.project_id`, `${side}.sender`)),
        `rollup_refresh_senders.sql keys ${side}.sender by project and address`,
      );
    }
  });

  it("the key the reads write is the one the indexes hold", async () => {
    for (const [column, index] of [
      ["sender", "sponsorships_by_project_sender"],
      ["target", "sponsorships_by_project_target"],
    ]) {
      const plan = await store.db.transaction(async (tx) => {
        // An empty table: only a usable index keeps the planner from scanning it.
        await tx.query("SET LOCAL enable_seqscan = off");
        const rows = await tx.query<{ "QUERY PLAN": string }>(
          `EXPLAIN SELECT id FROM sponsorships WHERE project_id = 'p'
             AND ${projectAddressKey("project_id", column!)} = ${projectAddressKey("'p'", `'0x${"ab".repeat(20)}'`)}`,
        );
        return rows.map((r) => r["QUERY PLAN"]).join("\n");
      });
      assert.match(plan, new RegExp(`\\b${index}\\b`), plan);
    }
  });

  it("so do the keys of the project and of the authorization id (migrations 048 and 049)", async () => {
    const id = `'0x${"cd".repeat(32)}'`;
    for (const [query, index] of [
      [
        `SELECT id FROM sponsorships WHERE ${authIdKey("auth_id")} = ${authIdKey(bytes(id))}`,
        "sponsorships_by_auth_key",
      ],
      [
        `SELECT id FROM sponsorships WHERE ${projectKey("project_id")} = ${projectKey("'p'")} ORDER BY seq DESC LIMIT 5`,
        "sponsorships_by_project_key_seq",
      ],
      [`SELECT id FROM ledger_entries WHERE ${projectIdsAbove("'p'", "5")}`, "ledger_entries_by_project_key"],
    ]) {
      const plan = await store.db.transaction(async (tx) => {
        await tx.query("SET LOCAL enable_seqscan = off");
        const rows = await tx.query<{ "QUERY PLAN": string }>(`EXPLAIN ${query}`);
        return rows.map((r) => r["QUERY PLAN"]).join("\n");
      });
      assert.match(plan, new RegExp(`\\b${index}\\b`), plan);
    }
    // The functions that look an id up do it through the key's one definition: none writes the
    // expression again (auth_id_key.sql holds it; the index's own, migration 048, is pinned above by
    // the plan).
    const lookups = sqlFiles("functions/").filter((f) => /\bauth_id_key\(/.test(read("functions/", f)));
    assert.deepEqual(lookups.sort(), [
      "auth_id_key.sql",
      "policy_usage_adjust.sql",
      "release_sponsorship.sql",
      "settle_sponsorship.sql",
    ]);
    for (const file of sqlFiles("functions/").filter((f) => f !== "auth_id_key.sql")) {
      assert.doesNotMatch(read("functions/", file), /encode\(substr\([^)]*,\s*1,\s*8\)/, file);
    }
  });

  it("a lookup by authorization id inside the functions uses the index too (the key is inlined)", async () => {
    // settle_sponsorship's statement, as plpgsql runs it: its parameter a generic one.
    const plan = await store.db.transaction(async (tx) => {
      await tx.query("SET LOCAL enable_seqscan = off");
      await tx.query(
        "PREPARE by_auth(bytea) AS SELECT id FROM sponsorships WHERE auth_id_key(auth_id) = auth_id_key($1) AND auth_id = $1",
      );
      await tx.query("SET LOCAL plan_cache_mode = force_generic_plan");
      const rows = await tx.query<{ "QUERY PLAN": string }>(
        `EXPLAIN EXECUTE by_auth('\\x${"cd".repeat(32)}')`,
      );
      await tx.query("DEALLOCATE by_auth");
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    assert.match(plan, /\bsponsorships_by_auth_key\b/, plan);
  });
});
