import type { Config } from "../config.ts";
import type { Db } from "./db.ts";
import { openPglite } from "./pglite.ts";
import { openPostgres } from "./postgres.ts";

export async function openDb(
  config: Pick<Config, "databaseUrl" | "dataDir"> & Partial<Pick<Config, "dbLockTimeoutMs">>,
): Promise<Db> {
  if (config.databaseUrl)
    return openPostgres({ url: config.databaseUrl, lockTimeoutMs: config.dbLockTimeoutMs });
  return openPglite(config.dataDir === "memory://" ? "memory://" : embeddedDatabaseDir(config.dataDir));
}

/** Where the embedded store keeps its files inside DATA_DIR. */
export function embeddedDatabaseDir(dataDir: string): string {
  return `${dataDir}/pglite`;
}
