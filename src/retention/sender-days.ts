import type { Queryable } from "../db/db.ts";

const DAY_MS = 86_400_000;

/**
 * The first UTC day whose per-sender counts (rollup_project_sender_days) are still kept, given the
 * days a paid operation keeps its own row (CHAIN_OPERATION_RETENTION_DAYS).
 *
 * Those counts are bookkeeping for one figure only, each day's distinct active senders
 * (rollup_project_days.active_senders, migration 015): a settlement moves today's row, and a
 * reversal moves the row of the day its operation was settled, to know when a sender's count there
 * leaves or reaches 0. No read uses them. Settlements are dated when they are recorded, so only a
 * reversal ever touches a past day, and a reversal needs its paid operation's row, which is folded
 * away after the chain operations' retention. A day is therefore final once that retention and a
 * whole day more have passed, and its counts can go: its active senders stay in its day row.
 *
 * Kept for ever, they were one row for nearly every operation (most senders act once a day):
 * 219 bytes per operation at 2.5 million, the largest table after the sponsorships and the ledger.
 */
export function firstKeptSenderDay(nowMs: number, chainOperationRetentionDays: number): string {
  return new Date(nowMs - (chainOperationRetentionDays + 1) * DAY_MS).toISOString().slice(0, 10);
}

/**
 * Removes at most `batchSize` per-sender day counts older than firstKeptSenderDay, through the
 * primary key's range of each tank (project and chain) below that day; returns how many it removed
 * (fewer than `batchSize` means done). Rows are taken with SKIP LOCKED, so instances running this
 * together share the work, and nothing else writes a day that old.
 */
export async function forgetOldSenderDays(
  db: Queryable,
  nowMs: number,
  chainOperationRetentionDays: number,
  batchSize: number,
): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `WITH old AS (
       SELECT o.project_id, o.chain_id, o.day, o.sender FROM project_tanks t,
         LATERAL (SELECT r.project_id, r.chain_id, r.day, r.sender FROM rollup_project_sender_days r
           WHERE r.project_id = t.project_id AND r.chain_id = t.chain_id AND r.day < $1::date
           ORDER BY r.day LIMIT $2 FOR UPDATE SKIP LOCKED) o
       LIMIT $2),
     gone AS (
       DELETE FROM rollup_project_sender_days r USING old
       WHERE r.project_id = old.project_id AND r.chain_id = old.chain_id AND r.day = old.day
         AND r.sender = old.sender
       RETURNING 1)
     SELECT count(*)::text AS n FROM gone`,
    [firstKeptSenderDay(nowMs, chainOperationRetentionDays), batchSize],
  );
  return Number(rows[0]!.n);
}
