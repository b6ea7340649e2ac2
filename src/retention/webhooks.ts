import type { Queryable } from "../db/db.ts";

/**
 * Retention of the webhook tables (migrations 007, 009, 016). Without it every event a project's
 * endpoints subscribe to would leave an outbox row, a delivery row per endpoint and that
 * delivery's attempt log behind forever.
 *
 * Two steps, each one short statement over at most `batchSize` rows taken with SKIP LOCKED, so
 * that instances running them together share the work and never wait on each other, on the
 * delivery worker or on a redelivery:
 *
 * 1. A delivery that is finished (`succeeded`, or `failed` after its last attempt) and finished
 *    more than the retention period ago is deleted; its attempt log goes with it (ON DELETE
 *    CASCADE from webhook_attempts). A pending delivery is never touched, however old: it is
 *    still owed to its endpoint (a paused endpoint's deliveries wait for it).
 * 2. An outbox event older than the retention period is deleted once no delivery references it
 *    at all. Deleting an event cascades into its deliveries (ON DELETE CASCADE in 009), so the
 *    condition is stricter than "no pending delivery": a finished delivery that is itself still
 *    within its period keeps its event too, and the delivery log never shows a hole. Every
 *    delivery of an event is written in the event's own transaction (the fan-out trigger), so
 *    no delivery can appear for an event after the statement has looked: the cascade has
 *    nothing to remove.
 *
 * A delivery removed here answers 404 on redelivery, like one that never existed: a redelivery
 * that arrives first makes the row pending again, and the delete no longer matches it.
 */

export const DAY_MS = 86_400_000;

function cutoff(nowMs: number, retentionDays: number): Date {
  return new Date(nowMs - retentionDays * DAY_MS);
}

/**
 * Deletes at most `batchSize` deliveries that finished more than `retentionDays` before `nowMs`,
 * oldest first, with their attempts. Returns how many it deleted: fewer than `batchSize` means
 * none is left (apart from rows another caller holds at that moment).
 */
export async function forgetFinishedDeliveries(
  db: Queryable,
  nowMs: number,
  retentionDays: number,
  batchSize: number,
): Promise<number> {
  // The work list is a range over webhook_deliveries_finished (016). A row that a redelivery made
  // pending after this statement's snapshot is re-checked when it is locked, and left alone.
  // `= ANY (ARRAY(…))` makes the delete a lookup of those ids by primary key; with `IN (…)` the
  // planner may join the list against the whole table instead.
  const [row] = await db.query<{ n: number }>(
    `WITH gone AS (
       DELETE FROM webhook_deliveries WHERE id = ANY (ARRAY(
         SELECT id FROM webhook_deliveries
         WHERE status <> 'pending' AND completed_at < $1
         ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED))
       RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [cutoff(nowMs, retentionDays), batchSize],
  );
  return row?.n ?? 0;
}

/**
 * Where a walk over the expired events stands: the last event examined, by (created_at, id).
 * The time is kept as text to the microsecond, since events of one transaction share it.
 */
export interface OutboxPosition {
  createdAt: string;
  id: string;
}

export interface EventSweep {
  /** Events deleted by this call (at most `batchSize`). */
  removed: number;
  /** Where the next call goes on from; null once the walk reached the newest expired event. */
  next: OutboxPosition | null;
}

/**
 * Examines the next `batchSize` events older than `retentionDays` before `nowMs`, after `after`
 * (null: from the oldest), and deletes those that no delivery references. Events that are still
 * referenced (a pending delivery, or a finished one within its period) are walked past, so
 * however many there are, one call reads at most `batchSize` index entries; passing `next` back
 * in goes on from there, and a null `next` means the walk is through and the next one starts over.
 */
export async function forgetOldEvents(
  db: Queryable,
  nowMs: number,
  retentionDays: number,
  batchSize: number,
  after: OutboxPosition | null = null,
): Promise<EventSweep> {
  const [row] = await db.query<{
    removed: number;
    examined: number;
    last_created_at: string | null;
    last_id: string | null;
  }>(
    `WITH examined AS (
       SELECT id, created_at FROM event_outbox
       WHERE created_at < $1 AND (created_at, id) > ($2::timestamptz, $3::bigint)
       ORDER BY created_at, id LIMIT $4),
     gone AS (
       DELETE FROM event_outbox WHERE id = ANY (ARRAY(
         SELECT e.id FROM event_outbox e
         WHERE e.id = ANY (ARRAY(SELECT id FROM examined))
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
         FOR UPDATE SKIP LOCKED))
       RETURNING 1),
     last AS (SELECT id, created_at FROM examined ORDER BY created_at DESC, id DESC LIMIT 1)
     SELECT (SELECT count(*) FROM gone)::int AS removed,
       (SELECT count(*) FROM examined)::int AS examined,
       (SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') FROM last) AS last_created_at,
       (SELECT id::text FROM last) AS last_id`,
    [cutoff(nowMs, retentionDays), after?.createdAt ?? "-infinity", after?.id ?? "0", batchSize],
  );
  if (!row) return { removed: 0, next: null };
  // A full window may have more expired events after it; a short one reached the cutoff.
  const full = row.examined >= batchSize && row.last_created_at !== null && row.last_id !== null;
  return {
    removed: row.removed,
    next: full ? { createdAt: row.last_created_at!, id: row.last_id! } : null,
  };
}
