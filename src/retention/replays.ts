import type { Queryable } from "../db/db.ts";

/** How long a `clientNonce` and the response it replays are kept (DESIGN.md §3, Idempotency). */
export const REPLAY_RETENTION_MS = 24 * 3_600_000;

/**
 * Forgets the replay of at most `batchSize` authorizations whose 24 hours are over: the stored
 * response, the request digest and the nonce itself, so the nonce is free again, exactly as the
 * reservation treats an expired nonce (db/functions/reserve_sponsorships.sql). Replays have a
 * table of their own (migration 020), so this deletes there and never writes a sponsorship. The
 * rows are taken with SKIP LOCKED, so instances running this together share the work and never
 * wait on each other. Returns how many it forgot: fewer than `batchSize` means done.
 */
export async function forgetExpiredReplays(db: Queryable, nowMs: number, batchSize: number): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `WITH gone AS (
       DELETE FROM sponsorship_replays
       WHERE (project_id, client_nonce) IN (
         SELECT project_id, client_nonce FROM sponsorship_replays
         WHERE created_at < $1
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       RETURNING 1)
     SELECT count(*)::text AS n FROM gone`,
    [new Date(nowMs - REPLAY_RETENTION_MS), batchSize],
  );
  return Number(rows[0]!.n);
}
