import type { Queryable } from "../db/db.ts";

export interface AllowlistEntry {
  /** The chain the entry allows calls on; null: every chain (migration 037). */
  chain_id: number | null;
  target_contract: string;
  function_selector: string;
  name: string | null;
  enabled: boolean;
  created_at: string;
}

export const MAX_ENTRIES_PER_PROJECT = 1000;

const COLUMNS = "chain_id, target_contract, function_selector, name, enabled, created_at";

/** An entry's key: its contract and function on one chain, or on every chain (chain null). */
export interface Pair {
  chain: number | null;
  target: string;
  selector: string;
}

/** The key's condition, on parameters $1 (project), $2 (chain), $3 (target), $4 (selector). */
const KEY = `project_id = $1 AND chain_id IS NOT DISTINCT FROM $2::integer
  AND target_contract = $3 AND function_selector = $4`;

export async function listEntries(db: Queryable, projectId: string): Promise<AllowlistEntry[]> {
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM allowlist_entries
     WHERE project_id = $1 ORDER BY created_at, target_contract, function_selector, chain_id NULLS FIRST`,
    [projectId],
  );
  return rows.map(toEntry);
}

/**
 * Adds the pair, or enables it again if it exists (with the new name when one is given).
 * Returns null when the project already holds its maximum of entries. The project row is locked
 * so concurrent adds cannot overshoot the bound.
 */
export async function addEntry(
  tx: Queryable,
  projectId: string,
  pair: Pair,
  name: string | null = null,
): Promise<{ entry: AllowlistEntry; created: boolean } | null> {
  await tx.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  const existing = await tx.query<Row>(
    `UPDATE allowlist_entries SET enabled = true, name = COALESCE($5, name), updated_at = now()
     WHERE ${KEY}
     RETURNING ${COLUMNS}`,
    [projectId, pair.chain, pair.target, pair.selector, name],
  );
  if (existing[0]) return { entry: toEntry(existing[0]), created: false };
  const [{ n }] = (await tx.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM allowlist_entries WHERE project_id = $1",
    [projectId],
  )) as [{ n: number }];
  if (n >= MAX_ENTRIES_PER_PROJECT) return null;
  const rows = await tx.query<Row>(
    `INSERT INTO allowlist_entries (project_id, chain_id, target_contract, function_selector, name)
     VALUES ($1, $2, $3, $4, $5)
     RETURNING ${COLUMNS}`,
    [projectId, pair.chain, pair.target, pair.selector, name],
  );
  return { entry: toEntry(rows[0]!), created: true };
}

/** Disables the pair (the record stays, for the audit trail); null when no enabled pair exists. */
export async function disableEntry(
  db: Queryable,
  projectId: string,
  pair: Pair,
): Promise<AllowlistEntry | null> {
  const rows = await db.query<Row>(
    `UPDATE allowlist_entries SET enabled = false, updated_at = now()
     WHERE ${KEY} AND enabled
     RETURNING ${COLUMNS}`,
    [projectId, pair.chain, pair.target, pair.selector],
  );
  return rows[0] ? toEntry(rows[0]) : null;
}

/**
 * Renames, pauses (enabled false) or resumes an entry; null when the project has no such pair.
 * A `name` of null removes the name; an absent field is left alone.
 */
export async function patchEntry(
  db: Queryable,
  projectId: string,
  pair: Pair,
  change: { name?: string | null; enabled?: boolean },
): Promise<AllowlistEntry | null> {
  const rows = await db.query<Row>(
    `UPDATE allowlist_entries SET name = CASE WHEN $5::boolean THEN $6::text ELSE name END,
       enabled = COALESCE($7::boolean, enabled), updated_at = now()
     WHERE ${KEY}
     RETURNING ${COLUMNS}`,
    [
      projectId,
      pair.chain,
      pair.target,
      pair.selector,
      change.name !== undefined,
      change.name ?? null,
      change.enabled ?? null,
    ],
  );
  return rows[0] ? toEntry(rows[0]) : null;
}

interface Row {
  chain_id: number | null;
  target_contract: string;
  function_selector: string;
  name: string | null;
  enabled: boolean;
  created_at: Date;
}

function toEntry(r: Row): AllowlistEntry {
  return { ...r, created_at: r.created_at.toISOString() };
}
