import type { Config } from "../config.ts";
import type { Db } from "./db.ts";
import { openPglite } from "./pglite.ts";
import { openPgliteThread, type ThreadOptions } from "./pglite-thread.ts";
import { openPostgres } from "./postgres.ts";

/**
 * The configuration's store. Embedded, PGlite runs in the caller's thread unless `thread` is
 * given: the server runs it on a thread of its own (pglite-thread.ts); the command-line tools,
 * which make a few statements and exit, do not pay for starting one.
 */
export async function openDb(
  config: Pick<Config, "databaseUrl" | "dataDir"> & Partial<Pick<Config, "dbLockTimeoutMs">>,
  options: { thread?: ThreadOptions } = {},
): Promise<Db> {
  if (config.databaseUrl)
    return openPostgres({ url: config.databaseUrl, lockTimeoutMs: config.dbLockTimeoutMs });
  const dir = config.dataDir === "memory://" ? "memory://" : embeddedDatabaseDir(config.dataDir);
  return options.thread ? openPgliteThread(dir, options.thread) : openPglite(dir);
}

/** Where the embedded store keeps its files inside DATA_DIR. */
export function embeddedDatabaseDir(dataDir: string): string {
  return `${dataDir}/pglite`;
}
