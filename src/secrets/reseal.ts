import type { Db } from "../db/db.ts";
import {
  isSealed,
  type Keyring,
  OPEN_FAILURES,
  open,
  SEALED_PREFIX,
  seal,
  sealedUnderCurrent,
} from "./envelope.ts";

/**
 * Bringing stored secrets under the current key. Two callers:
 *
 * - start-up (`plaintext`): seals any secret still stored in plain text (rows written before
 *   secrets were sealed). Safe for every instance to run at once, and run before serving.
 * - `npm run secrets -- rotate` (`all`): also re-seals what an older key sealed, so that key can
 *   be removed. Only the operator runs it, once every instance has the new key: an instance
 *   still on the old key alone could not open what this writes.
 *
 * Rows are handled in short transactions of `batchSize`, each row locked (FOR UPDATE) from the
 * read to its rewrite, so concurrent runs and concurrent API writes are safe: a run that waited
 * for a lock finds the row already rewritten and passes over it. A value no configured key opens
 * is left as it is and reported.
 */

/** A table's columns that hold sealed secrets, and how a row's binding is named (envelope.ts). */
export interface SealedColumns {
  table: string;
  /** The primary key column; its text form goes into the binding. */
  key: string;
  columns: readonly string[];
  binding(key: string): string;
}

export interface ResealReport {
  /** Values written anew under the current key. */
  resealed: number;
  /** Values no configured key opens (left untouched): where they are and why, never the value. */
  unreadable: { table: string; key: string; column: string; reason: string }[];
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

export async function resealSecrets(
  db: Db,
  ring: Keyring,
  sets: readonly SealedColumns[],
  scope: "plaintext" | "all",
  batchSize = 500,
): Promise<ResealReport> {
  const report: ResealReport = { resealed: 0, unreadable: [] };
  for (const set of sets) {
    for (const name of [set.table, set.key, ...set.columns]) {
      if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
    }
    const skipped: string[] = [];
    for (;;) {
      const done = await db.transaction(async (tx) => {
        const pattern = scope === "all" ? `${SEALED_PREFIX}${ring.current.id}:%` : `${SEALED_PREFIX}%`;
        const stale = set.columns.map((c) => `(${c} IS NOT NULL AND ${c} NOT LIKE $1)`).join(" OR ");
        const rows = await tx.query<Record<string, string | null>>(
          `SELECT ${set.key}::text AS row_key, ${set.columns.join(", ")} FROM ${set.table}
           WHERE (${stale}) AND NOT (${set.key}::text = ANY ($2::text[]))
           ORDER BY ${set.key} LIMIT $3 FOR UPDATE`,
          [pattern, skipped, batchSize],
        );
        for (const row of rows) {
          const key = row.row_key!;
          const values = set.columns.map((column) =>
            resealValue(ring, set, key, column, row[column] ?? null, scope, report),
          );
          if (values.some((v) => v.unreadable)) skipped.push(key);
          if (!values.some((v) => v.changed)) continue;
          await tx.query(
            `UPDATE ${set.table} SET ${set.columns.map((c, i) => `${c} = $${i + 2}`).join(", ")}
             WHERE ${set.key}::text = $1`,
            [key, ...values.map((v) => v.value)],
          );
        }
        return rows.length === 0;
      });
      if (done) break;
    }
  }
  return report;
}

function resealValue(
  ring: Keyring,
  set: SealedColumns,
  key: string,
  column: string,
  value: string | null,
  scope: "plaintext" | "all",
  report: ResealReport,
): { value: string | null; changed: boolean; unreadable: boolean } {
  const unchanged = { value, changed: false, unreadable: false };
  if (value === null || sealedUnderCurrent(ring, value)) return unchanged;
  const binding = set.binding(key);
  if (!isSealed(value)) {
    report.resealed++;
    return { value: seal(ring, value, binding), changed: true, unreadable: false };
  }
  if (scope === "plaintext") return unchanged;
  const opened = open(ring, value, binding);
  if (!opened.ok) {
    report.unreadable.push({ table: set.table, key, column, reason: OPEN_FAILURES[opened.reason] });
    return { ...unchanged, unreadable: true };
  }
  report.resealed++;
  return { value: seal(ring, opened.plaintext, binding), changed: true, unreadable: false };
}

/** How many stored secrets each key sealed, and how many are still plain text. */
export async function sealedSecretsStatus(
  db: Db,
  sets: readonly SealedColumns[],
): Promise<{ plaintext: number; byKey: Map<string, number> }> {
  const status = { plaintext: 0, byKey: new Map<string, number>() };
  for (const set of sets) {
    for (const column of set.columns) {
      const rows = await db.query<{ key_id: string | null; n: number }>(
        `SELECT CASE WHEN ${column} LIKE $1 THEN split_part(${column}, ':', 2) END AS key_id, count(*)::int AS n
         FROM ${set.table} WHERE ${column} IS NOT NULL GROUP BY 1`,
        [`${SEALED_PREFIX}%`],
      );
      for (const r of rows) {
        if (r.key_id === null) status.plaintext += r.n;
        else status.byKey.set(r.key_id, (status.byKey.get(r.key_id) ?? 0) + r.n);
      }
    }
  }
  return status;
}
