import { appendFileSync } from "node:fs";
import pg from "pg";

/**
 * `BENCH_PG_STATEMENTS=<file>`: where PostgreSQL's time goes in each scenario. The server must load
 * pg_stat_statements (shared_preload_libraries, with `pg_stat_statements.track = all` to see the
 * statements inside functions and triggers); the extension is created in the run's database. The statistics are reset before each scenario's load and the top statements by
 * execution time appended to the file after it, per response of the scenario. Execution time is
 * wall time on a saturated machine and nested statements count inside their callers too: read
 * the figures as shares, not as CPU. Planning time is counted only where the server sets
 * `pg_stat_statements.track_planning = on`, and apart from execution time.
 */
export interface StatementLog {
  reset(): Promise<void>;
  write(scenario: string, responses: number): Promise<void>;
  close(): Promise<void>;
}

export function statementLog(databaseUrl: string | null): StatementLog | null {
  const path = process.env.BENCH_PG_STATEMENTS;
  if (!path) return null;
  if (!databaseUrl) throw new Error("BENCH_PG_STATEMENTS needs DATABASE_URL (PostgreSQL)");
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  let created = false;
  return {
    async reset() {
      if (!created) await pool.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      created = true;
      await pool.query("SELECT pg_stat_statements_reset()");
    },
    async write(scenario, responses) {
      const { rows } = await pool.query<{
        calls: string;
        ms: number;
        planMs: number;
        rows: string;
        query: string;
      }>(
        `SELECT calls::text, total_exec_time AS ms, total_plan_time AS "planMs", rows::text, query FROM pg_stat_statements
         WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time + total_plan_time DESC LIMIT 30`,
      );
      const lines = [
        `# ${scenario}: ${responses} responses; µs per response, planning µs per response, calls per response, rows per call, statement`,
      ];
      for (const r of rows) {
        const query = r.query.replace(/\s+/g, " ").slice(0, 160);
        const perResponse = (Number(r.calls) / responses).toFixed(3);
        const perCall = (Number(r.rows) / Math.max(1, Number(r.calls))).toFixed(1);
        lines.push(
          `${((r.ms * 1000) / responses).toFixed(1).padStart(8)}  ${((r.planMs * 1000) / responses).toFixed(1).padStart(7)}  ${perResponse.padStart(7)}  ${perCall.padStart(7)}  ${query}`,
        );
      }
      appendFileSync(path, `${lines.join("\n")}\n\n`);
    },
    async close() {
      await pool.end();
    },
  };
}
