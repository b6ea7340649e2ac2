/**
 * The tests' own stores (test/support/app.ts): a store a test gives back is reused by the next
 * test of the same process only as a fresh one would be, empty and with its sequences at their
 * start, and never when its test changed the schema. A leak here would let one test file see
 * another's rows.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Queryable } from "../src/db/db.ts";
import { openTestDb, seedProject, startTestApp } from "./support/app.ts";

async function count(db: Queryable, table: string): Promise<number> {
  const rows = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]!.n;
}

async function currentSchema(db: Queryable): Promise<string> {
  return (await db.query<{ s: string }>("SELECT current_schema() AS s"))[0]!.s;
}

describe("test stores given back", () => {
  it("come back empty, their sequences at the start, the migrator's records kept", async () => {
    const a = await startTestApp();
    await seedProject(a);
    const first = await a.db.query<{ id: number }>("SELECT id FROM organizations");
    const index = await a.db.query<{ i: number }>("SELECT nextval('funding_derivation_index')::int AS i");
    const migrations = await count(a.db, "schema_migrations");
    const aSchema = await currentSchema(a.db);
    await a.close();

    const b = await startTestApp();
    // The same store (PGlite) or schema (PostgreSQL), not a new one: otherwise this test proves nothing.
    if (process.env.DATABASE_URL) assert.equal(await currentSchema(b.db), aSchema);
    else assert.equal(b.db, a.db);
    for (const table of [
      "organizations",
      "projects",
      "api_keys",
      "developers",
      "ledger_entries",
      "event_outbox",
    ])
      assert.equal(await count(b.db, table), 0, `${table} is empty`);
    assert.equal(await count(b.db, "schema_migrations"), migrations);
    await seedProject(b);
    assert.deepEqual(await b.db.query<{ id: number }>("SELECT id FROM organizations"), first);
    assert.deepEqual(
      await b.db.query<{ i: number }>("SELECT nextval('funding_derivation_index')::int AS i"),
      index,
      "the deposit address index starts again (a sequence no table owns)",
    );
    await b.close();
  });

  it("are not reused once their test changed the schema", async () => {
    const altered = await openTestDb();
    await altered.db.query("ALTER TABLE projects RENAME TO projects_elsewhere");
    await altered.drop();
    const next = await openTestDb();
    try {
      assert.notEqual(next.db, altered.db);
      if (altered.schema !== null) assert.notEqual(next.schema, altered.schema);
      assert.equal(await count(next.db, "projects"), 0);
    } finally {
      await next.drop();
    }
  });
});
