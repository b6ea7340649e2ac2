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
export async function openPglite(
  dataDir: string,
  options: {
    loadDataDir?: Blob;
    /** Server settings on top of PGlite's own start parameters (`-c name=value` each). */
    settings?: Record<string, string>;
  } = {},
): Promise<Db> {
  // The database holds every project's data: its files are for this user only (0700).
  if (!dataDir.startsWith("memory://")) ensurePrivateDir(dataDir);
  const startParams = options.settings
    ? [...PGLITE_START_PARAMS, ...Object.entries(options.settings).flatMap(([k, v]) => ["-c", `${k}=${v}`])]
    : undefined;
  const pg = await PGlite.create(dataDir, {
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    ...(startParams ? { startParams } : {}),
  });
  const query = async <T>(sql: string, params?: unknown[]) => {
    try {
      return (await pg.query<T>(sql, params)).rows;
    } catch (err) {
      throw asUnavailable(err);
    }
  };
  const db: Db = {
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
  instances.set(db, pg);
  return db;
}

const instances = new WeakMap<Db, PGlite>();

/** PGlite's own start parameters (`startParams` replaces them, so added settings go after these). */
const PGLITE_START_PARAMS: readonly string[] = (PGlite as unknown as { defaultStartParams: string[] })
  .defaultStartParams;

/**
 * The whole database as a tarball, for `openPglite(…, { loadDataDir })`. Tests open every store
 * from one migrated copy instead of running initdb and every migration (about 3 s of CPU);
 * starting from the copy took 1.9-2.4 s of CPU with PGlite's default settings and 0.8-0.9 s with
 * the tests' smaller ones (test/support/app.ts), measured on this 2-core machine on 2026-11-27.
 */
export async function dumpPglite(db: Db): Promise<Blob> {
  const pg = instances.get(db);
  if (!pg) throw new Error("not an embedded database");
  return pg.dumpDataDir("none");
}
