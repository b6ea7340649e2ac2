/**
 * Storage behind one small interface, with two implementations: PostgreSQL through `pg`, and
 * embedded PGlite. Both speak the same SQL and run the same migrations, so the rest of the
 * service never knows which one it has.
 */
export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Db extends Queryable {
  readonly kind: "postgres" | "pglite";
  /** Runs `fn` inside one transaction; it commits when `fn` resolves and rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
