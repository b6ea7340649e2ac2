import { randomBytes } from "node:crypto";
import pg from "pg";

/** The run's PostgreSQL (DATABASE_URL), or the machine's own when the run is embedded. */
export const SHARED_PG_URL = process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

export interface FreshDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A database of its own on the run's PostgreSQL server, for a service started as a process (it
 * migrates its public schema); dropped with every connection to it closed.
 */
export async function freshDatabase(prefix: string, serverUrl = SHARED_PG_URL): Promise<FreshDatabase> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
