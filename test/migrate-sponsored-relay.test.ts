/**
 * Migration 055 (issue 22) moves sponsorship.sponsored out of the reservation: an upgraded database
 * gets a relay cursor for each project an enabled endpoint already subscribes (by name or with
 * "*"), at the project's last sequence number, so that what was sponsored before the upgrade is
 * not reported again; the trigger that wrote the events inside the reservation is gone.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { relaySponsoredEvents } from "../src/webhooks/relay.ts";
import { openTestDb } from "./support/app.ts";

const BEFORE = "054_open_reservations.sql";

let db: Db;
let drop: () => Promise<void>;

before(async () => {
  ({ db, drop } = await openTestDb({ until: BEFORE }));
  const [org] = await db.query<{ id: string }>(
    "INSERT INTO organizations (name, slug) VALUES ('Studio', 'studio') RETURNING id::text",
  );
  // Four projects that sponsored before: subscribed by name, subscribed to everything, subscribed
  // through a paused endpoint only, and subscribed to another type.
  const projects: [string, number, string[], boolean][] = [
    ["prj_named", 7, ["sponsorship.sponsored"], true],
    ["prj_star", 3, ["*"], true],
    ["prj_paused", 5, ["sponsorship.sponsored"], false],
    ["prj_other", 9, ["balance.low"], true],
  ];
  for (const [id, seq, types, enabled] of projects) {
    await db.query(
      `INSERT INTO projects (id, org_id, owner, name, deposit_address, sponsorships_seq)
       VALUES ($1, $2, 'owner', 'Game', $3, $4)`,
      [id, org!.id, `0x${seq.toString().repeat(40)}`, seq],
    );
    await db.query(
      `INSERT INTO webhook_endpoints (project_id, url, event_types, secret, enabled)
       VALUES ($1, 'https://hooks.example.com/x', $2, 'v1:k:sealed:secret', $3)`,
      [id, types, enabled],
    );
  }
  await migrate(db);
});
after(async () => {
  await drop();
});

describe("migration 055: the sponsorship.sponsored relay", () => {
  it("starts a cursor at the last sequence number of each project an enabled endpoint subscribes", async () => {
    const cursors = await db.query<{ project_id: string; last_seq: string }>(
      "SELECT project_id, last_seq::text FROM sponsored_event_cursors ORDER BY project_id",
    );
    assert.deepEqual(
      cursors.map((c) => [c.project_id, c.last_seq]),
      [
        ["prj_named", "7"],
        ["prj_star", "3"],
      ],
    );
    assert.equal(await relaySponsoredEvents(db), 0, "nothing sponsored before the upgrade is reported");
  });

  it("drops the trigger that wrote the events inside the reservation", async () => {
    const [row] = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_trigger WHERE tgname = 'sponsorships_sponsored_event'",
    );
    assert.equal(row?.n, 0);
    const [fn] = await db.query<{ gone: boolean }>(
      "SELECT to_regproc('sponsorships_emit_sponsored') IS NULL AS gone",
    );
    assert.equal(fn?.gone, true);
  });

  it("a project that subscribes after the upgrade gets its cursor then", async () => {
    await db.query(`UPDATE webhook_endpoints SET enabled = true WHERE project_id = 'prj_paused'`);
    const [row] = await db.query<{ last_seq: string }>(
      "SELECT last_seq::text FROM sponsored_event_cursors WHERE project_id = 'prj_paused'",
    );
    assert.equal(row?.last_seq, "5");
  });
});
