import type { Queryable } from "../db/db.ts";

const DAY_MS = 86_400_000;

/**
 * Removes at most `batchSize` detailed refusals older than `retentionDays` (REFUSAL_RETENTION_DAYS),
 * oldest first through the refusals_created index, so a pass reads only rows it removes. The
 * daily counts (refusal_days) stay: they are a few rows per project and day. Rows are taken with
 * SKIP LOCKED, so instances running this together share the work. Returns how many it removed:
 * fewer than `batchSize` means done.
 */
export async function forgetOldRefusals(
  db: Queryable,
  nowMs: number,
  retentionDays: number,
  batchSize: number,
): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `WITH gone AS (
       DELETE FROM refusals
       WHERE id IN (
         SELECT id FROM refusals WHERE created_at < $1
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*)::text AS n FROM gone`,
    [new Date(nowMs - retentionDays * DAY_MS), batchSize],
  );
  return Number(rows[0]!.n);
}
