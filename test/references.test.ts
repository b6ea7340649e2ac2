/**
 * Sponsorships and ledger entries name their project (and a sponsorship its API key) without
 * foreign keys since migration 056 (issue 22): each INSERT statement checks all its rows with one
 * query, and projects and keys are never deleted. The guarantee is the keys' own: no row names a
 * project or key that does not exist, or a key of another project; nothing they name goes away.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Db, Queryable } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { reserveMany } from "../src/ledger/ledger.ts";
import { fundedProject, openTestDb, startTestApp, type TestApp } from "./support/app.ts";
import { MONEY_SELECTOR, MONEY_TARGET, mintReservation } from "./support/money.ts";
import { keyIdOf } from "./support/redis-load.ts";
import { foreignKeysOf, isForeignKeyViolation } from "./support/references.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

/** Scans of `table`, sequential and through any of its indexes, so far in the current transaction. */
async function scansOf(tx: Queryable, table: string): Promise<number> {
  const [row] = await tx.query<{ n: number }>(
    `SELECT (pg_stat_get_xact_numscans($1::regclass)
       + COALESCE((SELECT sum(pg_stat_get_xact_numscans(i.indexrelid)) FROM pg_index i WHERE i.indrelid = $1::regclass), 0))::int AS n`,
    [table],
  );
  return row!.n;
}

/** A sponsorship row as a direct insert writes it, for `projectId` and `keyId`. */
function sponsorshipRow(projectId: string, keyId: number | null): unknown[] {
  return [`\\x${randomBytes(32).toString("hex")}`, projectId, keyId];
}

const INSERT_SPONSORSHIPS = `INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
    estimated_gas, max_gas_cost, valid_after, valid_until, seq)
  SELECT x.auth_id::bytea, x.project_id, x.key_id, 14601, '0x70997970c51812dc3a010c7d01b50e0d17dc79c8',
    '${MONEY_TARGET}', '${MONEY_SELECTOR}', 100000, 1000, 1800000000, 1800000300, 1000000 + x.n
  FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS x(auth_id, project_id, key_id, n)`;

async function insertSponsorships(db: Queryable, rows: unknown[][]): Promise<void> {
  await db.query(INSERT_SPONSORSHIPS, [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2])]);
}

async function sponsorshipCount(projectIds: string[]): Promise<number> {
  const [row] = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM sponsorships WHERE project_id = ANY ($1::text[])",
    [projectIds],
  );
  return row!.n;
}

describe("the references of sponsorships and ledger entries (migration 056)", () => {
  it("checks a batch of 25 authorizations' key with one lookup, not one per row", async () => {
    const p = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 10n ** 18n);
    const keyId = await keyIdOf(t.db, p.projectId);
    const batch = Array.from({ length: 25 }, () => ({
      ...mintReservation(p.projectId, 1000n),
      apiKeyId: keyId,
    }));
    await t.db.transaction(async (tx) => {
      const keysBefore = await scansOf(tx, "api_keys");
      const projectsBefore = await scansOf(tx, "projects");
      const outcomes = await reserveMany(tx, p.projectId, batch);
      assert.ok(
        outcomes.every((o) => o.kind === "reserved"),
        JSON.stringify(outcomes),
      );
      // A foreign key looked the key up once per sponsorship (25), and the project twice per
      // authorization (its sponsorship and its ledger entry: 50 more than the reservation's own reads).
      assert.equal((await scansOf(tx, "api_keys")) - keysBefore, 1);
      assert.ok((await scansOf(tx, "projects")) - projectsBefore < 15);
    });
    assert.equal(await sponsorshipCount([p.projectId]), 25);
  });

  it("refuses a statement with a row of a missing project, or with a key of another project, whole", async () => {
    const a = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 0n);
    const b = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 0n);
    const keyA = await keyIdOf(t.db, a.projectId);
    const keyB = await keyIdOf(t.db, b.projectId);
    const missing = `p-${randomBytes(4).toString("hex")}`;
    await assert.rejects(
      insertSponsorships(t.db, [sponsorshipRow(a.projectId, keyA), sponsorshipRow(missing, null)]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      insertSponsorships(t.db, [sponsorshipRow(a.projectId, keyA), sponsorshipRow(a.projectId, keyB)]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      insertSponsorships(t.db, [sponsorshipRow(a.projectId, 987_654_321)]),
      isForeignKeyViolation,
    );
    assert.equal(await sponsorshipCount([a.projectId, b.projectId, missing]), 0);
    // Rows that name their own project and key, or no key, are written.
    await insertSponsorships(t.db, [sponsorshipRow(a.projectId, keyA), sponsorshipRow(b.projectId, null)]);
    assert.equal(await sponsorshipCount([a.projectId, b.projectId]), 2);
  });

  it("refuses a ledger entry of a missing project", async () => {
    const missing = `p-${randomBytes(4).toString("hex")}`;
    await assert.rejects(
      t.db.query("SELECT ledger_move($1, 14601, 'deposit', ARRAY[5]::numeric[], ARRAY['test:missing'])", [
        missing,
      ]),
      isForeignKeyViolation,
    );
    const [row] = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE project_id = $1",
      [missing],
    );
    assert.equal(row!.n, 0);
  });

  it("never deletes a project or an API key, nor changes their ids or a sponsorship's owner", async () => {
    const p = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 10n ** 18n);
    const other = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 0n);
    const keyId = await keyIdOf(t.db, p.projectId);
    const r = { ...mintReservation(p.projectId, 1000n), apiKeyId: keyId };
    assert.deepEqual(await reserveMany(t.db, p.projectId, [r]), [{ kind: "reserved" }]);
    await assert.rejects(t.db.query("DELETE FROM api_keys WHERE id = $1", [keyId]), isForeignKeyViolation);
    await assert.rejects(
      t.db.query("DELETE FROM projects WHERE id = $1", [p.projectId]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      t.db.query("UPDATE projects SET id = $2 WHERE id = $1", [p.projectId, `${p.projectId}-x`]),
      isForeignKeyViolation,
    );
    const auth = r.authId.slice(2);
    await assert.rejects(
      t.db.query("UPDATE sponsorships SET project_id = $2 WHERE auth_id = decode($1, 'hex')", [
        auth,
        other.projectId,
      ]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      t.db.query("UPDATE sponsorships SET api_key_id = NULL WHERE auth_id = decode($1, 'hex')", [auth]),
      isForeignKeyViolation,
    );
    // Settlement's updates are untouched: the sponsorship's status and costs change.
    await t.db.query(
      "UPDATE sponsorships SET status = 'expired', project_id = project_id WHERE auth_id = decode($1, 'hex')",
      [auth],
    );
    const [row] = await t.db.query<{ status: string; project_id: string }>(
      "SELECT status, project_id FROM sponsorships WHERE auth_id = decode($1, 'hex')",
      [auth],
    );
    assert.deepEqual({ ...row }, { status: "expired", project_id: p.projectId });
  });
});

describe("migration 056 on a database that had the foreign keys", () => {
  let db: Db;
  let drop: () => Promise<void>;
  before(async () => {
    ({ db, drop } = await openTestDb({ until: "055_sponsored_event_relay.sql" }));
  });
  after(async () => {
    await drop();
  });

  it("drops the three keys and checks the same references per statement", async () => {
    const [org] = await db.query<{ id: string }>(
      "INSERT INTO organizations (name, slug) VALUES ('Studio', 'studio') RETURNING id::text",
    );
    await db.query(
      `INSERT INTO projects (id, org_id, owner, name, deposit_address)
       VALUES ('prj_old', $1, 'owner', 'Game', '0x${"1".repeat(40)}')`,
      [org!.id],
    );
    const [key] = await db.query<{ id: number }>(
      `INSERT INTO api_keys (project_id, digest, key_preview, rate_limit, scopes)
       VALUES ('prj_old', '${"a".repeat(64)}', 'gss_live_aaaa', 600, '{sponsor}') RETURNING id::int AS id`,
    );
    await insertSponsorships(db, [sponsorshipRow("prj_old", key!.id)]);
    const keys = () => foreignKeysOf(db, ["sponsorships", "ledger_entries"]);
    assert.deepEqual(await keys(), [
      "ledger_entries_project_id_fkey",
      "sponsorships_api_key_id_fkey",
      "sponsorships_project_id_fkey",
    ]);

    await migrate(db);
    assert.deepEqual(await keys(), []);
    const [kept] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM sponsorships");
    assert.equal(kept!.n, 1, "the rows written before the upgrade stay");
    await assert.rejects(
      insertSponsorships(db, [sponsorshipRow("prj_missing", null)]),
      isForeignKeyViolation,
    );
    await assert.rejects(db.query("DELETE FROM projects WHERE id = 'prj_old'"), isForeignKeyViolation);
  });
});
