import pg from "pg";
import type { Db, Queryable } from "./db.ts";
import { asUnavailable, DatabaseUnavailable, DEFAULT_LOCK_TIMEOUT_MS } from "./unavailable.ts";

// Ids are int8 in SQL and stay far below 2^53; money is NUMERIC and stays a string until it
// becomes a bigint in the ledger code.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export interface PostgresOptions {
  url: string;
  /** Schema to use (created if missing); tests give each file its own. */
  schema?: string;
  max?: number;
  statementTimeoutMs?: number;
  /**
   * Longest wait for a row or table lock (lock_timeout) before the statement fails with 55P03,
   * which the service answers with 503. Default DEFAULT_LOCK_TIMEOUT_MS.
   */
  lockTimeoutMs?: number;
  /** Longest wait for a connection, new or from the pool, before the query fails. */
  connectTimeoutMs?: number;
}

/**
 * Set on every session of the service's, the primary's and the replicas'. JIT compilation pays
 * off for a long scan, and the service runs short index reads: it only fires when the planner
 * misjudges one as long (the cost is past jit_above_cost), and then costs more than the read. A
 * parity report over 22 projects whose row-comparison ranges were estimated at a quarter of the
 * ledger each compiled 528 functions: 0.25-0.4 s at 1 million entries, 2.8-3.2 s at 2.5 million
 * (with inlining and optimization), against 12-17 ms for the same plan without JIT
 * (bench/results-2026-11-30-parity-jit.txt, bench/results-2026-11-30-scale-2500k-jit-off.txt).
 */
export const SESSION_OPTIONS = "-c jit=off";

/**
 * A pool over `pg`. Every failure that means the server is away, shutting down, full, or a lock or
 * statement timed out is rethrown as DatabaseUnavailable (see unavailable.ts); everything is
 * bounded, so a request never waits on a dead server for longer than a few seconds.
 */
export async function openPostgres(opts: PostgresOptions): Promise<Db> {
  const statementTimeoutMs = opts.statementTimeoutMs ?? 5000;
  // Set on every connection rather than per transaction: the reservation is one autocommit
  // statement, and a SET LOCAL would cost it a transaction and two more round trips. Every row
  // lock the service takes (reservations, settlement, releases, reversals) is then bounded.
  const options = [
    SESSION_OPTIONS,
    `-c statement_timeout=${statementTimeoutMs}`,
    `-c lock_timeout=${opts.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS}`,
  ];
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
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    // statement_timeout is the server's bound; this one is for a server that stopped answering
    // without closing the connection (a network partition), where only the client can give up.
    query_timeout: statementTimeoutMs + 2000,
    keepAlive: true,
  });
  // An idle client that loses its server emits 'error' on the pool; unheard, that would end the
  // process. The pool has already dropped the client, and the next query connects anew.
  pool.on("error", () => {});

  const query = async <T>(sql: string, params?: unknown[], name?: string) => {
    try {
      return (await pool.query(statement(sql, params, name))).rows as T[];
    } catch (err) {
      throw asUnavailable(err);
    }
  };

  return {
    kind: "postgres",
    query,
    transaction: (fn) => inTransaction(pool, fn),
    async close() {
      await pool.end();
    },
  };
}

/** A named statement is prepared once per connection by `pg` (Queryable.query's `name`). */
function statement(text: string, values: unknown[] | undefined, name: string | undefined): pg.QueryConfig {
  return { text, ...(values ? { values } : {}), ...(name ? { name } : {}) };
}

async function inTransaction<T>(pool: pg.Pool, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw asUnavailable(err);
  }
  // A checked-out client has no listener of the pool's: if its server goes away between two
  // statements, the 'error' it emits would end the process. The statement in flight, if any,
  // fails with the same error; the next one fails because the client is no longer queryable.
  const onError = () => {};
  client.on("error", onError);
  const tx: Queryable = {
    async query<R>(sql: string, params?: unknown[], name?: string) {
      try {
        return (await client.query(statement(sql, params, name))).rows as R[];
      } catch (err) {
        throw asUnavailable(err);
      }
    },
  };
  let broken: Error | undefined;
  try {
    await tx.query("BEGIN");
    const result = await fn(tx);
    await tx.query("COMMIT");
    return result;
  } catch (err) {
    if (err instanceof DatabaseUnavailable && err.connectionLost) broken = err;
    else await client.query("ROLLBACK").catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.removeListener("error", onError);
    // A client whose connection failed is dropped, not handed to the next request.
    client.release(broken);
  }
}
