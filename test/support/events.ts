/**
 * Holds the events a store has written to the registry of src/webhooks/events.ts: each event's
 * type must be registered and its payload must match that type's schema, key for key. Test apps
 * run it on their own store when they close, so every event any test causes is checked.
 */
import assert from "node:assert/strict";
import AjvModule from "ajv";
import formatsModule from "ajv-formats";
import type { Db, Queryable } from "../../src/db/db.ts";
import { EVENTS, type EventType } from "../../src/webhooks/events.ts";

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

let validators: Map<string, ReturnType<InstanceType<typeof Ajv>["compile"]>> | null = null;
function validatorFor(type: string) {
  if (!validators) {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    validators = new Map(Object.entries(EVENTS).map(([t, e]) => [t, ajv.compile(e.payload)]));
  }
  return validators.get(type);
}

/** Asserts that every event in the store is of a registered type, with a payload of that type. */
export async function assertEventsMatchRegistry(db: Db): Promise<Set<EventType>> {
  const rows = await db.query<{ type: string; payload: unknown }>(
    "SELECT type, payload FROM event_outbox ORDER BY id",
  );
  const seen = new Set<EventType>();
  for (const row of rows) {
    const validate = validatorFor(row.type);
    assert.ok(validate, `event type ${row.type} is not in the registry (src/webhooks/events.ts)`);
    const payload = typeof row.payload === "string" ? JSON.parse(row.payload) : row.payload;
    assert.ok(
      validate(payload),
      `a ${row.type} event does not match its payload type: ${JSON.stringify(validate.errors)}\n${JSON.stringify(payload)}`,
    );
    seen.add(row.type as EventType);
  }
  return seen;
}

/**
 * `n` balance.low events of the project, written in one statement by the store's own emit_events
 * (the outbox row, and a delivery per subscribed endpoint by its fan-out trigger), with a payload
 * of the registered shape.
 */
export async function emitBalanceLow(db: Queryable, projectId: string, n: number): Promise<void> {
  await db.query(
    `SELECT emit_events('balance.low', array_fill($1::text, ARRAY[$2::int]),
       array_fill(jsonb_build_object('chainId', 14601, 'balance', '1', 'threshold', '2'), ARRAY[$2::int]))`,
    [projectId, n],
  );
}

/**
 * Rows of webhook_deliveries read so far in this transaction, as PostgreSQL counts them: those its
 * sequential scans returned and those its index scans fetched from the table, whether or not a
 * filter then dropped them. Index entries of row versions that are already dead are not counted
 * (a store without vacuum keeps many): what a statement reads of the live table is the figure.
 * Read it before and after a statement, in its transaction.
 */
export async function deliveriesRead(tx: Queryable): Promise<number> {
  const [row] = await tx.query<{ n: number }>(
    `SELECT (pg_stat_get_xact_tuples_returned('webhook_deliveries'::regclass)
       + pg_stat_get_xact_tuples_fetched('webhook_deliveries'::regclass))::int AS n`,
  );
  return row!.n;
}

/**
 * Runs `body` in a transaction of `db` that is then rolled back, and answers what it returned: a
 * statement measured (deliveriesRead) without leaving its effects behind.
 */
export async function rolledBack<T>(db: Db, body: (tx: Queryable) => Promise<T>): Promise<T> {
  let out: { value: T } | null = null;
  await db
    .transaction(async (tx) => {
      out = { value: await body(tx) };
      throw ROLL_BACK;
    })
    .catch((err: unknown) => {
      if (err !== ROLL_BACK) throw err;
    });
  return out!.value;
}

const ROLL_BACK = new Error("rolled back on purpose");
