import type { Queryable } from "../db/db.ts";

/** How long a `clientNonce` and the response it replays are kept (DESIGN.md §3, Idempotency). */
export const REPLAY_RETENTION_MS = 24 * 3_600_000;

/**
 * Forgets the replay of at most `batchSize` authorizations whose 24 hours are over: the stored
 * response, the request digest and the nonce itself, so the nonce is free again, exactly as the
 * reservation treats an expired nonce (db/functions/reserve_sponsorships.sql). The rows are taken with SKIP LOCKED, so
 * instances running this together share the work and never wait on each other or on a
 * settlement holding a row. Returns how many rows it cleared: fewer than `batchSize` means done.
 */
export async function forgetExpiredReplays(db: Queryable, nowMs: number, batchSize: number): Promise<number> {
  const rows = await db.query<{ id: string }>(
    `UPDATE sponsorships SET response = NULL, request_digest = NULL, client_nonce = NULL
     WHERE id IN (
       SELECT id FROM sponsorships
       WHERE (response IS NOT NULL OR request_digest IS NOT NULL OR client_nonce IS NOT NULL)
         AND created_at < $1
       ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
     RETURNING id`,
    [new Date(nowMs - REPLAY_RETENTION_MS), batchSize],
  );
  return rows.length;
}
