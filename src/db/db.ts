/**
 * Storage behind one small interface, with two implementations: PostgreSQL through `pg`, and
 * embedded PGlite. Both speak the same SQL and run the same migrations, so the rest of the
 * service never knows which one it has.
 */
export interface Queryable {
  /**
   * `name` marks a statement run often enough that its plan is worth keeping: PostgreSQL parses
   * it once per connection and may keep a generic plan after a few runs (the webhook claim
   * planned for 0.9 ms and ran in 0.8). Its text must be the same at every call under that name.
   * PGlite and replicas ignore it.
   */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[], name?: string): Promise<T[]>;
}

export interface Db extends Queryable {
  readonly kind: "postgres" | "pglite";
  /** Runs `fn` inside one transaction; it commits when `fn` resolves and rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
