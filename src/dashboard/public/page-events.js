// The events table: newest first, paged and filtered by the API (status, sender, target, and a
// range of UTC days), whatever the length of the history. With several chains served, the
// chosen chain's events alone (ctx.chainId), so no column needs to say which chain each is on.

import { ApiProblem, get, seg } from "./api.js";
import { contractNames } from "./names.js";
import {
  badge,
  errorBox,
  field,
  h,
  hex,
  InputProblem,
  isDay,
  money,
  nextDay,
  section,
  table,
  time,
} from "./ui.js";

const PAGE_SIZE = 25;
const STATUSES = ["", "success", "reverted", "expired", "pending"];

export async function render(ctx) {
  const names = await contractNames(ctx.projectId);
  const id = ctx.projectId;
  const q = ctx.query;
  const filters = {
    status: q.get("status") ?? "",
    sender: (q.get("sender") ?? "").toLowerCase(),
    target: (q.get("target") ?? "").toLowerCase(),
    from: q.get("from") ?? "",
    to: q.get("to") ?? "",
  };
  const page = Math.max(0, Number(q.get("page") ?? 0) || 0);
  const filterErrors = errorBox();
  // A range that cannot be asked for (typed into the address, say) is said beside the filters;
  // the page, its filters and its pager stay.
  const problem = filterProblem(filters);
  let res = { events: [], total: 0 };
  if (problem) filterErrors.show(problem);
  else {
    try {
      res = await fetchPage(id, ctx.chainId, filters, page);
    } catch (err) {
      if (!(err instanceof ApiProblem) || err.status !== 400) throw err;
      filterErrors.show(err);
    }
  }
  const { events, total } = res;
  const note = res.totalCapped ? `More than ${total} events match: narrow the filters to count them.` : null;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  const link = (p) =>
    `#/projects/${encodeURIComponent(id)}/events?${new URLSearchParams({ ...strip(filters), ...(p ? { page: String(p) } : {}), ...ctx.linkQuery })}`;
  const clear = `#/projects/${encodeURIComponent(id)}/events${ctx.linkQuery.chain ? `?${new URLSearchParams(ctx.linkQuery)}` : ""}`;

  const apply = h("button", { type: "submit", class: "primary" }, "Apply");
  const filterForm = h(
    "form",
    { class: "inline filters", "aria-label": "Filter events" },
    field("Status", {
      tag: "select",
      name: "status",
      options: STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s || "any")),
    }),
    field("Sender", {
      name: "sender",
      value: filters.sender,
      placeholder: "0x… (whole address)",
      autocomplete: "off",
    }),
    field("Target", {
      name: "target",
      value: filters.target,
      placeholder: "0x… (whole address)",
      autocomplete: "off",
    }),
    field("From (UTC day)", { name: "from", type: "date", value: filters.from }),
    field("To (UTC day)", { name: "to", type: "date", value: filters.to }),
    h("div", { class: "actions" }, apply, h("a", { href: clear, class: "button secondary" }, "Clear")),
    filterErrors.el,
  );
  filterForm.addEventListener("input", () => filterErrors.clear());
  filterForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (apply.disabled) return;
    const data = strip(Object.fromEntries(new FormData(filterForm).entries()));
    for (const k of ["sender", "target"]) if (data[k]) data[k] = data[k].trim().toLowerCase();
    const wanted = { status: "", sender: "", target: "", from: "", to: "", ...data };
    filterErrors.clear();
    const refused = filterProblem(wanted);
    if (refused) {
      filterErrors.show(refused);
      return;
    }
    // Asked here first, so that a refusal (a 400) leaves the table as it was; the answer is
    // kept for the render that the new address causes.
    apply.disabled = true;
    try {
      prefetched = {
        key: pageKey(id, ctx.chainId, new URLSearchParams(data)),
        res: await fetchPage(id, ctx.chainId, wanted, 0),
      };
    } catch (err) {
      filterErrors.show(err);
      return;
    } finally {
      apply.disabled = false;
    }
    const next = `#/projects/${encodeURIComponent(id)}/events?${new URLSearchParams({ ...data, ...ctx.linkQuery })}`;
    if (location.hash !== next) location.hash = next;
    else {
      // The same address: no hashchange, so no render would take the answer.
      prefetched = null;
      ctx.refresh();
    }
  });

  const rows = events.map((e) => [
    time(e.created_at),
    badge(e.status),
    hex(e.sender),
    names.contract(e.target),
    names.fn(e.target, e.selector),
    `${e.estimated_gas} / ${e.actual_gas}`,
    cost(e, ctx.currencyOf(e.chain_id)),
    hex(e.tx_hash),
  ]);
  const pager = h(
    "nav",
    { class: "pager", "aria-label": "Event pages" },
    page > 0
      ? h("a", { href: link(page - 1), class: "button secondary", rel: "prev" }, "Previous")
      : h("span", {}),
    h("span", { "aria-live": "polite" }, `Page ${page + 1} of ${pages} · ${total} event(s)`),
    page + 1 < pages
      ? h("a", { href: link(page + 1), class: "button secondary", rel: "next" }, "Next")
      : h("span", {}),
  );
  return section(
    "Events",
    filterForm,
    note ? h("p", { class: "muted", role: "status" }, note) : null,
    table(
      "Sponsorship events, newest first",
      ["Time (UTC)", "Status", "Sender", "Target", "Selector", "Gas est. / used", "Cost", "Transaction"],
      rows,
      "No events match.",
    ),
    pager,
  );
}

/** The answer the filter form already fetched for this address, used once. */
let prefetched = null;

/** What identifies one page of events: the project, the chain (null: every chain) and the filters. */
function pageKey(id, chainId, query) {
  return `${id}@${chainId ?? ""}?${query}`;
}

/** One page of events; `chainId` null asks as the API's callers always have, with no chainId. */
async function fetchPage(id, chainId, filters, page) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(page * PAGE_SIZE) });
  if (chainId !== null) params.set("chainId", String(chainId));
  if (filters.status) params.set("status", filters.status);
  if (filters.sender) params.set("sender", filters.sender.toLowerCase());
  if (filters.target) params.set("target", filters.target.toLowerCase());
  // The form's days are UTC and both inclusive; the API's `to` is exclusive.
  if (filters.from) params.set("from", `${filters.from}T00:00:00.000Z`);
  if (filters.to) params.set("to", nextDay(filters.to));
  const key = pageKey(
    id,
    chainId,
    new URLSearchParams(strip({ ...filters, page: page ? String(page) : "" })),
  );
  const kept = prefetched;
  prefetched = null;
  if (kept?.key === key) return kept.res;
  return get(`/projects/${seg(id)}/analytics/events?${params}`);
}

/** Why these filters cannot be asked for, or null: partial addresses, a day that is no day, a backwards range. */
function filterProblem(filters) {
  // The API filters on whole addresses; a partial one is said here rather than sent.
  const partial = ["sender", "target"].filter(
    (k) => filters[k] && !/^0x[0-9a-f]{40}$/.test(filters[k].toLowerCase()),
  );
  if (partial.length > 0)
    return new InputProblem(`${partial.join(" and ")}: enter a whole address (0x and 40 hex digits).`);
  const bad = ["from", "to"].filter((k) => filters[k] && !isDay(filters[k]));
  if (bad.length > 0) return new InputProblem(`${bad.join(" and ")}: not a date; pick a day (YYYY-MM-DD).`);
  if (filters.from && filters.to && filters.from > filters.to)
    return new InputProblem(`the range ends (${filters.to}) before it starts (${filters.from}).`);
  return null;
}

/**
 * What an event cost. A pending one has cost nothing yet but holds its most possible cost
 * reserved in the tank until its authorization expires: both are shown, or the money looks free.
 */
function cost(e, currency) {
  if (e.status !== "pending") return money(e.actual_gas_cost, currency);
  const expires = Number.isFinite(e.valid_until) ? new Date(e.valid_until * 1000).toISOString() : null;
  return h(
    "span",
    { class: "reserved" },
    "≤ ",
    money(e.max_gas_cost, currency),
    " reserved",
    expires ? h("span", { class: "expires" }, " · expires ", time(expires)) : null,
  );
}

function strip(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== ""));
}
