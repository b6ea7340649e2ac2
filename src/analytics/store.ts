import assert from "node:assert/strict";
import { hex, projectAddressKey, projectKey } from "../db/bytes.ts";
import type { Queryable } from "../db/db.ts";
import { tankBalanceSql } from "../ledger/ledger.ts";
import { type MoneySummary, moneySummary, SPEND_WINDOW_DAYS } from "./money.ts";

export const DAY_MS = 86_400_000;

export interface Overview {
  /** The chain the figures are for. */
  chainId: number;
  totalSponsored: number;
  totalGasSaved: string;
  activeUsers: number;
  today: { sponsored: number; dailyCapRemaining: string };
  topContracts: { address: string; calls: number; gasUsed: string }[];
  /** Every chain's settled totals, for the breakdown. */
  chains: { chainId: number; totalSponsored: number; totalGasSaved: string }[];
}

/**
 * Figures over operations settled on chain (DESIGN.md §3), for one project on one chain, read
 * from the rollups of migrations 012, 015 and 039: a bounded number of rows whatever the history
 * (one totals row per chain, at most 31 day rows, at most ten targets, and the senders whose
 * latest operation falls on the day 30 days ago). activeUsers counts the distinct senders with a
 * settled operation on the chain in the last 30 days, to the microsecond.
 */
export async function overview(
  db: Queryable,
  projectId: string,
  chainId: number,
  nowMs: number,
): Promise<Overview> {
  const dayStart = new Date(nowMs);
  dayStart.setUTCHours(0, 0, 0, 0);
  const day = dayStart.toISOString().slice(0, 10);
  const monthAgo = new Date(nowMs - 30 * DAY_MS);
  const [totals, active, today, top, tank] = await Promise.all([
    db.query<{ chain_id: number; n: string; saved: string }>(
      `SELECT chain_id, (success + reverted)::text AS n, cost_wei::text AS saved
       FROM rollup_project_totals WHERE project_id = $1 ORDER BY chain_id`,
      [projectId],
    ),
    // Senders whose latest settled operation is at or after monthAgo: whole days after its day
    // are one row each; the rest of its own day is an index range over the senders whose latest
    // operation falls there (at most one day's worth). Later days a clock ahead wrote count too.
    db.query<{ n: string }>(
      `SELECT ((SELECT COALESCE(sum(latest_senders), 0) FROM rollup_project_days
                WHERE project_id = $1 AND chain_id = $5 AND day > $2::date)
             + (SELECT count(*) FROM rollup_project_senders
                WHERE project_id = $1 AND chain_id = $5 AND last_settled_at >= $3 AND last_settled_at < $4))::text AS n`,
      [projectId, monthAgo.toISOString().slice(0, 10), monthAgo, dayAfter(monthAgo), chainId],
    ),
    // settled_at >= the start of today: today's row, and any later one a clock ahead wrote.
    db.query<{ n: string }>(
      `SELECT COALESCE(sum(success + reverted), 0)::text AS n FROM rollup_project_days
       WHERE project_id = $1 AND chain_id = $3 AND day >= $2::date`,
      [projectId, day, chainId],
    ),
    db.query<{ address: string; calls: string; gas_used: string }>(
      `SELECT target AS address, calls::text AS calls, gas_used::text AS gas_used
       FROM rollup_project_targets WHERE project_id = $1 AND chain_id = $2 AND calls > 0
       ORDER BY calls DESC, target LIMIT 10`,
      [projectId, chainId],
    ),
    db.query<{ balance: string; cap: string | null; spent: string | null }>(
      `SELECT ${tankBalanceSql("p", "$3")}::text AS balance, p.daily_cap::text AS cap, u.spent::text AS spent
       FROM projects p LEFT JOIN daily_usage u
         ON u.project_id = p.id AND u.chain_id = $3 AND u.day = $2::date
       WHERE p.id = $1`,
      [projectId, day, chainId],
    ),
  ]);
  const t = tank[0]!;
  const chain = totals.find((r) => r.chain_id === chainId);
  return {
    chainId,
    totalSponsored: Number(chain?.n ?? 0),
    totalGasSaved: chain?.saved ?? "0",
    activeUsers: Number(active[0]!.n),
    today: {
      sponsored: Number(today[0]!.n),
      dailyCapRemaining: dailyCapRemaining(t.balance, t.cap, t.spent),
    },
    topContracts: top.map((r) => ({ address: r.address, calls: Number(r.calls), gasUsed: r.gas_used })),
    chains: totals.map((r) => ({ chainId: r.chain_id, totalSponsored: Number(r.n), totalGasSaved: r.saved })),
  };
}

/** The start of the UTC day after the one `at` falls in. */
function dayAfter(at: Date): Date {
  const d = new Date(at);
  d.setUTCHours(24, 0, 0, 0);
  return d;
}

/** What can still be spent today: the cap left (never more than the tank), or the tank itself. */
export function dailyCapRemaining(balance: string, cap: string | null, spent: string | null): string {
  const tank = BigInt(balance);
  if (cap === null) return tank.toString();
  const left = BigInt(cap) - BigInt(spent ?? "0");
  const remaining = left < 0n ? 0n : left;
  return (remaining < tank ? remaining : tank).toString();
}

export interface EventRecord {
  id: number;
  sender: string;
  target: string;
  status: string;
  estimated_gas: number;
  actual_gas: number;
  created_at: string;
  selector: string;
  auth_id: string;
  max_gas_cost: string;
  actual_gas_cost: string;
  tx_hash: string | null;
  user_op_hash: string | null;
  /** Unix seconds: the end of the authorization's validity window. */
  valid_until: number;
  /** The chain the operation is for, whose tank paid for it. */
  chain_id: number;
}

export interface EventFilters {
  status?: string;
  /** Lowercase addresses. */
  sender?: string;
  target?: string;
  /** One chain's events alone. */
  chainId?: number;
  /** created_at >= from and < to (ms). */
  fromMs?: number;
  toMs?: number;
}

export interface EventsPage {
  events: EventRecord[];
  total: number;
  /** True when `total` stopped counting at FILTERED_TOTAL_CAP (filters other than status only). */
  totalCapped?: true;
  /** Present when more events follow this page: pass it back as `cursor` for the next one. */
  nextCursor?: string;
}

/** Past this many matches, a filtered `total` stops counting (and says so with totalCapped). */
export const FILTERED_TOTAL_CAP = 10_000;

/** The cursor is opaque to clients: the id of the last event of the page, newest first. */
export function encodeCursor(id: number): string {
  return Buffer.from(`e1:${id}`).toString("base64url");
}

/** The id a cursor continues after, or null when it is not one of ours. */
export function decodeCursor(cursor: string): number | null {
  const m = /^e1:([1-9][0-9]{0,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  // Only the exact encoding counts: base64url decoding skips characters it does not know.
  return m && encodeCursor(Number(m[1])) === cursor ? Number(m[1]) : null;
}

const EVENT_COLUMNS = `id, sender, target, status, estimated_gas, actual_gas, created_at, selector,
  ${hex("auth_id")} AS auth_id, max_gas_cost::text AS max_gas_cost, actual_gas_cost::text AS actual_gas_cost,
  ${hex("tx_hash")} AS tx_hash, ${hex("user_op_hash")} AS user_op_hash,
  valid_until, chain_id`;

/**
 * One page of the project's events, newest first. Keyset (`afterId`, from a cursor) reads one
 * index range of `limit` rows; an unfiltered `offset` is a range of the project's sequence
 * numbers (one index seek at any depth); a filtered one skips through an index scan of ids
 * (bounded by the route's maximum offset) and fetches only the page's rows. `total` comes from the rollups for
 * no filter or a status filter; other filters count matches up to FILTERED_TOTAL_CAP.
 */
export async function events(
  db: Queryable,
  projectId: string,
  page: { limit: number; offset: number; afterId?: number | null; filters?: EventFilters },
): Promise<EventsPage> {
  const { limit, offset, afterId = null, filters = {} } = page;
  // A status other than success is looked up in sponsorship_status_index (migration 021), which
  // holds only those rows; success, most of the history, is a filter on the project's ids.
  const byStatus = filters.status !== undefined && filters.status !== "success";
  const s = byStatus ? "s." : "";
  const where = [byStatus ? "x.project_id = $1" : "project_id = $1"];
  const params: unknown[] = [projectId];
  const add = (clause: string, value: unknown) => {
    params.push(value);
    where.push(clause.replaceAll("?", `$${params.length}`));
  };
  if (filters.status) add(byStatus ? "x.status = ?" : "status = ?", filters.status);
  // Through the index on the digest of the project and the address (migration 045), then the
  // address itself ($1, the project, is compared above).
  const byAddress = (column: string) =>
    `${projectAddressKey(`${s}project_id`, `${s}${column}`)} = ${projectAddressKey("$1", "?")} AND ${s}${column} = ?`;
  if (filters.sender) add(byAddress("sender"), filters.sender);
  if (filters.target) add(byAddress("target"), filters.target);
  if (filters.chainId !== undefined) add(`${s}chain_id = ?`, filters.chainId);
  if (filters.fromMs !== undefined) add(`${s}created_at >= ?`, new Date(filters.fromMs));
  if (filters.toMs !== undefined) add(`${s}created_at < ?`, new Date(filters.toMs));
  const from = byStatus
    ? "sponsorship_status_index x JOIN sponsorships s ON s.id = x.sponsorship_id"
    : "sponsorships";
  const id = byStatus ? "x.sponsorship_id" : "id";
  if (filters.fromMs !== undefined || filters.toMs !== undefined) {
    // A time range is also the id range of its UTC days (migration 023): the index scan starts
    // at the range's last id and stops at its first, however much history lies on either side.
    params.push(filters.fromMs === undefined ? null : utcDay(filters.fromMs));
    params.push(filters.toMs === undefined ? null : utcDay(filters.toMs - 1));
    const [first, last] = [params.length - 1, params.length];
    const days = `FROM rollup_project_days WHERE project_id = $1
      AND ($${first}::date IS NULL OR day >= $${first}::date) AND ($${last}::date IS NULL OR day <= $${last}::date)`;
    where.push(
      `${id} BETWEEN COALESCE((SELECT min(first_id) ${days}), 0) AND COALESCE((SELECT max(last_id) ${days}), 0)`,
    );
  }
  const matching = where.join(" AND ");
  if (afterId !== null) add(`${id} < ?`, afterId);
  const n = params.length;
  // Unfiltered and by offset: the page is a range of the project's sequence numbers (migration
  // 013), one index seek at any depth. Otherwise the offset is skipped on the id index.
  const bySeq = params.length === 1 && offset > 0;
  const [rows, total] = await Promise.all([
    db.query<Omit<EventRecord, "created_at"> & { created_at: Date }>(
      bySeq
        ? `SELECT ${EVENT_COLUMNS} FROM sponsorships
           WHERE ${projectKey("project_id")} = ${projectKey("$1::text")} AND project_id = $1
             AND seq <= (SELECT sponsorships_seq FROM projects WHERE id = $1) - $3
           ORDER BY seq DESC LIMIT $2`
        : `SELECT ${EVENT_COLUMNS} FROM sponsorships WHERE project_id = $1 AND id IN (
             SELECT ${id} FROM ${from} WHERE ${where.join(" AND ")}
             ORDER BY ${id} DESC LIMIT $${n + 1} OFFSET $${n + 2})
           ORDER BY id DESC`,
      [...params, limit + 1, offset],
    ),
    eventsTotal(db, projectId, filters, from, matching, params.slice(0, afterId === null ? n : n - 1)),
  ]);
  const more = rows.length > limit;
  const shown = more ? rows.slice(0, limit) : rows;
  return {
    events: shown.map((r) => ({
      ...r,
      id: Number(r.id),
      estimated_gas: Number(r.estimated_gas),
      actual_gas: Number(r.actual_gas),
      created_at: r.created_at.toISOString(),
      valid_until: Number(r.valid_until),
    })),
    ...total,
    ...(more ? { nextCursor: encodeCursor(Number(shown[shown.length - 1]!.id)) } : {}),
  };
}

async function eventsTotal(
  db: Queryable,
  projectId: string,
  filters: EventFilters,
  from: string,
  matching: string,
  params: unknown[],
): Promise<{ total: number; totalCapped?: true }> {
  const { status, chainId, ...others } = filters;
  if (Object.values(others).every((v) => v === undefined)) {
    const column = status ?? "pending + success + reverted + expired";
    // status is one of the four columns: the route's schema allows nothing else.
    assert.ok(!status || ["pending", "success", "reverted", "expired"].includes(status));
    // One totals row per chain: the chain's own, or the sum of the project's.
    const rows = await db.query<{ n: string }>(
      `SELECT COALESCE(sum(${column}), 0)::text AS n FROM rollup_project_totals
       WHERE project_id = $1 AND ($2::integer IS NULL OR chain_id = $2)`,
      [projectId, chainId ?? null],
    );
    return { total: Number(rows[0]?.n ?? 0) };
  }
  const rows = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${from} WHERE ${matching}
       LIMIT ${FILTERED_TOTAL_CAP + 1}) m`,
    params,
  );
  const counted = rows[0]!.n;
  return counted > FILTERED_TOTAL_CAP ? { total: FILTERED_TOTAL_CAP, totalCapped: true } : { total: counted };
}

export interface SenderFigures {
  sender: string;
  operations: number;
  costWei: string;
  pending: number;
}

/**
 * The project's top senders by settled operations or by their actual cost (DESIGN.md §3's
 * "settled" figures), read from the per-sender rollup through an index in that order, with the
 * operations each still has pending beside them (an index of pending rows). Bounded by `limit`.
 */
export async function topSenders(
  db: Queryable,
  projectId: string,
  chainId: number,
  by: "operations" | "cost",
  limit: number,
): Promise<SenderFigures[]> {
  const order = by === "cost" ? "cost_wei DESC, operations DESC" : "operations DESC, cost_wei DESC";
  const rows = await db.query<{ sender: string; operations: string; cost: string; pending: number }>(
    `SELECT r.sender, r.operations::text AS operations, r.cost_wei::text AS cost,
       (SELECT count(*)::int FROM sponsorship_status_index x
         WHERE x.project_id = r.project_id AND x.sender = r.sender AND x.status = 'pending'
           AND x.chain_id = r.chain_id) AS pending
     FROM (SELECT project_id, chain_id, sender, operations, cost_wei FROM rollup_project_senders
           WHERE project_id = $1 AND chain_id = $3 AND operations > 0 ORDER BY ${order}, sender LIMIT $2) r
     ORDER BY ${order}, sender`,
    [projectId, limit, chainId],
  );
  return rows.map((r) => ({
    sender: r.sender,
    operations: Number(r.operations),
    costWei: r.cost,
    pending: r.pending,
  }));
}

export interface DayFigures {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  authorized: number;
  sponsored: number;
  success: number;
  reverted: number;
  expired: number;
  gasUsed: string;
  costWei: string;
  activeSenders: number;
}

/**
 * One row per UTC day from `from` to `to` (both included, YYYY-MM-DD), days without activity as
 * zeros: the per-day rollup, at most as many rows as days asked for.
 */
export async function daily(
  db: Queryable,
  projectId: string,
  chainId: number,
  from: string,
  to: string,
): Promise<DayFigures[]> {
  const rows = await db.query<{
    day: string;
    authorized: string;
    success: string;
    reverted: string;
    expired: string;
    gas_used: string;
    cost_wei: string;
    active_senders: string;
  }>(
    `SELECT g.day::date::text AS day, COALESCE(r.authorized, 0)::text AS authorized,
       COALESCE(r.success, 0)::text AS success, COALESCE(r.reverted, 0)::text AS reverted,
       COALESCE(r.expired, 0)::text AS expired, COALESCE(r.gas_used, 0)::text AS gas_used,
       COALESCE(r.cost_wei, 0)::text AS cost_wei, COALESCE(r.active_senders, 0)::text AS active_senders
     FROM generate_series($2::date, $3::date, interval '1 day') g(day)
     LEFT JOIN rollup_project_days r ON r.project_id = $1 AND r.chain_id = $4 AND r.day = g.day::date
     ORDER BY g.day`,
    [projectId, from, to, chainId],
  );
  return rows.map((r) => ({
    day: r.day,
    authorized: Number(r.authorized),
    sponsored: Number(r.success) + Number(r.reverted),
    success: Number(r.success),
    reverted: Number(r.reverted),
    expired: Number(r.expired),
    gasUsed: r.gas_used,
    costWei: r.cost_wei,
    activeSenders: Number(r.active_senders),
  }));
}

/**
 * The UTC day of an instant, as the rollups key it (YYYY-MM-DD); null (no bound on that side) for
 * an instant before 1970, when no sponsorship was made, and whose year PostgreSQL may not take.
 */
function utcDay(ms: number): string | null {
  return ms >= 0 ? isoDay(ms / DAY_MS) : null;
}

/** A UTC day, counted in days since 1970 (fractions dropped), as YYYY-MM-DD. */
export function isoDay(day: number): string {
  return new Date(Math.floor(day) * DAY_MS).toISOString().slice(0, 10);
}

/**
 * One chain's tank in plain words (money.ts): the available balance (the cached balance, which
 * open reservations have already left), what open authorizations on that chain hold (the pending
 * rows of sponsorship_status_index, migration 021, read through its partial index by project),
 * and the chain's settled cost in total and per UTC day of the last 7 days, today included, from
 * the rollups.
 * Null when the project does not exist.
 */
export async function money(
  db: Queryable,
  projectId: string,
  chainId: number,
  nowMs: number,
): Promise<MoneySummary | null> {
  const today = Math.floor(nowMs / DAY_MS);
  const [tank, days] = await Promise.all([
    db.query<{ available: string; reserved: string; spent: string }>(
      `SELECT ${tankBalanceSql("p", "$2")}::text AS available,
         (SELECT COALESCE(sum(max_gas_cost), 0) FROM sponsorship_status_index
          WHERE project_id = p.id AND status = 'pending' AND chain_id = $2)::text AS reserved,
         COALESCE((SELECT cost_wei FROM rollup_project_totals WHERE project_id = p.id AND chain_id = $2), 0)::text
           AS spent
       FROM projects p WHERE p.id = $1`,
      [projectId, chainId],
    ),
    daily(db, projectId, chainId, isoDay(today - SPEND_WINDOW_DAYS + 1), isoDay(today)),
  ]);
  const t = tank[0];
  if (!t) return null;
  return moneySummary({
    availableWei: BigInt(t.available),
    reservedWei: BigInt(t.reserved),
    spentTotalWei: BigInt(t.spent),
    spentByDay: days.map((d) => ({ day: d.day, spentWei: BigInt(d.costWei) })),
  });
}
