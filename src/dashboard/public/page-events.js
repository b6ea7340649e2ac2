// The events table: newest first, paged by the API; with a filter (status, sender, target,
// dates) the latest events are read into the page and filtered and paged here.
import { get, seg } from "./api.js";
import { EVENT_WINDOW, recentEvents } from "./events-data.js";
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
  const filtered = Object.values(filters).some((v) => v !== "");
  let events;
  let total;
  let note = null;
  if (!filtered) {
    const res = await get(
      `/projects/${seg(id)}/analytics/events?limit=${PAGE_SIZE}&offset=${page * PAGE_SIZE}`,
    );
    events = res.events;
    total = res.total;
  } else {
    const window = await recentEvents(id);
    const matching = window.items.filter((e) => matches(e, filters));
    total = matching.length;
    events = matching.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
    if (window.total > window.items.length)
      note = `Filters search the latest ${EVENT_WINDOW} of ${window.total} events.`;
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
    field("Sender", { name: "sender", value: filters.sender, placeholder: "0x…", autocomplete: "off" }),
    field("Target", { name: "target", value: filters.target, placeholder: "0x…", autocomplete: "off" }),
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
    note ? h("p", { class: "muted" }, note) : null,
    table(
      "Sponsorship events, newest first",
      ["Time (UTC)", "Status", "Sender", "Target", "Selector", "Gas est. / used", "Cost", "Transaction"],
      rows,
      "No events match.",
    ),
    pager,
  );
}

function matches(e, f) {
  if (f.status && e.status !== f.status) return false;
  if (f.sender && !e.sender.toLowerCase().includes(f.sender)) return false;
  if (f.target && !e.target.toLowerCase().includes(f.target)) return false;
  const day = e.created_at.slice(0, 10);
  if (f.from && day < f.from) return false;
  if (f.to && day > f.to) return false;
  return true;
}

function strip(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== ""));
}
