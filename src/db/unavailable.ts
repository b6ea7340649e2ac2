/**
 * Which database failures mean "not now" rather than "wrong". A request that meets one of these
 * changed nothing it can observe (its statement failed or its transaction rolled back) and may
 * simply be tried again a moment later, so the HTTP edge answers 503 with Retry-After instead of
 * a 500. Both stores report through here: `pg` with SQLSTATEs, Node socket errors and a handful
 * of message-only errors, PGlite with its own "closed" errors.
 */

export type UnavailableReason =
  /** The server cannot be reached, or the connection to it was lost or timed out. */
  | "connection"
  /** The server is shutting down, crashed, or is starting and not yet accepting connections. */
  | "shutdown"
  /** The server refused a connection: too many clients. */
  | "too_many_connections"
  /** A row or object lock was not granted within lock_timeout. */
  | "lock_timeout"
  /** A statement ran past statement_timeout (or was cancelled). */
  | "statement_timeout"
  /**
   * The server rolled the transaction back to break a deadlock or a serialization conflict with
   * another transaction: nothing of it was applied, and the same request succeeds when retried.
   */
  | "contention"
  /** This process's own handle on the store is closed (PGlite closed, pool ended). */
  | "closed";

export class DatabaseUnavailable extends Error {
  constructor(
    readonly reason: UnavailableReason,
    options?: { cause?: unknown },
  ) {
    super(`database unavailable (${reason})`, options);
    this.name = "DatabaseUnavailable";
  }

  /** The driver's own message, for a log line: which of the causes of `reason` it was. */
  get driverMessage(): string {
    return this.cause instanceof Error ? this.cause.message : String(this.cause ?? "");
  }

  /** True when the connection that raised it cannot be used again (the pool should drop it). */
  get connectionLost(): boolean {
    return this.reason === "connection" || this.reason === "shutdown";
  }
}

/** lock_timeout when the configuration does not say otherwise (DB_LOCK_TIMEOUT_MS). */
export const DEFAULT_LOCK_TIMEOUT_MS = 2000;

// SQLSTATE → reason. Class 08 (connection exception) is matched by its prefix below.
const SQLSTATES: Record<string, UnavailableReason> = {
  "57P01": "shutdown", // admin_shutdown: the server is stopping (pg_ctl stop -m fast)
  "57P02": "shutdown", // crash_shutdown: another backend crashed, the server is restarting
  "57P03": "shutdown", // cannot_connect_now: starting up, shutting down or in recovery
  "53300": "too_many_connections",
  "55P03": "lock_timeout", // lock_not_available
  "57014": "statement_timeout", // query_canceled
  "40P01": "contention", // deadlock_detected
  "40001": "contention", // serialization_failure
};

// Node socket errors seen while connecting to or talking with the server.
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

// Errors `pg` and PGlite raise with a message and no code. Pinned against the real libraries by
// test/db-unavailable.test.ts, which stops a real server under load.
const MESSAGES: [RegExp, UnavailableReason][] = [
  [/^Connection terminated/, "connection"], // "… unexpectedly", "… due to connection timeout"
  [/^timeout exceeded when trying to connect$/, "connection"], // pool: no client in time
  [/^Query read timeout$/, "connection"], // client-side query_timeout
  [/is not queryable$/, "connection"], // a client whose connection already failed
  [/^Cannot use a pool after calling end on the pool$/, "closed"],
  [/^PGlite is clos(ed|ing)$/, "closed"],
];

/** Why `err` means the database is unavailable, or null when it is any other failure. */
export function unavailableReason(err: unknown): UnavailableReason | null {
  if (err instanceof DatabaseUnavailable) return err.reason;
  if (typeof err !== "object" || err === null) return null;
  const { code, message, errors } = err as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof code === "string") {
    if (/^08[0-9A-Z]{3}$/.test(code)) return "connection";
    const known = SQLSTATES[code];
    if (known) return known;
    if (SOCKET_CODES.has(code)) return "connection";
  }
  if (typeof message === "string") {
    for (const [pattern, reason] of MESSAGES) if (pattern.test(message)) return reason;
  }
  // Node's happy-eyeballs connect (several addresses for one host) fails with an AggregateError.
  if (Array.isArray(errors) && errors.length > 0) {
    const reasons = errors.map(unavailableReason);
    if (reasons.every((r) => r !== null)) return reasons[0]!;
  }
  return null;
}

/** `err` as a DatabaseUnavailable when it is one, unchanged otherwise. For the stores' wrappers. */
export function asUnavailable(err: unknown): unknown {
  if (err instanceof DatabaseUnavailable) return err;
  const reason = unavailableReason(err);
  return reason ? new DatabaseUnavailable(reason, { cause: err }) : err;
}

/**
 * The DatabaseUnavailable behind `err`, if any: the error itself or one in its chain of causes (a
 * caller may have wrapped it). Only errors the stores wrapped count: a refused connection to
 * Redis or to a chain's RPC is not the database's.
 */
export function databaseUnavailable(err: unknown): DatabaseUnavailable | null {
  let e = err;
  for (let depth = 0; e instanceof Error && depth < 8; depth++) {
    if (e instanceof DatabaseUnavailable) return e;
    e = e.cause;
  }
  return null;
}
