import pg from "pg";
import type { Db, Queryable } from "./db.ts";

// Ids are int8 in SQL and stay far below 2^53; money is NUMERIC and stays a string until it
// becomes a bigint in the ledger code.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export interface PostgresOptions {
  url: string;
  /** Schema to use (created if missing); tests give each file its own. */
  schema?: string;
  max?: number;
  statementTimeoutMs?: number;
}

export async function openPostgres(opts: PostgresOptions): Promise<Db> {
  const options = [`-c statement_timeout=${opts.statementTimeoutMs ?? 5000}`];
  if (opts.schema) {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(opts.schema)) throw new Error("invalid schema name");
    const admin = new pg.Client({ connectionString: opts.url });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA IF NOT EXISTS ${opts.schema}`);
    } finally {
      await admin.end();
    }
    options.push(`-c search_path=${opts.schema}`);
  }
  const pool = new pg.Pool({
    connectionString: opts.url,
    max: opts.max ?? 20,
    options: options.join(" "),
    connectionTimeoutMillis: 5000,
  });
  // An idle client that loses its server must not take the process down.
  pool.on("error", () => {});

  const query = async <T>(sql: string, params?: unknown[]) =>
    (await pool.query(sql, params as unknown[])).rows as T[];

  return {
    kind: "postgres",
    query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      const tx: Queryable = {
        query: async <R>(sql: string, params?: unknown[]) =>
          (await client.query(sql, params as unknown[])).rows as R[],
      };
      try {
        await client.query("BEGIN");
        const result = await fn(tx);
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async close() {
      await pool.end();
    },
  };
}
