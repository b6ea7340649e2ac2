/**
 * Reads of the refusal log (the writes are recorder.ts's): a page of detailed refusals, newest
 * first, and the exact counts per UTC day and code with the sponsorships of the same days, for
 * the outcome shares.
 */
import type { Queryable } from "../db/db.ts";
import { reasonOf } from "./words.ts";

export interface RefusalRow {
  id: number;
  created_at: string;
  code: string;
  reason: string;
  status: number;
  rpc_code: number | null;
  route: string;
  api_key_id: number | null;
  sender: string | null;
  target: string | null;
  selector: string | null;
  chain_id: number | null;
  estimated_gas: string | null;
  rule_id: string | null;
  request_id: string | null;
}

export interface RefusalPosition {
  atMs: number;
  id: number;
}

export interface RefusalFilters {
  code?: string | undefined;
  fromMs?: number | undefined;
  toMs?: number | undefined;
}

/**
 * A page continues after (created_at, id) of the previous page's last row: the order of the
 * index refusals_by_project, so a page at any depth reads `limit` + 1 rows.
 */
export function encodeRefusalCursor(p: RefusalPosition): string {
  return Buffer.from(`r1:${p.atMs}:${p.id}`).toString("base64url");
}

export function decodeRefusalCursor(cursor: string): RefusalPosition | null {
  const m = /^r1:([0-9]{1,15}):([1-9][0-9]{0,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!m) return null;
  const position = { atMs: Number(m[1]), id: Number(m[2]) };
  // Only the exact encoding counts: base64url decoding skips characters it does not know.
  return encodeRefusalCursor(position) === cursor ? position : null;
}

export async function listRefusals(
  db: Queryable,
  projectId: string,
  page: { limit: number; after: RefusalPosition | null; filters: RefusalFilters },
): Promise<{ refusals: RefusalRow[]; nextCursor?: string }> {
  const { limit, after, filters } = page;
  const params: unknown[] = [projectId, limit + 1];
  const where = ["project_id = $1"];
  const add = (clause: (n: string) => string, value: unknown) => {
    params.push(value);
    where.push(clause(`$${params.length}`));
  };
  if (filters.code !== undefined) add((n) => `code = ${n}`, filters.code);
  if (filters.fromMs !== undefined) add((n) => `created_at >= ${n}`, new Date(filters.fromMs));
  if (filters.toMs !== undefined) add((n) => `created_at < ${n}`, new Date(filters.toMs));
  if (after) {
    params.push(new Date(after.atMs), after.id);
    where.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`);
  }
  type Stored = Omit<RefusalRow, "reason" | "created_at" | "id" | "api_key_id" | "chain_id"> & {
    id: string;
    api_key_id: string | null;
    chain_id: string | null;
    created_at: Date | string;
  };
  const rows = await db.query<Stored>(
    `SELECT id::text AS id, created_at, code, status, rpc_code, route, api_key_id::text AS api_key_id, sender,
       target, selector, chain_id::text AS chain_id, estimated_gas::text AS estimated_gas, rule_id, request_id
     FROM refusals WHERE ${where.join(" AND ")}
     ORDER BY created_at DESC, id DESC LIMIT $2`,
    params,
  );
  const shown: RefusalRow[] = rows.slice(0, limit).map((r) => ({
    ...r,
    id: Number(r.id),
    api_key_id: r.api_key_id === null ? null : Number(r.api_key_id),
    chain_id: r.chain_id === null ? null : Number(r.chain_id),
    created_at: new Date(r.created_at).toISOString(),
    reason: reasonOf(r.code),
  }));
  const last = shown[shown.length - 1];
  return {
    refusals: shown,
    ...(rows.length > limit && last
      ? { nextCursor: encodeRefusalCursor({ atMs: Date.parse(last.created_at), id: last.id }) }
      : {}),
  };
}

export interface RefusalCounts {
  /** Refusals in the range, all codes. */
  refused: number;
  /** Authorizations granted in the range on every chain (the daily rollups' `authorized`), for the shares. */
  authorized: number;
  byCode: { code: string; reason: string; refused: number }[];
  days: { day: string; refused: number; authorized: number; byCode: Record<string, number> }[];
}

/** Exact counts per UTC day (from..to, both included, YYYY-MM-DD) and per code, from the rollups. */
export async function refusalCounts(
  db: Queryable,
  projectId: string,
  from: string,
  to: string,
): Promise<RefusalCounts> {
  const [refused, granted] = await Promise.all([
    db.query<{ day: string; code: string; n: string }>(
      `SELECT day::text AS day, code, sum(refused)::text AS n FROM refusal_days
       WHERE project_id = $1 AND day BETWEEN $2::date AND $3::date
       GROUP BY day, code ORDER BY day, code`,
      [projectId, from, to],
    ),
    db.query<{ day: string; authorized: string }>(
      `SELECT g.day::date::text AS day, COALESCE(r.authorized, 0)::text AS authorized
       FROM generate_series($2::date, $3::date, interval '1 day') g(day)
       LEFT JOIN (SELECT day, sum(authorized) AS authorized FROM rollup_project_days
                  WHERE project_id = $1 AND day BETWEEN $2::date AND $3::date GROUP BY day) r
         ON r.day = g.day::date
       ORDER BY g.day`,
      [projectId, from, to],
    ),
  ]);
  const days = granted.map((g) => ({
    day: g.day,
    refused: 0,
    authorized: Number(g.authorized),
    byCode: {} as Record<string, number>,
  }));
  const byDay = new Map(days.map((d) => [d.day, d]));
  const byCode = new Map<string, number>();
  for (const r of refused) {
    const n = Number(r.n);
    const day = byDay.get(r.day);
    if (day) {
      day.refused += n;
      day.byCode[r.code] = n;
    }
    byCode.set(r.code, (byCode.get(r.code) ?? 0) + n);
  }
  return {
    refused: days.reduce((sum, d) => sum + d.refused, 0),
    authorized: days.reduce((sum, d) => sum + d.authorized, 0),
    byCode: [...byCode]
      .map(([code, n]) => ({ code, reason: reasonOf(code), refused: n }))
      .sort((a, b) => b.refused - a.refused || a.code.localeCompare(b.code)),
    days,
  };
}
