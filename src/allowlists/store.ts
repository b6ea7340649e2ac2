import type { Queryable } from "../db/db.ts";

export interface AllowlistEntry {
  target_contract: string;
  function_selector: string;
  name: string | null;
  enabled: boolean;
  created_at: string;
}

export const MAX_ENTRIES_PER_PROJECT = 1000;

const COLUMNS = "target_contract, function_selector, name, enabled, created_at";

export async function listEntries(db: Queryable, projectId: string): Promise<AllowlistEntry[]> {
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM allowlist_entries
     WHERE project_id = $1 ORDER BY created_at, target_contract, function_selector`,
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
  target: string,
  selector: string,
  name: string | null = null,
): Promise<{ entry: AllowlistEntry; created: boolean } | null> {
  await tx.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  const existing = await tx.query<Row>(
    `UPDATE allowlist_entries SET enabled = true, name = COALESCE($4, name), updated_at = now()
     WHERE project_id = $1 AND target_contract = $2 AND function_selector = $3
     RETURNING ${COLUMNS}`,
    [projectId, target, selector, name],
  );
  if (existing[0]) return { entry: toEntry(existing[0]), created: false };
  const [{ n }] = (await tx.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM allowlist_entries WHERE project_id = $1",
    [projectId],
  )) as [{ n: number }];
  if (n >= MAX_ENTRIES_PER_PROJECT) return null;
  const rows = await tx.query<Row>(
    `INSERT INTO allowlist_entries (project_id, target_contract, function_selector, name)
     VALUES ($1, $2, $3, $4)
     RETURNING ${COLUMNS}`,
    [projectId, target, selector, name],
  );
  return { entry: toEntry(rows[0]!), created: true };
}

/** Disables the pair (the record stays, for the audit trail); null when no enabled pair exists. */
export async function disableEntry(
  db: Queryable,
  projectId: string,
  target: string,
  selector: string,
): Promise<AllowlistEntry | null> {
  const rows = await db.query<Row>(
    `UPDATE allowlist_entries SET enabled = false, updated_at = now()
     WHERE project_id = $1 AND target_contract = $2 AND function_selector = $3 AND enabled
     RETURNING ${COLUMNS}`,
    [projectId, target, selector],
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
  target: string,
  selector: string,
  change: { name?: string | null; enabled?: boolean },
): Promise<AllowlistEntry | null> {
  const rows = await db.query<Row>(
    `UPDATE allowlist_entries SET name = CASE WHEN $4::boolean THEN $5::text ELSE name END,
       enabled = COALESCE($6::boolean, enabled), updated_at = now()
     WHERE project_id = $1 AND target_contract = $2 AND function_selector = $3
     RETURNING ${COLUMNS}`,
    [projectId, target, selector, change.name !== undefined, change.name ?? null, change.enabled ?? null],
  );
  return rows[0] ? toEntry(rows[0]) : null;
}

interface Row {
  target_contract: string;
  function_selector: string;
  name: string | null;
  enabled: boolean;
  created_at: Date;
}

function toEntry(r: Row): AllowlistEntry {
  return { ...r, created_at: r.created_at.toISOString() };
}

/**
 * The index of the first call whose (target, selector) is not an enabled entry of the project's
 * allowlist, or null when all are. A read for the ERC-7677 stub, which reserves nothing; the
 * reservation checks again in its own statement.
 */
export async function firstNotAllowlisted(
  db: Queryable,
  projectId: string,
  calls: { target: string; selector: string }[],
): Promise<number | null> {
  if (calls.length === 0) return null;
  const rows = await db.query<{ target_contract: string; function_selector: string }>(
    `SELECT target_contract, function_selector FROM allowlist_entries
     WHERE project_id = $1 AND enabled AND target_contract = ANY($2::text[]) AND function_selector = ANY($3::text[])`,
    [projectId, calls.map((c) => c.target), calls.map((c) => c.selector)],
  );
  const allowed = new Set(rows.map((r) => `${r.target_contract}:${r.function_selector}`));
  const missing = calls.findIndex((c) => !allowed.has(`${c.target}:${c.selector}`));
  return missing === -1 ? null : missing;
}
