/**
 * Reads that tolerate a little lag, served by streaming replicas (DATABASE_READ_URL) when they are
 * close enough to the primary, by the primary otherwise.
 *
 * How close a replica is. `now() - pg_last_xact_replay_timestamp()` is the usual measure, and it
 * is wrong both ways here: on an idle primary it grows without bound although the replica has
 * everything, and it says nothing about commits whose WAL has not reached the replica at all.
 * Instead, every `checkEveryMs` the monitor notes the time and then asks the primary for its
 * current WAL position; every commit made before that time lies at or before that position. A
 * replica that has replayed up to position r therefore holds every commit made before the latest
 * noted time whose position is ≤ r, and its lag is at most `now - that time` (plus the
 * interval the next check may take to notice). When no noted position is ≤ r, or the replica did
 * not answer its last check, or it answers but is no longer in recovery (promoted: it no longer
 * follows this primary), the replica is not used.
 *
 * What is routed here and what is not (services.ts, the routes): analytics, the events list,
 * the refusal log, deposit history and the funds parity report read through this router; they
 * are derived from authorizations, refusals and settlements, and a read a second old says the
 * same thing a moment later.
 * Who may read (membership, API keys, roles) is always checked on the primary, so a revoked
 * member or key loses access at once whatever the replicas hold; and every read of something the
 * dashboard itself writes (settings, keys, allowlists, policies, webhooks) goes to the primary,
 * which is what gives the dashboard read-your-writes. Chain parity compares the chain's live
 * state with the ledger and reads the primary too.
 *
 * A replica that fails a query (gone, restarting, or a query cancelled by a recovery conflict)
 * is marked down until its next good check, and the query is asked again of the primary: a lost
 * replica costs a failed attempt, never an error.
 */
import pg from "pg";
import type { Db, Queryable } from "./db.ts";
import { SESSION_OPTIONS } from "./postgres.ts";
import { asUnavailable, DatabaseUnavailable } from "./unavailable.ts";

export interface ReplicaState {
  /** Position in DATABASE_READ_URL, from 0 (the URL itself is never shown: it may carry a password). */
  index: number;
  /** Answered its last check, is in recovery, and its lag is known. */
  up: boolean;
  /** Upper bound of its lag in milliseconds; null when unknown (down, or behind every noted position). */
  lagMs: number | null;
  /** Why it is not used, when it is not. */
  detail?: string;
}

/** Lag-tolerant reads: single statements, or several that must see one snapshot. */
export interface Reads extends Queryable {
  /**
   * Runs `fn`'s reads in one read-only REPEATABLE READ transaction on one server, so that they
   * all see the same moment (a report that adds up one table against another).
   */
  snapshot<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
}

/** Reads with no replicas: everything on the primary. */
export function primaryReads(db: Db): Reads {
  return { query: (sql, params) => db.query(sql, params), snapshot: (fn) => primarySnapshot(db, fn) };
}

function primarySnapshot<T>(db: Db, fn: (q: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    return fn(tx);
  });
}

export interface ReadRouter extends Reads {
  /** The replicas as of their last check. */
  states(): ReplicaState[];
  /** Runs one round of checks now (the timer runs them every `checkEveryMs`). */
  check(): Promise<void>;
  start(): void;
  close(): Promise<void>;
}

export interface ReadRouterOptions {
  /** Replicas lagging more than this are skipped. */
  maxLagMs: number;
  checkEveryMs?: number;
  statementTimeoutMs?: number;
  now?: () => number;
  /** Called for each read with where it went. */
  routed?: (target: "replica" | "primary") => void;
  /** Called after every round of checks. */
  checked?: (states: ReplicaState[]) => void;
}

/** How many noted primary positions are kept: enough to place a replica up to a minute behind. */
const SAMPLES_KEPT = 240;

interface Sample {
  at: number;
  lsn: bigint;
}

interface Replica {
  index: number;
  pool: pg.Pool;
  state: ReplicaState;
}

export function readRouter(primary: Db, urls: readonly string[], options: ReadRouterOptions): ReadRouter {
  const now = options.now ?? Date.now;
  const checkEveryMs = options.checkEveryMs ?? 500;
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const replicas: Replica[] = urls.map((url, index) => {
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      options: `${SESSION_OPTIONS} -c statement_timeout=${statementTimeoutMs}`,
      // A replica that does not answer is skipped after a second: the primary can always serve.
      connectionTimeoutMillis: 1000,
      query_timeout: statementTimeoutMs + 2000,
      keepAlive: true,
    });
    pool.on("error", () => {});
    return { index, pool, state: { index, up: false, lagMs: null, detail: "not checked yet" } };
  });
  const samples: Sample[] = [];
  let next = 0;
  let timer: NodeJS.Timeout | null = null;
  let checking: Promise<void> | null = null;

  const markDown = (replica: Replica, detail: string) => {
    replica.state = { index: replica.index, up: false, lagMs: null, detail };
  };

  const checkOne = async (replica: Replica) => {
    try {
      const [row] = (
        await replica.pool.query<{ lsn: string | null; recovering: boolean }>(
          "SELECT pg_last_wal_replay_lsn()::text AS lsn, pg_is_in_recovery() AS recovering",
        )
      ).rows;
      if (!row?.recovering) return markDown(replica, "not in recovery: not a replica of the primary");
      if (row.lsn === null) return markDown(replica, "has replayed nothing yet");
      const replayed = parseLsn(row.lsn);
      // The latest noted time whose position the replica has reached.
      let reached: Sample | undefined;
      for (let i = samples.length - 1; i >= 0; i--) {
        if (samples[i]!.lsn <= replayed) {
          reached = samples[i];
          break;
        }
      }
      if (!reached) return markDown(replica, "further behind than the positions this instance noted");
      const lagMs = Math.max(0, now() - reached.at);
      replica.state =
        lagMs <= options.maxLagMs
          ? { index: replica.index, up: true, lagMs }
          : {
              index: replica.index,
              up: true,
              lagMs,
              detail: `lags ${lagMs} ms, more than DATABASE_READ_MAX_LAG_MS (${options.maxLagMs})`,
            };
    } catch (err) {
      markDown(replica, `unreachable: ${describe(err)}`);
    }
  };

  const runChecks = async () => {
    const at = now();
    try {
      const [row] = await primary.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn");
      samples.push({ at, lsn: parseLsn(row!.lsn) });
      if (samples.length > SAMPLES_KEPT) samples.splice(0, samples.length - SAMPLES_KEPT);
    } catch {
      // The primary did not answer: nothing new is noted, and replicas age against older notes.
    }
    await Promise.all(replicas.map(checkOne));
    options.checked?.(replicas.map((r) => r.state));
  };

  const check = () => {
    checking ??= runChecks().finally(() => {
      checking = null;
    });
    return checking;
  };

  const usable = () =>
    replicas.filter((r) => r.state.up && r.state.lagMs !== null && r.state.lagMs <= options.maxLagMs);

  /** The replica's own trouble (gone, restarting, a recovery conflict) rather than the query's. */
  const replicaTrouble = (err: unknown) => {
    const failure = asUnavailable(err);
    return failure instanceof DatabaseUnavailable || isRecoveryConflict(err) ? null : failure;
  };

  const replicaSnapshot = async <T>(replica: Replica, fn: (q: Queryable) => Promise<T>): Promise<T> => {
    const client = await replica.pool.connect();
    let broken: Error | undefined;
    client.on("error", () => {});
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      const result = await fn({
        query: async <R>(sql: string, params?: unknown[]) =>
          (await client.query(sql, params as unknown[])).rows as R[],
      });
      await client.query("COMMIT");
      return result;
    } catch (err) {
      broken = err as Error;
      throw err;
    } finally {
      // Whatever went wrong, this connection is not handed out again mid-transaction.
      client.release(broken);
    }
  };

  /**
   * Runs a read on the next usable replica, or on the primary when there is none or the replica
   * fails for its own reasons. Only the replica's own trouble moves the read to the primary; a
   * query the replica refused for what it says (a syntax error, a bad parameter) would fail there
   * too, and is thrown.
   */
  const route = async <T>(onReplica: (r: Replica) => Promise<T>, onPrimary: () => Promise<T>): Promise<T> => {
    const candidates = usable();
    if (candidates.length > 0) {
      const replica = candidates[next++ % candidates.length]!;
      try {
        const result = await onReplica(replica);
        options.routed?.("replica");
        return result;
      } catch (err) {
        const own = replicaTrouble(err);
        if (own) throw own;
        markDown(replica, `failed a read: ${describe(err)}`);
      }
    }
    const result = await onPrimary();
    options.routed?.("primary");
    return result;
  };

  return {
    snapshot: (fn) =>
      route(
        (replica) => replicaSnapshot(replica, fn),
        () => primarySnapshot(primary, fn),
      ),
    query: <T>(sql: string, params?: unknown[]) =>
      route(
        async (replica) => (await replica.pool.query(sql, params as unknown[])).rows as T[],
        () => primary.query<T>(sql, params),
      ),
    states: () => replicas.map((r) => ({ ...r.state })),
    check,
    start() {
      if (timer || replicas.length === 0) return;
      timer = setInterval(() => void check(), checkEveryMs);
      timer.unref();
      void check();
    },
    async close() {
      if (timer) clearInterval(timer);
      timer = null;
      await checking;
      await Promise.all(replicas.map((r) => r.pool.end().catch(() => {})));
    },
  };
}

/** `16/B374D848` → the 64-bit WAL position. */
export function parseLsn(text: string): bigint {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) throw new Error(`not a WAL position: ${text}`);
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/**
 * 40001 with "conflict with recovery": the replica cancelled the query because replaying the
 * primary's WAL needed what it read (hot standby). The same read succeeds on the primary.
 */
function isRecoveryConflict(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === "40001" && /recovery/i.test(e.message ?? "");
}

/** A failure in words, without the URL (which may carry a password). */
function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  return e?.code ? `${e.code} ${e.message ?? ""}`.trim() : (e?.message ?? String(err));
}
