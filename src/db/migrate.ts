import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Db, Queryable } from "./db.ts";

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));
const FUNCTIONS_DIR = fileURLToPath(new URL("./functions/", import.meta.url));
// Any constant works; it only has to be the same for every instance of the service.
const MIGRATION_LOCK_KEY = 7_146_010;

export interface MigrationResult {
  /** Migration files applied now, in order. */
  migrations: string[];
  /** Function files (re)applied now: new, or changed since they were last applied. */
  functions: string[];
  /**
   * Migrations the database has that this release does not know: a newer release migrated it.
   * Its functions are then left as that release applied them (none is applied here).
   */
  newer: string[];
}

/**
 * Brings the store's schema up to date, in one transaction. Instances starting together
 * serialise on an advisory lock, so re-running is always safe.
 *
 * - migrations/: table changes, each file applied once, in name order.
 * - functions/: one file per database function (with the triggers that call it), each holding
 *   the function's current definition. A file is applied when its content differs from what was
 *   last applied (its SHA-256 is kept in schema_functions), after every pending migration, so a
 *   function is edited in place instead of copied whole into a new migration. Function bodies
 *   are checked when called, not when created, so the files apply in any order. Removing a
 *   function takes a migration with its DROP FUNCTION. A database that a newer release migrated
 *   (it has migrations this release lacks) keeps the functions that release applied.
 */
export async function migrate(db: Db, options: { until?: string } = {}): Promise<MigrationResult> {
  return db.transaction(async (tx) => {
    // Instances starting together take turns on their schema: the one that waits does so for as
    // long as the other's migrations take, not the connection's lock_timeout (seconds, made for
    // requests), and the same wait covers a migration's own table locks against live traffic.
    // Schemas are independent, so the lock is per schema (tests migrate many side by side).
    await tx.query("SET LOCAL lock_timeout = '300s'");
    await tx.query("SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", [MIGRATION_LOCK_KEY]);
    const { applied: migrations, newer } = await applyMigrations(tx, options.until);
    // A newer release migrated this database (instances of two releases side by side during an
    // upgrade): this release's function files are older than what is applied, and applying them
    // would put back what the newer one changed or removed (a trigger dropped by its migration,
    // re-created here, would write its events beside what replaced it). They are left alone.
    // A schema stopped at an earlier migration (a test building yesterday's database) has no
    // functions: today's may name columns it does not have yet.
    const functions = options.until === undefined && newer.length === 0 ? await applyFunctions(tx) : [];
    return { migrations, functions, newer };
  });
}

/** Applies the pending migrations; `newer` lists those the database has and this release lacks. */
async function applyMigrations(
  tx: Queryable,
  until?: string,
): Promise<{ applied: string[]; newer: string[] }> {
  await tx.query(
    `CREATE TABLE IF NOT EXISTS schema_migrations (
       version text PRIMARY KEY,
       applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  const done = new Set(
    (await tx.query<{ version: string }>("SELECT version FROM schema_migrations")).map((r) => r.version),
  );
  const files = sqlFiles(MIGRATIONS_DIR);
  const known = new Set(files);
  const newer = [...done].filter((v) => !known.has(v)).sort();
  const applied: string[] = [];
  for (const file of files) {
    if (until !== undefined && file > until) break;
    if (done.has(file)) continue;
    await run(tx, readFileSync(MIGRATIONS_DIR + file, "utf8"));
    await tx.query("INSERT INTO schema_migrations (version) VALUES ($1)", [file]);
    applied.push(file);
  }
  return { applied, newer };
}

async function applyFunctions(tx: Queryable): Promise<string[]> {
  await tx.query(
    `CREATE TABLE IF NOT EXISTS schema_functions (
       name text PRIMARY KEY,
       sha256 text NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  const current = new Map(
    (await tx.query<{ name: string; sha256: string }>("SELECT name, sha256 FROM schema_functions")).map(
      (r) => [r.name, r.sha256],
    ),
  );
  await tx.query("SET LOCAL check_function_bodies = off");
  const applied: string[] = [];
  for (const file of sqlFiles(FUNCTIONS_DIR)) {
    const sql = readFileSync(FUNCTIONS_DIR + file, "utf8");
    const sha256 = createHash("sha256").update(sql).digest("hex");
    if (current.get(file) === sha256) continue;
    await run(tx, sql);
    await tx.query(
      `INSERT INTO schema_functions (name, sha256) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()`,
      [file, sha256],
    );
    applied.push(file);
  }
  await tx.query("SET LOCAL check_function_bodies = on");
  return applied;
}

function sqlFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort();
}

async function run(tx: Queryable, sql: string): Promise<void> {
  for (const statement of splitStatements(sql)) await tx.query(statement);
}

/** Splits on `;` at line ends, leaving dollar-quoted function bodies whole. */
function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let current = "";
  let inDollar = false;
  for (const line of sql.split("\n")) {
    if (/^\s*--/.test(line)) continue;
    current += `${line}\n`;
    if ((line.match(/\$\$/g) ?? []).length % 2 === 1) inDollar = !inDollar;
    if (!inDollar && /;\s*$/.test(line)) {
      out.push(current.trim());
      current = "";
    }
  }
  if (current.trim()) out.push(current.trim());
  return out;
}
