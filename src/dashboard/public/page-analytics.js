// Analytics: the overview's totals and top contracts, and charts of the latest events:
// operations and cost per day, outcomes, top senders.
import { get, seg } from "./api.js";
import { barChart, rankChart, shareChart } from "./charts.js";
import { EVENT_WINDOW, lastDays, recentEvents, summarise } from "./events-data.js";
import { formatShort, formatUnits } from "./money.js";
import { facts, h, hex, money, section } from "./ui.js";

const DAYS = 14;

export async function render(ctx) {
  const id = ctx.projectId;
  const [overview, window, senders] = await Promise.all([
    get(`/projects/${seg(id)}/analytics/overview`),
    recentEvents(id),
    get(`/projects/${seg(id)}/analytics/senders?by=operations&limit=5`),
  ]);
  const { decimals, symbol } = ctx.currency;
  const days = lastDays(DAYS);
  const s = summarise(window.items, days);
  const scope =
    window.total > window.items.length
      ? `the latest ${window.items.length} of ${window.total} events`
      : `all ${window.total} events`;
  return h(
    "div",
    {},
    section(
      "Totals",
      facts([
        ["Sponsored (settled on chain)", String(overview.totalSponsored)],
        ["Gas cost paid", money(overview.totalGasSaved, ctx.currency)],
        ["Active users (30 days)", String(overview.activeUsers)],
        ["Sponsored today", String(overview.today.sponsored)],
        ["Daily cap remaining", money(overview.today.dailyCapRemaining, ctx.currency)],
      ]),
    ),
    section(
      `Last ${DAYS} days`,
      h("p", { class: "muted" }, `Drawn from ${scope} (UTC days; at most ${EVENT_WINDOW} events are read).`),
      h(
        "div",
        { class: "charts" },
        barChart({
          title: "Operations per day",
          labels: days,
          values: s.ops,
          format: (v) => String(v),
          className: "ops",
        }),
        barChart({
          title: `Cost per day (${symbol})`,
          labels: days,
          values: s.cost,
          format: (v) => `${formatShort(v, decimals)} ${symbol}`,
          className: "cost",
        }),
      ),
    ),
    section(
      "Outcomes",
      shareChart({
        title: `Outcomes of ${scope}`,
        parts: [
          { key: "success", label: "Success", value: s.statuses.success },
          { key: "reverted", label: "Reverted", value: s.statuses.reverted },
          { key: "expired", label: "Expired", value: s.statuses.expired },
          { key: "pending", label: "Pending", value: s.statuses.pending },
        ],
      }),
    ),
    h(
      "div",
      { class: "two" },
      section(
        "Top contracts",
        rankChart({
          title: "Calls per contract (all time)",
          labels: overview.topContracts.map((c) => c.address),
          values: overview.topContracts.map((c) => c.calls),
          format: (v) => `${v} calls`,
          labelNode: (a) => hex(a),
        }),
      ),
      section(
        "Top senders",
        rankChart({
          title: "Settled operations per sender (all time)",
          labels: senders.senders.map((x) => x.sender),
          values: senders.senders.map((x) => x.operations),
          format: (v) => `${v} ops`,
          labelNode: (a) => hex(a),
        }),
      ),
    ),
    h(
      "p",
      { class: "muted" },
      `Amounts are exact; hover one for its value in wei. Total gas cost: ${formatUnits(overview.totalGasSaved, decimals)} ${symbol}.`,
    ),
  );
}
