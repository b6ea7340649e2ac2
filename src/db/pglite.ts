import { mkdirSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import type { Db, Queryable } from "./db.ts";

/**
 * Embedded PostgreSQL (WASM). `dataDir` of `memory://` keeps everything in memory (tests);
 * otherwise the database lives in that folder and survives restarts.
 */
export async function openPglite(dataDir: string): Promise<Db> {
  if (!dataDir.startsWith("memory://")) mkdirSync(dataDir, { recursive: true });
  const pg = await PGlite.create(dataDir);
  const query = async <T>(sql: string, params?: unknown[]) => (await pg.query<T>(sql, params)).rows;
  return {
    kind: "pglite",
    query,
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return pg.transaction((t) =>
        fn({ query: async <R>(sql: string, params?: unknown[]) => (await t.query<R>(sql, params)).rows }),
      );
    },
    async close() {
      await pg.close();
    },
  };
}
