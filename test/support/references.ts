import type { Queryable } from "../../src/db/db.ts";

/** Whether an error is PostgreSQL's foreign_key_violation (23503), as the reference checks raise it. */
export const isForeignKeyViolation = (err: { code?: string }): boolean => err.code === "23503";

/** The names of the foreign keys declared on `tables`, in name order (migrations 056 and 057 drop some). */
export async function foreignKeysOf(db: Queryable, tables: string[]): Promise<string[]> {
  const rows = await db.query<{ conname: string }>(
    `SELECT conname FROM pg_constraint
     WHERE contype = 'f' AND conrelid = ANY ($1::text[]::regclass[]) ORDER BY conname`,
    [tables],
  );
  return rows.map((r) => r.conname);
}
