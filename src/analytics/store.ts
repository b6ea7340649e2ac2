import type { Queryable } from "../db/db.ts";

export interface Overview {
  totalSponsored: number;
  totalGasSaved: string;
  activeUsers: number;
  today: { sponsored: number; dailyCapRemaining: string };
  topContracts: { address: string; calls: number; gasUsed: string }[];
}

const SETTLED = "status IN ('success', 'reverted')";

/** Figures over operations settled on chain (DESIGN.md §3), for one project. */
export async function overview(db: Queryable, projectId: string, nowMs: number): Promise<Overview> {
  const dayStart = new Date(nowMs);
  dayStart.setUTCHours(0, 0, 0, 0);
  const day = dayStart.toISOString().slice(0, 10);
  const monthAgo = new Date(nowMs - 30 * 86_400_000);
  const [totals, active, today, top, tank] = await Promise.all([
    db.query<{ n: number; saved: string }>(
      `SELECT count(*)::int AS n, COALESCE(sum(actual_gas_cost), 0)::text AS saved
       FROM sponsorships WHERE project_id = $1 AND ${SETTLED}`,
      [projectId],
    ),
    db.query<{ n: number }>(
      `SELECT count(DISTINCT sender)::int AS n FROM sponsorships
       WHERE project_id = $1 AND ${SETTLED} AND settled_at >= $2`,
      [projectId, monthAgo],
    ),
    db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sponsorships
       WHERE project_id = $1 AND ${SETTLED} AND settled_at >= $2`,
      [projectId, dayStart],
    ),
    db.query<{ address: string; calls: number; gas_used: string }>(
      `SELECT target AS address, count(*)::int AS calls, COALESCE(sum(actual_gas), 0)::text AS gas_used
       FROM sponsorships WHERE project_id = $1 AND ${SETTLED}
       GROUP BY target ORDER BY calls DESC, target LIMIT 10`,
      [projectId],
    ),
    db.query<{ balance: string; cap: string | null; spent: string | null }>(
      `SELECT p.gas_tank_balance::text AS balance, p.daily_cap::text AS cap, u.spent::text AS spent
       FROM projects p LEFT JOIN daily_usage u ON u.project_id = p.id AND u.day = $2::date
       WHERE p.id = $1`,
      [projectId, day],
    ),
  ]);
  const t = tank[0]!;
  return {
    totalSponsored: totals[0]!.n,
    totalGasSaved: totals[0]!.saved,
    activeUsers: active[0]!.n,
    today: { sponsored: today[0]!.n, dailyCapRemaining: dailyCapRemaining(t.balance, t.cap, t.spent) },
    topContracts: top.map((r) => ({ address: r.address, calls: r.calls, gasUsed: r.gas_used })),
  };
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
}

export async function events(
  db: Queryable,
  projectId: string,
  limit: number,
  offset: number,
): Promise<{ events: EventRecord[]; total: number }> {
  const [rows, count] = await Promise.all([
    db.query<Omit<EventRecord, "created_at"> & { created_at: Date }>(
      `SELECT id, sender, target, status, estimated_gas, actual_gas, created_at, selector, auth_id,
         max_gas_cost::text AS max_gas_cost, actual_gas_cost::text AS actual_gas_cost, tx_hash, user_op_hash
       FROM sponsorships WHERE project_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3`,
      [projectId, limit, offset],
    ),
    db.query<{ n: number }>("SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1", [projectId]),
  ]);
  return {
    events: rows.map((r) => ({
      ...r,
      estimated_gas: Number(r.estimated_gas),
      actual_gas: Number(r.actual_gas),
      created_at: r.created_at.toISOString(),
    })),
    total: count[0]!.n,
  };
}
