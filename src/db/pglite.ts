import { PGlite } from "@electric-sql/pglite";
import { ensurePrivateDir } from "../secrets/key-files.ts";
import type { Db, Queryable } from "./db.ts";
import { asUnavailable } from "./unavailable.ts";

/**
 * Embedded PostgreSQL (WASM). `dataDir` of `memory://` keeps everything in memory (tests);
 * otherwise the database lives in that folder and survives restarts.
 *
 * One connection, one transaction at a time: a transaction holds the whole database until it
 * ends, so statements queue behind it instead of waiting on row locks, and lock_timeout has
 * nothing to bound here. A closed instance is reported as DatabaseUnavailable.
 */
export async function openPglite(dataDir: string): Promise<Db> {
  // The database holds every project's data: its files are for this user only (0700).
  if (!dataDir.startsWith("memory://")) ensurePrivateDir(dataDir);
  const pg = await PGlite.create(dataDir);
  const query = async <T>(sql: string, params?: unknown[]) => {
    try {
      return (await pg.query<T>(sql, params)).rows;
    } catch (err) {
      throw asUnavailable(err);
    }
  };
  return {
    kind: "pglite",
    query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      try {
        return await pg.transaction((t) =>
          fn({ query: async <R>(sql: string, params?: unknown[]) => (await t.query<R>(sql, params)).rows }),
        );
      } catch (err) {
        throw asUnavailable(err);
      }
    },
    async close() {
      await pg.close();
    },
  };
}
