import type { Db } from "../db/db.ts";

/**
 * What autovacuum does for PostgreSQL, for the embedded store, which has none: PGlite runs
 * PostgreSQL in single-user mode, where no autovacuum worker ever starts (checked: 280,552 updates
 * left autovacuum_count and autoanalyze_count at 0). Without it, nothing in an embedded store is
 * ever vacuumed, analysed or frozen:
 * - dead index entries stay. The webhook claim reads the due deliveries in due order, and every
 *   delivered row leaves its entry at the front of that order until a vacuum: a claim took 6.1 ms
 *   at 40,000 delivered deliveries and 7.2 ms at 100,000, against 4.2-4.3 ms once vacuumed
 *   (PGlite on this 2-core machine, 2026-11-30), and it keeps growing with every event ever sent;
 * - the planner has no statistics, and a plan PostgreSQL caches (PL/pgSQL's, inside every
 *   reservation) is never made again as tables grow, since only a vacuum or an analyse
 *   invalidates it;
 * - no transaction id is ever frozen, and single-user mode does not stop at the wraparound limit
 *   the way a postmaster does.
 *
 * So each upkeep pass of an embedded store vacuums the tables that churned, by autovacuum's own
 * default rules: a vacuum when dead rows pass 50 + 20 % of the live ones, an analyse when rows
 * changed since the last analyse pass 50 + 10 %, and a freezing vacuum when the table's oldest
 * transaction id is older than 200 million. PGlite has one connection, so a vacuum holds every
 * other statement until it ends (164 ms for webhook_deliveries at 100,000 rows): one table at a
 * time, at most MAX_TABLES_PER_PASS per pass, the most churned first. PostgreSQL has autovacuum,
 * and this step leaves it alone.
 */

/** Tables vacuumed or analysed in one pass at most; the rest wait for the next pass. */
const MAX_TABLES_PER_PASS = 4;
/** autovacuum_vacuum_threshold, autovacuum_vacuum_scale_factor, and the analyse pair. */
const VACUUM_BASE = 50;
const VACUUM_SCALE = 0.2;
const ANALYZE_BASE = 50;
const ANALYZE_SCALE = 0.1;
/** autovacuum_freeze_max_age. */
const FREEZE_AGE = 200_000_000;

export interface TableUpkeep {
  table: string;
  /** What ran: a vacuum (with an analyse), a freezing one, or an analyse alone. */
  kind: "vacuum" | "freeze" | "analyze";
  /** Dead rows the statistics counted before it. */
  deadRows: number;
  /** How long it held the store. */
  ms: number;
}

export async function vacuumChurnedTables(db: Db): Promise<TableUpkeep[]> {
  if (db.kind !== "pglite") return [];
  // The one connection's counts reach pg_stat_user_tables at most once a second; this makes the
  // next statement see them all.
  await db.query("SELECT pg_stat_force_next_flush()");
  const due = await db.query<{ relname: string; dead: number; kind: TableUpkeep["kind"] }>(
    `SELECT relname, dead,
       CASE WHEN freeze_due THEN 'freeze' WHEN vacuum_due THEN 'vacuum' ELSE 'analyze' END AS kind
     FROM (
       SELECT s.relname, s.n_dead_tup::float8 AS dead, s.n_dead_tup + s.n_mod_since_analyze AS churn,
         age(c.relfrozenxid) > $5::int AS freeze_due,
         s.n_dead_tup > $1::float8 + $2::float8 * s.n_live_tup AS vacuum_due,
         s.n_mod_since_analyze > $3::float8 + $4::float8 * s.n_live_tup AS analyze_due
       FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
       WHERE s.schemaname = current_schema()) t
     WHERE freeze_due OR vacuum_due OR analyze_due
     ORDER BY churn DESC, relname
     LIMIT $6::int`,
    [VACUUM_BASE, VACUUM_SCALE, ANALYZE_BASE, ANALYZE_SCALE, FREEZE_AGE, MAX_TABLES_PER_PASS],
  );
  const done: TableUpkeep[] = [];
  for (const t of due) {
    // The name comes from the catalog; quoted as an identifier all the same.
    const table = `"${t.relname.replaceAll('"', '""')}"`;
    const statement =
      t.kind === "freeze"
        ? `VACUUM (FREEZE, ANALYZE) ${table}`
        : t.kind === "vacuum"
          ? `VACUUM (ANALYZE) ${table}`
          : `ANALYZE ${table}`;
    const started = performance.now();
    await db.query(statement);
    done.push({
      table: t.relname,
      kind: t.kind,
      deadRows: Number(t.dead),
      ms: Math.round(performance.now() - started),
    });
  }
  return done;
}
