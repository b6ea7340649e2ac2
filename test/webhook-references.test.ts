/**
 * Webhook deliveries and attempts name their endpoint, event and delivery without foreign keys
 * since migration 057 (issue 22): each INSERT statement checks all its rows with one query, and
 * deleting endpoints, deliveries or events deletes what names them with one statement. What the
 * keys guaranteed still holds: no delivery or attempt names a row that does not exist, including
 * when an endpoint is deleted while an event for it is being written.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Db, Queryable } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { forgetFinishedDeliveries } from "../src/retention/webhooks.ts";
import { openTestDb, seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { foreignKeysOf, isForeignKeyViolation } from "./support/references.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

async function endpointOf(
  db: Queryable,
  projectId: string,
  url = "https://hooks.example.com/x",
): Promise<number> {
  const [row] = await db.query<{ id: number }>(
    `INSERT INTO webhook_endpoints (project_id, url, event_types, secret)
     VALUES ($1, $2, '{sponsorship.sponsored}', 'v1:k:sealed:secret') RETURNING id::int AS id`,
    [projectId, url],
  );
  return row!.id;
}

/** Writes `n` events of the project in one statement (the fan-out makes their deliveries). */
async function emit(db: Queryable, projectId: string, n: number): Promise<void> {
  await db.query(
    `INSERT INTO event_outbox (project_id, type, payload)
     SELECT $1, 'sponsorship.sponsored', jsonb_build_object(
         'authorizationId', '0x' || lpad(to_hex(g), 64, '0'), 'chainId', 14601, 'mode', 'call',
         'sender', '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', 'target', '0x5fbdb2315678afecb367f032d93f642f64180aa3',
         'selector', '0xa0712d68', 'calls', jsonb_build_array(jsonb_build_object(
           'target', '0x5fbdb2315678afecb367f032d93f642f64180aa3', 'selector', '0xa0712d68')),
         'maxTotalGas', '100000', 'maxGasCost', '1000', 'validAfter', 1800000000, 'validUntil', 1800000300,
         'sponsoredAt', now())
     FROM generate_series(1, $2) g`,
    [projectId, n],
  );
}

async function counts(db: Queryable, endpointId: number): Promise<{ deliveries: number; attempts: number }> {
  const [row] = await db.query<{ deliveries: number; attempts: number }>(
    `SELECT (SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1)::int AS deliveries,
       (SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
        WHERE d.endpoint_id = $1)::int AS attempts`,
    [endpointId],
  );
  return row!;
}

/** Logs one attempt per delivery of the endpoint, as the worker's record does. */
async function attemptAll(db: Queryable, endpointId: number): Promise<void> {
  await db.query(
    `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, latency_ms, status_code)
     SELECT id, 1, now(), 5, 200 FROM webhook_deliveries WHERE endpoint_id = $1`,
    [endpointId],
  );
}

async function orphans(db: Queryable): Promise<{ deliveries: number; attempts: number }> {
  const [row] = await db.query<{ deliveries: number; attempts: number }>(
    `SELECT (SELECT count(*) FROM webhook_deliveries d
             WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id)
                OR NOT EXISTS (SELECT 1 FROM event_outbox ev WHERE ev.id = d.event_id))::int AS deliveries,
       (SELECT count(*) FROM webhook_attempts a
        WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id))::int AS attempts`,
  );
  return row!;
}

describe("the references of webhook deliveries and attempts (migration 057)", () => {
  it("refuses a delivery of a missing endpoint or event, and an attempt of a missing delivery", async () => {
    const p = await seedProject(t);
    const endpoint = await endpointOf(t.db, p.projectId);
    await emit(t.db, p.projectId, 3);
    assert.equal((await counts(t.db, endpoint)).deliveries, 3);
    const [event] = await t.db.query<{ id: number }>("SELECT max(id)::int AS id FROM event_outbox");
    await assert.rejects(
      t.db.query("INSERT INTO webhook_deliveries (endpoint_id, event_id) VALUES ($1, $2)", [
        987_654_321,
        event!.id,
      ]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      t.db.query("INSERT INTO webhook_deliveries (endpoint_id, event_id) VALUES ($1, $2)", [
        endpoint,
        987_654_321,
      ]),
      isForeignKeyViolation,
    );
    await assert.rejects(
      t.db.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, latency_ms)
         SELECT x, 1, now(), 1 FROM unnest($1::bigint[]) x`,
        [[987_654_321]],
      ),
      isForeignKeyViolation,
    );
    assert.deepEqual(await orphans(t.db), { deliveries: 0, attempts: 0 });
  });

  it("deletes an endpoint's deliveries and their attempts with it, and no one else's", async () => {
    const p = await seedProject(t);
    const gone = await endpointOf(t.db, p.projectId, "https://hooks.example.com/gone");
    const kept = await endpointOf(t.db, p.projectId, "https://hooks.example.com/kept");
    await emit(t.db, p.projectId, 4);
    await attemptAll(t.db, gone);
    await attemptAll(t.db, kept);
    await t.db.query("DELETE FROM webhook_endpoints WHERE id = $1", [gone]);
    assert.deepEqual(await counts(t.db, gone), { deliveries: 0, attempts: 0 });
    assert.deepEqual(await counts(t.db, kept), { deliveries: 4, attempts: 4 });
    assert.deepEqual(await orphans(t.db), { deliveries: 0, attempts: 0 });
  });

  it("deletes finished deliveries' attempts with them (retention), and an event's deliveries with it", async () => {
    const p = await seedProject(t);
    const endpoint = await endpointOf(t.db, p.projectId);
    await emit(t.db, p.projectId, 5);
    await attemptAll(t.db, endpoint);
    await t.db.query(
      `UPDATE webhook_deliveries SET status = 'succeeded', completed_at = now() - interval '40 days'
       WHERE endpoint_id = $1 AND id IN (SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY id LIMIT 2)`,
      [endpoint],
    );
    assert.equal(await forgetFinishedDeliveries(t.db, Date.now(), 30, 100), 2);
    assert.deepEqual(await counts(t.db, endpoint), { deliveries: 3, attempts: 3 });
    await t.db.query(
      `DELETE FROM event_outbox WHERE id = (SELECT max(event_id) FROM webhook_deliveries WHERE endpoint_id = $1)`,
      [endpoint],
    );
    assert.deepEqual(await counts(t.db, endpoint), { deliveries: 2, attempts: 2 });
    assert.deepEqual(await orphans(t.db), { deliveries: 0, attempts: 0 });
  });

  it("logs no attempt of a delivery deleted since its claim, and records the others", async () => {
    const p = await seedProject(t);
    const gone = await endpointOf(t.db, p.projectId, "https://hooks.example.com/gone");
    const kept = await endpointOf(t.db, p.projectId, "https://hooks.example.com/kept");
    await emit(t.db, p.projectId, 1);
    const ids = async (endpoint: number) =>
      (
        await t.db.query<{ id: number }>(
          "SELECT id::int AS id FROM webhook_deliveries WHERE endpoint_id = $1",
          [endpoint],
        )
      ).map((r) => r.id);
    const [goneId] = await ids(gone);
    const [keptId] = await ids(kept);
    await t.db.query("DELETE FROM webhook_endpoints WHERE id = $1", [gone]);
    const moved = await t.db.query<{ moved: boolean }>(
      `SELECT moved FROM webhook_record_attempts($1::bigint[], '{1,1}', '{succeeded,succeeded}', '{200,200}', '{NULL,NULL}',
         '{NULL,NULL}', ARRAY[now(), now()], '{3,3}', '{0,0}')`,
      [[goneId, keptId]],
    );
    assert.deepEqual(
      moved.map((m) => m.moved),
      [false, true],
    );
    assert.deepEqual(await counts(t.db, kept), { deliveries: 1, attempts: 1 });
    assert.deepEqual(await orphans(t.db), { deliveries: 0, attempts: 0 });
  });

  it("an endpoint deleted while an event for it is written takes the event's delivery with it", async () => {
    const p = await seedProject(t);
    const endpoint = await endpointOf(t.db, p.projectId);
    let written!: () => void;
    const wrote = new Promise<void>((resolve) => {
      written = resolve;
    });
    // The event's transaction stays open after its fan-out; the endpoint's deletion starts then.
    const writing = t.db.transaction(async (tx) => {
      await emit(tx, p.projectId, 2);
      written();
      await new Promise((r) => setTimeout(r, 300));
    });
    await wrote;
    const deleting = t.db.query("DELETE FROM webhook_endpoints WHERE id = $1", [endpoint]);
    await Promise.all([writing, deleting]);
    assert.deepEqual(await counts(t.db, endpoint), { deliveries: 0, attempts: 0 });
    assert.deepEqual(await orphans(t.db), { deliveries: 0, attempts: 0 });
  });
});

describe("migration 057 on a database that had the foreign keys", () => {
  let db: Db;
  let drop: () => Promise<void>;
  before(async () => {
    ({ db, drop } = await openTestDb({ until: "056_references_per_statement.sql" }));
  });
  after(async () => {
    await drop();
  });

  it("drops the three keys and keeps the rows, their checks and their cascades", async () => {
    const keys = () => foreignKeysOf(db, ["webhook_deliveries", "webhook_attempts"]);
    assert.deepEqual(await keys(), [
      "webhook_attempts_delivery_id_fkey",
      "webhook_deliveries_endpoint_id_fkey",
      "webhook_deliveries_event_id_fkey",
    ]);
    await migrate(db);
    assert.deepEqual(await keys(), []);
  });
});
