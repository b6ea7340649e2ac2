// The events table: newest first, paged and filtered by the API (status, sender, target, and a
// range of UTC days), whatever the length of the history.
import { get, seg } from "./api.js";
import { badge, field, h, hex, money, section, table, time } from "./ui.js";

const PAGE_SIZE = 25;
const STATUSES = ["", "success", "reverted", "expired", "pending"];

export async function render(ctx) {
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
  // The API filters on whole addresses; a partial one is said here rather than sent.
  const partial = ["sender", "target"].filter((k) => filters[k] && !/^0x[0-9a-f]{40}$/.test(filters[k]));
  let events = [];
  let total = 0;
  let note = null;
  if (partial.length > 0) {
    note = `${partial.join(" and ")}: enter a whole address (0x and 40 hex digits).`;
  } else {
    const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(page * PAGE_SIZE) });
    if (filters.status) params.set("status", filters.status);
    if (filters.sender) params.set("sender", filters.sender);
    if (filters.target) params.set("target", filters.target);
    // The form's days are UTC and both inclusive; the API's `to` is exclusive.
    if (filters.from) params.set("from", `${filters.from}T00:00:00.000Z`);
    if (filters.to) params.set("to", nextDay(filters.to));
    const res = await get(`/projects/${seg(id)}/analytics/events?${params}`);
    events = res.events;
    total = res.total;
    if (res.totalCapped) note = `More than ${total} events match: narrow the filters to count them.`;
  }
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  const link = (p) =>
    `#/projects/${encodeURIComponent(id)}/events?${new URLSearchParams({ ...strip(filters), ...(p ? { page: String(p) } : {}) })}`;

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
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", class: "primary" }, "Apply"),
      h("a", { href: `#/projects/${encodeURIComponent(id)}/events`, class: "button secondary" }, "Clear"),
    ),
  );
  filterForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(filterForm).entries());
    location.hash = `#/projects/${encodeURIComponent(id)}/events?${new URLSearchParams(strip(data))}`;
  });

  const rows = events.map((e) => [
    time(e.created_at),
    badge(e.status),
    hex(e.sender),
    hex(e.target),
    h("code", {}, e.selector),
    `${e.estimated_gas} / ${e.actual_gas}`,
    money(e.actual_gas_cost, ctx.currency),
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

/** The start of the UTC day after `day` (YYYY-MM-DD), as the API's exclusive `to`. */
function nextDay(day) {
  const d = new Date(`${day}T00:00:00.000Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString();
}

function strip(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== ""));
}
