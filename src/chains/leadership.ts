/**
 * Which service instance runs a chain's watchers. Every instance could (their effects apply at
 * most once and cursors only move forward), but then the RPC traffic of the watchers grows with
 * the number of instances; so one instance leads each chain and the others stand by.
 *
 * On PostgreSQL the leader holds a session-level advisory lock (`pg_try_advisory_lock`) on a
 * connection of its own, outside the pool. The lock lives exactly as long as that session: a
 * leader that exits, crashes or is killed loses its connection and the server releases the lock
 * at once. The others try to take it every `retryMs`; so a new leader runs the watchers within
 * about `retryMs` of the old one's death. The leader checks its session on the same period and
 * steps down (stops its watchers) as soon as the session fails, since by then another instance
 * may hold the lock. A leader that lost its session then sits out STEP_DOWN_ROUNDS rounds before
 * it seeks the lock again, so that an instance standing by takes over rather than the one whose
 * session just failed winning the race back (in a test run, it did, and no one took over). If the leader's host vanishes from the network without closing the
 * connection, the server notices with TCP keepalive (tcp_keepalives_idle) rather than at once.
 * For a few seconds around a change two instances can run the same watcher: harmless, as above.
 *
 * The lock key is derived from the schema the service's tables live in, so services sharing a
 * database under different schemas (tests) elect their leaders separately.
 *
 * On PGlite a single process owns the data directory: it is always the leader.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { silentLog, type WatcherLog } from "./poll-loop.ts";

/** Rounds of `retryMs` a leader whose session failed waits before it seeks the lock again. */
const STEP_DOWN_ROUNDS = 3;

export interface Leadership {
  /** "lock": PostgreSQL advisory lock; "sole": this process is the only one (PGlite). */
  readonly kind: "lock" | "sole";
  leading(): boolean;
  /**
   * Starts seeking leadership. `onChange` is called with true when this instance becomes the
   * leader and false when it stops being one; calls never overlap (each is awaited).
   */
  start(onChange: (leading: boolean) => Promise<void> | void, log?: WatcherLog): void;
  /** Stops seeking; a leader steps down (onChange(false)) and releases the lock. */
  stop(): Promise<void>;
}

export function soleLeadership(): Leadership {
  let leading = false;
  let change: Promise<void> = Promise.resolve();
  let onChange: (leading: boolean) => Promise<void> | void = () => {};
  return {
    kind: "sole",
    leading: () => leading,
    start(callback) {
      onChange = callback;
      leading = true;
      change = change.then(() => onChange(true));
    },
    async stop() {
      if (leading) {
        leading = false;
        change = change.then(() => onChange(false));
      }
      await change;
    },
  };
}

/** The 64-bit advisory lock key of one chain's watchers in one schema. */
export function watcherLockKey(schema: string, chainId: number): bigint {
  const digest = createHash("sha256").update(`gas-sponsorship:watchers:${schema}:${chainId}`).digest();
  return digest.readBigInt64BE(0);
}

const SHUTDOWN = "shutting down";

export interface AdvisoryLockOptions {
  url: string;
  /** Resolves the lock key (it may need a query: the schema). */
  key: () => Promise<bigint>;
  retryMs: number;
  /** Fields every log line of this leadership carries, e.g. { chainId }. */
  context: Record<string, unknown>;
}

export function advisoryLockLeadership(options: AdvisoryLockOptions): Leadership {
  let log: WatcherLog = silentLog;
  let onChange: (leading: boolean) => Promise<void> | void = () => {};
  let running = false;
  let leading = false;
  let client: pg.Client | null = null;
  let key: bigint | null = null;
  let change: Promise<void> = Promise.resolve();
  let wake: (() => void) | null = null;
  let loop: Promise<void> | null = null;
  // Logged once per change of situation, not on every retry.
  let said: "following" | "unreachable" | null = null;
  // Rounds left to sit out after losing the lock with its session (see the module's comment).
  let sittingOut = 0;

  const setLeading = (value: boolean, reason: string) => {
    if (leading === value) return;
    leading = value;
    if (value) log.info({ ...options.context }, "leading the chain watchers");
    else if (reason === SHUTDOWN)
      log.info({ ...options.context, reason }, "stopped leading the chain watchers");
    else log.warn({ ...options.context, reason }, "stopped leading the chain watchers");
    change = change
      .then(() => onChange(value))
      .catch((err: Error) => {
        log.error({ ...options.context, err: err.message }, "chain watchers failed to change state");
      });
  };

  const dropClient = () => {
    const old = client;
    client = null;
    old?.end().catch(() => {});
  };

  const connect = async (): Promise<pg.Client> => {
    const c = new pg.Client({
      connectionString: options.url,
      application_name: "gss-watcher-leader",
      keepAlive: true,
      connectionTimeoutMillis: Math.max(2_000, options.retryMs),
      query_timeout: Math.max(2_000, options.retryMs),
    });
    // A lost session ends the leadership at once, before the next check.
    c.on("error", () => {
      if (client === c) {
        dropClient();
        if (leading) sittingOut = STEP_DOWN_ROUNDS;
        setLeading(false, "the leadership's database connection was lost");
      }
    });
    await c.connect();
    return c;
  };

  const attempt = async () => {
    if (sittingOut > 0) {
      sittingOut--;
      return;
    }
    try {
      key ??= await options.key();
      client ??= await connect();
      if (leading) {
        // The lock is the session's: as long as the session answers, it is still ours.
        await client.query("SELECT 1");
        return;
      }
      const rows = await client.query<{ locked: boolean }>(
        "SELECT pg_try_advisory_lock($1::bigint) AS locked",
        [key.toString()],
      );
      if (rows.rows[0]?.locked) {
        said = null;
        setLeading(true, "");
      } else if (said !== "following") {
        said = "following";
        log.info({ ...options.context }, "another instance leads the chain watchers; standing by");
      }
    } catch (err) {
      dropClient();
      if (leading) sittingOut = STEP_DOWN_ROUNDS;
      setLeading(false, "the leadership's database connection failed");
      if (said !== "unreachable") {
        said = "unreachable";
        log.warn(
          { ...options.context, err: (err as Error).message },
          "cannot reach the database to lead the chain watchers",
        );
      }
    }
  };

  const sleep = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, options.retryMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  return {
    kind: "lock",
    leading: () => leading,
    start(callback, logger) {
      if (running) return;
      running = true;
      onChange = callback;
      if (logger) log = logger;
      loop = (async () => {
        while (running) {
          await attempt();
          if (running) await sleep();
        }
      })();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
      // Stop the watchers first, then release the lock by ending the session.
      setLeading(false, SHUTDOWN);
      await change;
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}
