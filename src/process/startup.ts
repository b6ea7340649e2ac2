import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { Config } from "../config.ts";
import { acquireDataDirLock, type DataDirLock, DataDirLocked } from "../db/data-dir-lock.ts";
import type { Db } from "../db/db.ts";
import { openDb } from "../db/index.ts";
import { unavailableReason } from "../db/unavailable.ts";
import { ensurePrivateDir } from "../secrets/key-files.ts";
import { exitAfterLog } from "./log.ts";

/**
 * Start-up steps that can fail for reasons an operator has to act on, each turned into one log
 * line and an exit code instead of a stack trace.
 */

/** A start-up failure: `message` is the whole story (no stack); the process exits with `exitCode`. */
export class StartupFailure extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "StartupFailure";
  }
}

/** A stop signal arrived while start-up was waiting (for the database): not a failure. */
export class StartupAborted extends Error {
  constructor(readonly signal: string) {
    super(`stopped by ${signal} before start-up finished`);
    this.name = "StartupAborted";
  }
}

/** Exit codes: 1 = could not start or stop cleanly (the environment), 2 = the configuration. */
export const EXIT_FAILURE = 1;
export const EXIT_CONFIG = 2;

export interface Store {
  db: Db;
  /** The embedded store's DATA_DIR lock; null for PostgreSQL and `memory://`. */
  lock: DataDirLock | null;
  /** Closes the database, then lets go of the lock. */
  close(): Promise<void>;
}

type StoreConfig = Pick<Config, "databaseUrl" | "dataDir" | "dbLockTimeoutMs" | "dbConnectTimeoutSec">;

/**
 * Opens the store the configuration names. Embedded: takes DATA_DIR's lock first (one process
 * per data directory), then opens PGlite, on a thread of its own with `embeddedThread` (the
 * server; the command-line tools keep it in theirs). PostgreSQL: connects, retrying with exponential backoff
 * for DB_CONNECT_TIMEOUT_SEC while the server is unreachable (it may be starting alongside this
 * service); errors that waiting will not fix (a wrong password, a missing database) fail at once.
 */
export async function openStore(
  config: StoreConfig,
  log: Logger,
  abort?: AbortSignal,
  options: { embeddedThread?: boolean } = {},
): Promise<Store> {
  if (config.databaseUrl) {
    const db = await connectPostgres(config, log, abort);
    return { db, lock: null, close: () => db.close() };
  }
  let lock: DataDirLock | null = null;
  if (config.dataDir !== "memory://") {
    ensurePrivateDir(config.dataDir);
    try {
      lock = acquireDataDirLock(config.dataDir);
    } catch (err) {
      if (err instanceof DataDirLocked) {
        throw new StartupFailure(`cannot use DATA_DIR ${config.dataDir}: ${err.message}`, EXIT_FAILURE, {
          lockFile: err.path,
          holder: err.holder,
        });
      }
      throw err;
    }
  }
  try {
    const db = await openDb(
      config,
      options.embeddedThread
        ? {
            thread: {
              // The store is gone for good: exit, so that whatever supervises the service starts it
              // again (as when PGlite failed in the service's own thread, which ended the process).
              onLost(err) {
                log.fatal({ err: firstLine(err) }, "the embedded database's thread stopped");
                lock?.release();
                exitAfterLog(log, EXIT_FAILURE);
              },
            },
          }
        : {},
    );
    return {
      db,
      lock,
      async close() {
        try {
          await db.close();
        } finally {
          lock?.release();
        }
      },
    };
  } catch (err) {
    lock?.release();
    throw new StartupFailure(`cannot open the embedded database in ${config.dataDir}: ${firstLine(err)}`);
  }
}

/** Backoff between connection attempts: 250 ms, doubling, at most 5 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(5_000, 250 * 2 ** attempt);
}

const RETRYABLE = new Set(["connection", "shutdown", "too_many_connections"]);

async function connectPostgres(config: StoreConfig, log: Logger, abort?: AbortSignal): Promise<Db> {
  const where = describeDatabaseUrl(config.databaseUrl!);
  const deadline = Date.now() + config.dbConnectTimeoutSec * 1000;
  for (let attempt = 0; ; attempt++) {
    const db = await openDb(config);
    try {
      await db.query("SELECT 1");
      if (attempt > 0) log.info({ database: where, attempts: attempt + 1 }, "database reachable");
      return db;
    } catch (err) {
      await db.close().catch(() => {});
      const reason = unavailableReason(err);
      const cause = firstLine(rootCause(err));
      if (!reason || !RETRYABLE.has(reason)) {
        throw new StartupFailure(`database ${where} refused the service: ${cause}`, EXIT_FAILURE, {
          database: where,
        });
      }
      const delay = retryDelayMs(attempt);
      if (Date.now() + delay > deadline) {
        throw new StartupFailure(
          `database ${where} unreachable after ${attempt + 1} attempts over ${config.dbConnectTimeoutSec} s (DB_CONNECT_TIMEOUT_SEC): ${cause}`,
          EXIT_FAILURE,
          { database: where, attempts: attempt + 1 },
        );
      }
      log.warn(
        { database: where, attempt: attempt + 1, retryInMs: delay, err: cause },
        "database unreachable, retrying",
      );
      // A stop signal ends the wait at once: nothing is open yet.
      try {
        await sleep(delay, undefined, { signal: abort });
      } catch {
        throw new StartupAborted(String(abort?.reason ?? "a signal"));
      }
    }
  }
}

/** postgres://user@host:port/db: enough to find it, never the password or the query string. */
export function describeDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : "";
    return `${u.protocol}//${user}${u.host}${u.pathname}`;
  } catch {
    return "(unparseable DATABASE_URL)";
  }
}

/** Why the listening socket could not be opened, in words; null for an error this does not know. */
export function listenFailure(err: unknown, host: string, port: number): StartupFailure | null {
  const code = (err as NodeJS.ErrnoException)?.code;
  const at = `${host}:${port}`;
  const details = { host, port, code };
  switch (code) {
    case "EADDRINUSE":
      return new StartupFailure(
        `port ${port} is already in use on ${host} (another instance of the service, or another program): stop it or set PORT`,
        EXIT_FAILURE,
        details,
      );
    case "EACCES":
      return new StartupFailure(
        `no permission to listen on ${at}: use a port above 1023 or grant the capability`,
        EXIT_FAILURE,
        details,
      );
    case "EADDRNOTAVAIL":
      return new StartupFailure(`HOST ${host} is not an address of this machine`, EXIT_FAILURE, details);
    default:
      return null;
  }
}

/** The first line of an error's message: what a log line can carry without a stack. */
export function firstLine(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = err.message.split("\n")[0] || err.name;
    return code && !message.includes(code) ? `${message} (${code})` : message;
  }
  return String(err);
}

/** The innermost `cause` (a store's DatabaseUnavailable wraps the driver's error). */
function rootCause(err: unknown): unknown {
  let e = err;
  for (let depth = 0; e instanceof Error && e.cause !== undefined && depth < 8; depth++) e = e.cause;
  // Node's connect to several addresses (localhost: ::1 and 127.0.0.1) fails with an AggregateError.
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors[0];
  return e;
}
