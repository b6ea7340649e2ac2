// Refusals: why players were not sponsored. The latest refused requests made with the project's
// keys, newest first, each with its reason in plain words (sent by the API) and what was asked;
// filtered by code and by a range of UTC days, paged by cursor. The list is a sample (a bounded
// number per minute); the counts above it are exact.

import { ApiProblem, get, seg } from "./api.js";
import { contractNames } from "./names.js";
import { errorBox, field, h, hex, InputProblem, isDay, nextDay, section, table, time } from "./ui.js";

const PAGE_SIZE = 25;

export async function render(ctx) {
  const names = await contractNames(ctx.projectId);
  const id = ctx.projectId;
  const q = ctx.query;
  const filters = { code: q.get("code") ?? "", from: q.get("from") ?? "", to: q.get("to") ?? "" };
  const cursor = q.get("cursor") ?? "";
  const filterErrors = errorBox();
  const problem = filterProblem(filters);
  let page = { refusals: [] };
  // The codes seen in the last 30 days, for the filter and the totals (exact counts).
  const counts = await get(`/projects/${seg(id)}/analytics/refusals`);
  if (problem) filterErrors.show(problem);
  else {
    try {
      page = await get(`/projects/${seg(id)}/refusals?${apiQuery(filters, cursor)}`);
    } catch (err) {
      // A refused filter is said beside the form, which keeps its values; anything else is the page's error.
      if (!(err instanceof ApiProblem) || err.status !== 400) throw err;
      filterErrors.show(err);
    }
  }
  const base = `#/projects/${encodeURIComponent(id)}/refusals`;
  const codes = [...new Set([...counts.byCode.map((c) => c.code), ...(filters.code ? [filters.code] : [])])];
  const words = new Map(counts.byCode.map((c) => [c.code, c.reason]));

  const filterForm = filterFormOf(ctx, base, filters, codes, filterErrors);

  const rows = page.refusals.map((r) => [
    time(r.created_at),
    h("span", { class: "reason" }, r.reason, " ", h("code", { class: "code" }, r.code)),
    asked(r, names),
    h(
      "span",
      {},
      routeWords(r.route),
      " · ",
      r.rpc_code === null ? `HTTP ${r.status}` : `JSON-RPC ${r.rpc_code}`,
    ),
    r.api_key_id === null ? "—" : `key #${r.api_key_id}`,
    r.rule_id ? h("code", {}, r.rule_id) : h("span", { class: "muted" }, "—"),
  ]);
  const pager = pagerOf(base, filters, cursor, page.nextCursor);
  return h(
    "div",
    {},
    summaryOf(counts),
    section(
      "Refusals",
      filterForm,
      h(
        "p",
        { class: "muted" },
        "The latest refusals with what was asked: a sample of each minute's first few per project, kept " +
          "for a limited number of days. They appear about a second after the request.",
      ),
      table(
        "Refused requests, newest first",
        ["Time (UTC)", "Reason", "What was asked", "Route", "Key", "Rule"],
        rows,
        filters.code && words.has(filters.code) ? "No refusals of this kind match." : "No refusals match.",
      ),
      pager,
    ),
  );
}

/** The last 30 days' exact counts per reason, in plain words with the code. */
function summaryOf(counts) {
  return section(
    "Why requests were refused (last 30 days)",
    counts.byCode.length === 0
      ? h("p", { class: "empty" }, "No refused requests in the last 30 days.")
      : table(
          "Refusals per reason, last 30 days (exact counts)",
          ["Reason", "Code", "Refused"],
          counts.byCode.map((c) => [c.reason, h("code", {}, c.code), String(c.refused)]),
        ),
    h(
      "p",
      { class: "muted" },
      `${counts.refused} refused, ${counts.authorized} sponsored in these 30 days. Requests without a valid API key ` +
        "cannot be told apart from anyone else's and are not shown here.",
    ),
  );
}

/** Newest and Older: the cursor of the next page, with the same filters. */
function pagerOf(base, filters, cursor, nextCursor) {
  return h(
    "nav",
    { class: "pager", "aria-label": "Refusal pages" },
    cursor
      ? h(
          "a",
          { href: `${base}?${new URLSearchParams(strip(filters))}`, class: "button secondary" },
          "Newest",
        )
      : h("span", {}),
    nextCursor
      ? h(
          "a",
          {
            href: `${base}?${new URLSearchParams({ ...strip(filters), cursor: nextCursor })}`,
            class: "button secondary",
            rel: "next",
          },
          "Older",
        )
      : h("span", {}),
  );
}

/** The filter form: a reason among the codes seen, a range of UTC days; a bad range is said beside it. */
function filterFormOf(ctx, base, filters, codes, filterErrors) {
  const apply = h("button", { type: "submit", class: "primary" }, "Apply");
  const filterForm = h(
    "form",
    { class: "inline filters", "aria-label": "Filter refusals" },
    field("Reason", {
      tag: "select",
      name: "code",
      options: [
        h("option", { value: "", selected: !filters.code }, "any"),
        ...codes.map((c) => h("option", { value: c, selected: c === filters.code }, c)),
      ],
    }),
    field("From (UTC day)", { name: "from", type: "date", value: filters.from }),
    field("To (UTC day)", { name: "to", type: "date", value: filters.to }),
    h("div", { class: "actions" }, apply, h("a", { href: base, class: "button secondary" }, "Clear")),
    filterErrors.el,
  );
  filterForm.addEventListener("input", () => filterErrors.clear());
  filterForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = strip(Object.fromEntries(new FormData(filterForm).entries()));
    const refused = filterProblem({ code: "", from: "", to: "", ...data });
    if (refused) {
      filterErrors.show(refused);
      return;
    }
    const next = `${base}?${new URLSearchParams(data)}`;
    if (location.hash !== next) location.hash = next;
    else ctx.refresh();
  });
  return filterForm;
}

/** The sender, call and gas a refused request asked for (whatever of it the request carried). */
function asked(r, names) {
  const parts = [];
  if (r.sender) parts.push(h("span", {}, "sender ", hex(r.sender)));
  if (r.target)
    parts.push(
      h(
        "span",
        {},
        "calls ",
        names.contract(r.target),
        r.selector ? [" ", names.fn(r.target, r.selector)] : null,
      ),
    );
  if (r.chain_id !== null) parts.push(h("span", {}, `chain ${r.chain_id}`));
  if (r.estimated_gas !== null) parts.push(h("span", {}, `${r.estimated_gas} gas`));
  if (parts.length === 0) return h("span", { class: "muted" }, "not read (refused before the body)");
  return h(
    "span",
    { class: "asked" },
    parts.flatMap((p, i) => (i === 0 ? [p] : [", ", p])),
  );
}

function routeWords(route) {
  if (route === "authorize") return "authorize";
  if (route === "check") return "check (dry run)";
  return `ERC-7677 ${route}`;
}

function apiQuery(filters, cursor) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (filters.code) params.set("code", filters.code);
  // The form's days are UTC and both inclusive; the API's `to` is exclusive.
  if (filters.from) params.set("from", `${filters.from}T00:00:00.000Z`);
  if (filters.to) params.set("to", nextDay(filters.to));
  if (cursor) params.set("cursor", cursor);
  return params;
}

/** Why these filters cannot be asked for, or null. */
function filterProblem(filters) {
  if (filters.code && !/^[a-z][a-z0-9_]{0,63}$/.test(filters.code))
    return new InputProblem("reason: pick one from the list.");
  const bad = ["from", "to"].filter((k) => filters[k] && !isDay(filters[k]));
  if (bad.length > 0) return new InputProblem(`${bad.join(" and ")}: not a date; pick a day (YYYY-MM-DD).`);
  if (filters.from && filters.to && filters.from > filters.to)
    return new InputProblem(`the range ends (${filters.to}) before it starts (${filters.from}).`);
  return null;
}

function strip(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== ""));
}
