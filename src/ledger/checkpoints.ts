import { projectIdsAbove } from "../db/bytes.ts";
import type { Db, Queryable } from "../db/db.ts";

/**
 * Ledger checkpoints (migrations/012_rollups.sql): a verified balance per tank (project and chain,
 * migration 035), so that parity reads the latest checkpoint plus the chain's entries after it
 * instead of the whole ledger.
 *
 * A checkpoint is the previous one (or zero) plus the entries after it, written only when that
 * sum equals the cached balance at the same instant: every checkpoint is itself a parity check
 * that passed, and a chain of them proves the cache against the whole ledger by induction. A
 * project whose cache drifts gets no new checkpoint, and its reports keep showing the drift.
 */

/** A project gets a new checkpoint once this many entries follow its latest one. */
export const DEFAULT_CHECKPOINT_EVERY = 10_000;

/**
 * Projects with at least `every` entries after their latest checkpoint, at most `limit` of
 * them, in id order from after `after`. Each project costs an index range of at most `every` entries (and their rows: PostgreSQL
 * does not answer from an index on an expression alone). The range is the project's key (migration
 * 048), which another project could share; that could only make a project due early, since
 * writeCheckpoints sums the project's own entries, so the count does not compare the project.
 */
export async function projectsDueForCheckpoint(
  db: Queryable,
  every: number,
  limit: number,
  after = "",
): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `SELECT p.id FROM projects p
     WHERE p.id > $3 AND (SELECT count(*) FROM (
         SELECT 1 FROM ledger_entries l
         WHERE ${projectIdsAbove(
           "p.id",
           "COALESCE((SELECT max(c.last_entry_id) FROM ledger_checkpoints c WHERE c.project_id = p.id), 0)",
           { project: "l.project_id", id: "l.id" },
         )}
         LIMIT $1) tail) >= $1
     ORDER BY p.id LIMIT $2`,
    [every, limit, after],
  );
  return rows.map((r) => r.id);
}

/**
 * Writes a checkpoint for each tank of the projects whose ledger agrees with its cached balance;
 * returns the projects with a tank checkpointed.
 *
 * Ledger ids are handed out before their transactions commit, so an entry with a smaller id
 * than one already visible may still be on its way. A SHARE lock on ledger_entries waits for
 * every transaction that is writing entries and holds new ones back until this one commits:
 * inside it the ledger is complete up to its largest id, every later entry gets a larger id, and
 * the cached balances are those of exactly the entries up to that id. That instant is all the
 * lock is held for: two reads (the largest id, from the primary key's end, and the tanks' cached
 * balances). Entries are never changed or removed (the table's trigger refuses), so the tails up
 * to that id are summed after the lock is released, and a tail of any length holds no one's
 * writes back. (Summed under the lock, a project whose cache had drifted, and so never got a new
 * checkpoint, made every tenant's ledger writes wait for a sum of its whole ever-growing tail,
 * once a minute.) It gives up after lock_timeout rather than queue authorizations behind it.
 * Another instance doing the same finds the work done (the primary key refuses a duplicate).
 */
export async function writeCheckpoints(db: Db, projectIds: string[]): Promise<string[]> {
  if (projectIds.length === 0) return [];
  const instant = await db.transaction(async (tx) => {
    await tx.query("SET LOCAL lock_timeout = '2s'");
    await tx.query("LOCK TABLE ledger_entries IN SHARE MODE");
    const [last] = await tx.query<{ id: string | null }>("SELECT max(id)::text AS id FROM ledger_entries");
    const tanks = await tx.query<{ project_id: string; chain_id: number; cached: string }>(
      `SELECT project_id, chain_id, balance::text AS cached FROM project_tanks
       WHERE project_id = ANY($1::text[])`,
      [projectIds],
    );
    return { lastId: last?.id ?? null, tanks };
  });
  if (instant.lastId === null || instant.tanks.length === 0) return [];
  // One statement per project, so that one whose sum fails (its tail outlasting the statement
  // timeout) costs the others nothing; the first failure is thrown once the rest are written.
  const checkpointed: string[] = [];
  let failure: unknown = null;
  for (const projectId of new Set(instant.tanks.map((t) => t.project_id))) {
    const tanks = instant.tanks.filter((t) => t.project_id === projectId);
    try {
      const rows = await db.query<{ project_id: string }>(
        `WITH tanks AS (
           SELECT * FROM unnest($1::text[], $2::integer[], $3::numeric[]) AS k(project_id, chain_id, cached)
         ), latest AS (
           SELECT k.project_id, k.chain_id, k.cached, COALESCE(c.last_entry_id, 0) AS after_id,
             COALESCE(c.balance, 0) AS balance, COALESCE(c.entries, 0) AS entries
           FROM tanks k
           LEFT JOIN LATERAL (SELECT last_entry_id, balance, entries FROM ledger_checkpoints
             WHERE project_id = k.project_id AND chain_id = k.chain_id ORDER BY last_entry_id DESC LIMIT 1) c ON true
         ), next AS (
           SELECT l.project_id, l.chain_id, l.cached, t.last_id, l.balance + t.amount AS balance, l.entries + t.n AS entries
           FROM latest l, LATERAL (SELECT max(e.id) AS last_id, COALESCE(sum(e.amount), 0) AS amount, count(*) AS n
             FROM ledger_entries e
             WHERE ${projectIdsAbove("l.project_id", "l.after_id", { project: "e.project_id", id: "e.id" }, "$4::bigint")}
               AND e.project_id = l.project_id AND e.chain_id = l.chain_id) t
           WHERE t.last_id IS NOT NULL
         )
         INSERT INTO ledger_checkpoints (project_id, chain_id, last_entry_id, balance, entries)
         SELECT project_id, chain_id, last_id, balance, entries FROM next WHERE balance = cached
         ON CONFLICT (project_id, last_entry_id) DO NOTHING
         RETURNING project_id`,
        [
          tanks.map((t) => t.project_id),
          tanks.map((t) => t.chain_id),
          tanks.map((t) => t.cached),
          instant.lastId,
        ],
      );
      if (rows.length > 0) checkpointed.push(projectId);
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure !== null) throw failure;
  return checkpointed;
}

/**
 * One pass: checkpoints up to `limit` due projects, in id order from after `after`, and says
 * where the next pass goes on: after the last project it took when it was full, else from the
 * start (also handed to `onNext` before the checkpoints are written, so that a pass that fails
 * moves the walk on as well). A project whose cache drifted stays due and gets no checkpoint;
 * without the walk, 50 of them first in id order would have taken every pass's places, and no
 * other project would ever have been checkpointed again.
 */
export async function checkpointDueProjects(
  db: Db,
  every: number,
  limit: number,
  after = "",
  onNext?: (next: string) => void,
): Promise<{ checkpointed: string[]; next: string }> {
  const due = await projectsDueForCheckpoint(db, every, limit, after);
  const next = due.length === limit ? due.at(-1)! : "";
  onNext?.(next);
  return { checkpointed: await writeCheckpoints(db, due), next };
}
