/**
 * Records refused sponsorship requests without a database write per request. A refusal is the
 * one outcome an attacker holding a project's key can repeat at the rate limit's pace (or far
 * faster as 429s), so each instance keeps refusals in memory and writes them in one statement
 * per batch: about once a second (REFUSAL_FLUSH_MS), or sooner when FLUSH_ROWS have gathered.
 *
 * - Counts are exact: every refusal adds one to its (project, UTC day, chain, code) count, and a
 *   batch adds its counts to refusal_days with one upsert per key.
 * - Details (what was asked) are a sample: at most `detailPerMinute` rows per project and clock
 *   minute on this instance are kept; the rest are only counted. With N instances a project gets
 *   at most N × detailPerMinute detailed rows a minute.
 * - What is lost at a crash: the refusals of the last flush interval (about a second), counts
 *   and details. A clean shutdown (stop) flushes. A failed flush (database away) keeps its
 *   counts for the next one and drops its details beyond MAX_PENDING_DETAILS.
 *
 * Granted requests never reach this module; see refusals/capture.ts.
 */
import type { Queryable } from "../db/db.ts";

export interface RefusalRecord {
  projectId: string;
  atMs: number;
  code: string;
  status: number;
  rpcCode: number | null;
  route: string;
  apiKeyId: number | null;
  sender: string | null;
  target: string | null;
  selector: string | null;
  chainId: number | null;
  estimatedGas: string | null;
  ruleId: string | null;
  requestId: string | null;
}

export interface RefusalRecorder {
  /** Counts the refusal and keeps its detail if the project's sample for this minute has room. */
  record(r: RefusalRecord): void;
  /** Writes what is buffered now (tests, shutdown); resolves once written. */
  flush(): Promise<void>;
  /** Flushes and stops the timer; later records are flushed by the next flush() call only. */
  stop(): Promise<void>;
}

export interface RecorderOptions {
  flushIntervalMs: number;
  detailPerMinute: number;
  onError?: (err: unknown) => void;
}

/** A batch this large is written at once instead of waiting for the timer. */
export const FLUSH_ROWS = 500;
/** Details held while the database does not answer; past this they are only counted. */
export const MAX_PENDING_DETAILS = 10_000;

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

export function refusalRecorder(db: Queryable, options: RecorderOptions): RefusalRecorder {
  let counts = new Map<string, number>();
  let details: RefusalRecord[] = [];
  // Details kept per project in the current minute; cleared when the minute turns.
  let sampleMinute = -1;
  const sampled = new Map<string, number>();
  let timer: NodeJS.Timeout | null = null;
  let writing: Promise<void> | null = null;
  let stopped = false;

  const schedule = (soon: boolean) => {
    if (stopped) return;
    if (soon) {
      if (timer) clearTimeout(timer);
      timer = setTimeout(run, 0);
    } else if (!timer) {
      timer = setTimeout(run, options.flushIntervalMs);
    }
    timer.unref();
  };

  function run() {
    timer = null;
    void flush().catch((err) => options.onError?.(err));
  }

  async function write(): Promise<void> {
    if (counts.size === 0) return;
    const batchCounts = counts;
    const batchDetails = details;
    counts = new Map();
    details = [];
    try {
      await writeBatch(db, batchCounts, batchDetails);
    } catch (err) {
      // Counts go back for the next flush (added to what came meanwhile); details only while
      // the buffer has room.
      for (const [key, n] of batchCounts) counts.set(key, (counts.get(key) ?? 0) + n);
      details = [...batchDetails, ...details].slice(0, MAX_PENDING_DETAILS);
      schedule(false);
      throw err;
    }
  }

  async function flush(): Promise<void> {
    // One write at a time per instance; a flush asked for meanwhile waits, then writes the rest.
    while (writing) await writing.catch(() => {});
    writing = write().finally(() => {
      writing = null;
    });
    await writing;
  }

  return {
    record(r) {
      const key = countKey(r.projectId, Math.floor(r.atMs / DAY_MS), r.chainId ?? 0, r.code);
      counts.set(key, (counts.get(key) ?? 0) + 1);
      const minute = Math.floor(r.atMs / MINUTE_MS);
      if (minute !== sampleMinute) {
        sampleMinute = minute;
        sampled.clear();
      }
      const kept = sampled.get(r.projectId) ?? 0;
      if (kept < options.detailPerMinute && details.length < MAX_PENDING_DETAILS) {
        sampled.set(r.projectId, kept + 1);
        details.push(r);
      }
      schedule(details.length >= FLUSH_ROWS || counts.size >= FLUSH_ROWS);
    },
    flush,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      await flush();
    },
  };
}

// Fields joined by a character none of them can hold (project ids and codes are printable).
const SEP = "\u0001";
const countKey = (projectId: string, day: number, chainId: number, code: string) =>
  [projectId, day, chainId, code].join(SEP);

/**
 * One statement per batch: the detailed rows and the counts' upserts, both as JSON arrays read
 * by jsonb_to_recordset (a fixed statement text whatever the batch size). Rows of a project that
 * does not exist (never expected: a key always has its project) are skipped, not failed on.
 */
async function writeBatch(db: Queryable, counts: Map<string, number>, details: RefusalRecord[]) {
  const countRows = [...counts].map(([key, n]) => {
    const [project_id, day, chain_id, code] = key.split(SEP) as [string, string, string, string];
    return { project_id, day: new Date(Number(day) * DAY_MS).toISOString().slice(0, 10), chain_id, code, n };
  });
  const detailRows = details.map((r, seq) => ({
    seq,
    project_id: r.projectId,
    created_at: new Date(r.atMs).toISOString(),
    code: r.code,
    status: r.status,
    rpc_code: r.rpcCode,
    route: r.route,
    api_key_id: r.apiKeyId,
    sender: r.sender,
    target: r.target,
    selector: r.selector,
    chain_id: r.chainId,
    estimated_gas: r.estimatedGas,
    rule_id: r.ruleId,
    request_id: r.requestId,
  }));
  await db.query(
    `WITH detail AS (
       INSERT INTO refusals (project_id, created_at, code, status, rpc_code, route, api_key_id, sender,
                             target, selector, chain_id, estimated_gas, rule_id, request_id)
       SELECT d.project_id, d.created_at, d.code, d.status, d.rpc_code, d.route, d.api_key_id, d.sender,
              d.target, d.selector, d.chain_id, d.estimated_gas, d.rule_id, d.request_id
       FROM jsonb_to_recordset($1::jsonb) AS d(project_id text, created_at timestamptz,
              code text, status integer, rpc_code integer, route text, api_key_id bigint, sender text,
              target text, selector text, chain_id bigint, estimated_gas numeric, rule_id text,
              request_id text, seq integer)
       WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = d.project_id)
       -- Ids in the order the refusals happened: the log's tiebreak within one millisecond.
       ORDER BY d.seq
       RETURNING 1)
     INSERT INTO refusal_days (project_id, day, chain_id, code, refused)
     SELECT c.project_id, c.day, c.chain_id, c.code, c.n
     FROM jsonb_to_recordset($2::jsonb) AS c(project_id text, day date, chain_id bigint, code text, n bigint)
     WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = c.project_id)
     -- Every instance upserts in the key's order, so two batches sharing keys never deadlock.
     ORDER BY c.project_id, c.day, c.chain_id, c.code
     ON CONFLICT (project_id, day, chain_id, code)
       DO UPDATE SET refused = refusal_days.refused + EXCLUDED.refused`,
    [JSON.stringify(detailRows), JSON.stringify(countRows)],
  );
}
