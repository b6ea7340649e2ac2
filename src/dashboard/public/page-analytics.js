// Analytics: the overview's totals and top contracts, per-day charts from the daily rollup
// (operations, cost and active senders), refusals per day by reason, the shares of requests
// sponsored and refused, outcomes of every authorization, top senders. Every
// figure is exact and read from the service's rollups, whatever the project's history. With several
// chains served, the figures are the chosen chain's (ctx.chainId), in its currency; refusals are
// counted per request, for every chain.
import { get, seg } from "./api.js";
import { barChart, rankChart, STACK_SERIES, shareChart, stackedChart } from "./charts.js";
import { formatUnits } from "./money.js";
import { facts, h, hex, money, section } from "./ui.js";

const DAYS = 14;
const STATUSES = ["success", "reverted", "expired", "pending"];

/** UTC day (YYYY-MM-DD) `offset` days from today. */
function utcDay(offset) {
  return new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
}

export async function render(ctx) {
  const id = ctx.projectId;
  const range = `from=${utcDay(1 - DAYS)}&to=${utcDay(0)}`;
  const [overview, daily, refusals, senders, ...totals] = await Promise.all([
    get(ctx.forChain(`/projects/${seg(id)}/analytics/overview`)),
    get(ctx.forChain(`/projects/${seg(id)}/analytics/daily?${range}`)),
    get(`/projects/${seg(id)}/analytics/refusals?${range}`),
    get(ctx.forChain(`/projects/${seg(id)}/analytics/senders?by=operations&limit=5`)),
    // A status filter's `total` is one rollup row: the outcomes of every authorization. One
    // chain's are counted (up to the API's cap, which the answer says with totalCapped).
    ...STATUSES.map((status) =>
      get(ctx.forChain(`/projects/${seg(id)}/analytics/events?limit=1&status=${status}`)),
    ),
  ]);
  const { decimals, symbol } = ctx.currency;
  const days = daily.days.map((d) => d.day);
  const outcomes = Object.fromEntries(STATUSES.map((status, i) => [status, totals[i].total]));
  const capped = STATUSES.filter((_, i) => totals[i].totalCapped);
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
      h(
        "p",
        { class: "muted" },
        "UTC days. Operations and cost count by the day an operation settled on chain.",
      ),
      h(
        "div",
        { class: "charts" },
        barChart({
          title: "Operations per day",
          labels: days,
          values: daily.days.map((d) => d.sponsored),
          format: (v) => String(v),
          className: "ops",
        }),
        barChart({
          title: `Cost per day (${symbol})`,
          labels: days,
          values: daily.days.map((d) => BigInt(d.costWei)),
          // The ticks are round amounts, so their exact form is short.
          format: (v) => `${formatUnits(v, decimals)} ${symbol}`,
          className: "cost",
        }),
        barChart({
          title: `Cumulative spend (${symbol})`,
          labels: days,
          values: runningTotal(daily.days.map((d) => BigInt(d.costWei))),
          // The ticks are round amounts, so their exact form is short.
          format: (v) => `${formatUnits(v, decimals)} ${symbol}`,
          className: "cumulative",
          kind: "line",
        }),
        barChart({
          title: "Active senders per day",
          labels: days,
          values: daily.days.map((d) => d.activeSenders),
          format: (v) => String(v),
          className: "senders",
        }),
      ),
    ),
    section(
      `Refusals, last ${DAYS} days`,
      h(
        "p",
        { class: "muted" },
        "Requests refused with one of the project's API keys, by reason (exact counts; ",
        h("a", { href: `#/projects/${encodeURIComponent(id)}/refusals` }, "see each refusal"),
        ").",
      ),
      h(
        "div",
        { class: "charts" },
        stackedChart({ title: "Refusals per day, by reason", labels: days, series: refusalSeries(refusals) }),
        shareChart({
          title: "Requests sponsored and refused",
          parts: [
            { key: "authorized", label: "Sponsored (authorized)", value: refusals.authorized },
            { key: "refused", label: "Refused", value: refusals.refused },
          ],
        }),
      ),
    ),
    section(
      "Outcomes",
      shareChart({
        title: "Outcomes of every authorization",
        parts: [
          { key: "success", label: "Success", value: outcomes.success },
          { key: "reverted", label: "Reverted", value: outcomes.reverted },
          { key: "expired", label: "Expired", value: outcomes.expired },
          { key: "pending", label: "Pending", value: outcomes.pending },
        ],
      }),
      capped.length === 0
        ? null
        : h(
            "p",
            { class: "muted" },
            `Each outcome is counted up to ${totals[STATUSES.indexOf(capped[0])].total.toLocaleString("en")}: there are more ${capped.join(" and ")} than shown.`,
          ),
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

/** Each day's value plus every day's before it, in BigInt. */
function runningTotal(values) {
  let sum = 0n;
  return values.map((v) => {
    sum += v;
    return sum;
  });
}

/**
 * The refusal chart's series: the most frequent codes each on its own, the rest together, so that
 * the chart keeps a handful of colours however many codes refused something.
 */
function refusalSeries(refusals) {
  const own =
    refusals.byCode.length <= STACK_SERIES ? refusals.byCode : refusals.byCode.slice(0, STACK_SERIES - 1);
  const rest = refusals.byCode.slice(own.length).map((c) => c.code);
  const series = own.map((c) => ({
    key: c.code,
    label: c.code,
    values: refusals.days.map((d) => d.byCode[c.code] ?? 0),
  }));
  if (rest.length > 0) {
    series.push({
      key: "other",
      label: `other (${rest.length} reasons)`,
      values: refusals.days.map((d) => rest.reduce((s, code) => s + (d.byCode[code] ?? 0), 0)),
    });
  }
  return series;
}
