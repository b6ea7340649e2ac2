// The project's most recent events, read page by page up to a bound. The API pages by
// limit/offset without filters, so the charts and the filtered table work on this window.
import { collect, seg } from "./api.js";

/** How many of the latest events the charts and filters see. */
export const EVENT_WINDOW = 1000;

export async function recentEvents(projectId) {
  return collect(`/projects/${seg(projectId)}/analytics/events`, "events", {
    pageSize: 200,
    max: EVENT_WINDOW,
  });
}

/** UTC days (YYYY-MM-DD), oldest first, ending today. */
export function lastDays(n, now = new Date()) {
  const days = [];
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  for (let i = n - 1; i >= 0; i--) days.push(new Date(today - i * 86_400_000).toISOString().slice(0, 10));
  return days;
}

/** Operations and cost (wei, BigInt) per UTC day, and counts per status. */
export function summarise(events, days) {
  const ops = new Map(days.map((d) => [d, 0n]));
  const cost = new Map(days.map((d) => [d, 0n]));
  const statuses = { success: 0, reverted: 0, expired: 0, pending: 0 };
  for (const e of events) {
    const day = e.created_at.slice(0, 10);
    if (ops.has(day)) {
      ops.set(day, ops.get(day) + 1n);
      cost.set(day, cost.get(day) + BigInt(e.actual_gas_cost));
    }
    statuses[e.status] = (statuses[e.status] ?? 0) + 1;
  }
  return { ops: days.map((d) => ops.get(d)), cost: days.map((d) => cost.get(d)), statuses };
}
