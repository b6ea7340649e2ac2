// Sponsorship policies (issue 11): the project's rules (spend and count caps per sender or for
// the project, a cost cap per operation, a campaign window, sender allow- and blocklists), with
// each cap's usage in its current window. The API decides what a rule may hold and says why not.
import { api, del, get, seg } from "./api.js";
import { parseAmount } from "./money.js";
import {
  announce,
  badge,
  confirmDialog,
  errorBox,
  field,
  form,
  h,
  hex,
  InputProblem,
  money,
  nameOf,
  renameControl,
  section,
  table,
  time,
} from "./ui.js";

const WINDOWS = ["day", "week", "month", "interval", "lifetime"];

export async function render(ctx) {
  const id = ctx.projectId;
  // The kinds, with their labels and fields, come from the service's registry (policies/kinds.ts).
  const [rules, kindList] = await Promise.all([get(`/projects/${seg(id)}/policies`), get("/policies/kinds")]);
  const KINDS = Object.fromEntries(kindList.map((k) => [k.kind, k]));
  const CAPS = new Set(kindList.filter((k) => k.counts !== null).map((k) => k.kind));
  const { decimals, symbol } = ctx.currency;
  const usageSlot = h("div", { id: "policy-usage" });

  const parts = {
    maxWei: field(
      `Limit (${symbol})`,
      { name: "maxWei", inputmode: "decimal" },
      "An exact decimal amount; sent in wei.",
    ),
    maxOperations: field("Limit (operations)", { name: "maxOperations", type: "number", min: 1 }),
    window: field(
      "Window",
      { tag: "select", name: "window", options: WINDOWS.map((w) => h("option", { value: w }, w)) },
      "UTC calendar day, ISO week, month; interval: windows of the length below; lifetime: never resets.",
    ),
    windowSeconds: field(
      "Interval (seconds)",
      { name: "windowSeconds", type: "number", min: 60 },
      "Only for the interval window.",
    ),
    startsAt: field("Starts (UTC)", { name: "startsAt", type: "datetime-local" }),
    endsAt: field("Ends (UTC)", { name: "endsAt", type: "datetime-local" }),
    senders: field("Senders", {
      tag: "textarea",
      name: "senders",
      rows: 4,
      placeholder: "0x… one smart account address per line",
    }),
  };
  const kind = field("Kind", {
    tag: "select",
    name: "kind",
    options: Object.entries(KINDS).map(([k, v]) => h("option", { value: k }, v.label)),
  });
  const showFor = (k) => {
    for (const [name, el] of Object.entries(parts)) el.hidden = !KINDS[k].fields.includes(name);
  };
  kind.querySelector("select").addEventListener("change", (e) => showFor(e.target.value));
  showFor(kindList[0].kind);

  const put = form(
    { class: "inline", "aria-label": "Add or replace a rule" },
    [
      field(
        "Rule id",
        { name: "ruleId", required: true, pattern: "[a-z0-9_\\-]{1,64}" },
        "Lower-case letters, digits, - and _; the same id replaces the rule.",
      ),
      field(
        "Name (optional)",
        { name: "name", maxlength: 128, autocomplete: "off" },
        "Yours, in words: “Launch week budget”.",
      ),
      kind,
      Object.values(parts),
    ],
    "Save rule",
    async (data, el) => {
      const body = { kind: data.kind };
      if (data.name.trim()) body.name = data.name.trim();
      // Replacing a paused rule keeps it paused: pausing is changed with Pause and Resume.
      if (rules.find((r) => r.id === data.ruleId)?.paused) body.paused = true;
      const wanted = KINDS[data.kind].fields;
      if (wanted.includes("maxWei") && data.maxWei.trim()) {
        const amount = parseAmount(data.maxWei, decimals);
        if (amount.error)
          throw new InputProblem(`Limit (${symbol}): ${amount.error}`, el.querySelector('[name="maxWei"]'));
        body.maxWei = amount.wei;
      }
      if (wanted.includes("maxOperations") && data.maxOperations)
        body.maxOperations = Number(data.maxOperations);
      if (wanted.includes("window") && data.window) body.window = data.window;
      if (wanted.includes("windowSeconds") && data.windowSeconds)
        body.windowSeconds = Number(data.windowSeconds);
      // datetime-local has no zone: the fields are labelled UTC, and sent as such.
      const utc = (local) => (local.length === 16 ? `${local}:00Z` : `${local}Z`);
      if (wanted.includes("startsAt") && data.startsAt) body.startsAt = utc(data.startsAt);
      if (wanted.includes("endsAt") && data.endsAt) body.endsAt = utc(data.endsAt);
      if (wanted.includes("senders") && data.senders.trim())
        body.senders = data.senders.split(/[\s,]+/).filter(Boolean);
      const rule = await api("PUT", `/projects/${seg(id)}/policies/${seg(data.ruleId)}`, body);
      announce(`Rule ${rule.id} saved`);
      ctx.refresh();
    },
  );

  const rows = rules.map((r) => {
    const errors = errorBox();
    const remove = r.builtin
      ? h("a", { href: `#/projects/${encodeURIComponent(id)}` }, "Change in settings")
      : h(
          "button",
          {
            type: "button",
            class: "danger small",
            "aria-label": `Remove rule ${r.id}`,
            onclick: async () => {
              errors.clear();
              if (
                !(await confirmDialog(
                  `Remove rule ${r.id}?`,
                  "Its usage counters go with it.",
                  "Remove rule",
                ))
              )
                return;
              try {
                await del(`/projects/${seg(id)}/policies/${seg(r.id)}`);
                announce(`Rule ${r.id} removed`);
                ctx.refresh();
              } catch (err) {
                errors.show(err);
              }
            },
          },
          "Remove",
        );
    const usage =
      CAPS.has(r.kind) || r.builtin
        ? h(
            "button",
            {
              type: "button",
              class: "secondary small",
              "aria-label": `Usage of rule ${r.id}`,
              onclick: async () => {
                errors.clear();
                try {
                  const rowsOfUsage = await get(`/projects/${seg(id)}/policies/${seg(r.id)}/usage`);
                  usageSlot.replaceChildren(
                    section(
                      `Usage of ${r.id} in its current window`,
                      table(
                        `Usage of ${r.id}`,
                        ["Subject", "Window start", "Spent", "Operations", "Reached"],
                        rowsOfUsage.map((u) => [
                          u.subject === "*" ? "whole project" : hex(u.subject),
                          time(u.window_start),
                          money(u.spent_wei, ctx.currency),
                          String(u.operations),
                          time(u.reached_at),
                        ]),
                        "Nothing counted in this window yet.",
                      ),
                    ),
                  );
                  usageSlot.querySelector("h2")?.setAttribute("tabindex", "-1");
                  usageSlot.querySelector("h2")?.focus();
                } catch (err) {
                  errors.show(err);
                }
              },
            },
            "Usage",
          )
        : null;
    const change = (body, said) => async () => {
      errors.clear();
      try {
        await api("PATCH", `/projects/${seg(id)}/policies/${seg(r.id)}`, body);
        announce(said);
        ctx.refresh();
      } catch (err) {
        errors.show(err);
      }
    };
    const toggle = r.builtin
      ? null
      : h(
          "button",
          {
            type: "button",
            class: "secondary small",
            "aria-label": `${r.paused ? "Resume" : "Pause"} rule ${r.name ?? r.id}`,
            onclick: change(
              { paused: !r.paused },
              r.paused ? `Rule ${r.id} resumed` : `Rule ${r.id} paused: it refuses nothing until resumed`,
            ),
          },
          r.paused ? "Resume" : "Pause",
        );
    const rename = r.builtin
      ? null
      : renameControl(`rule ${r.id}`, r.name, async (name) => {
          await api("PATCH", `/projects/${seg(id)}/policies/${seg(r.id)}`, { name });
          announce(`Rule ${r.id} renamed`);
          ctx.refresh();
        });
    return [
      r.name
        ? h("div", { class: "rule-name" }, nameOf(r.name), " ", h("code", {}, r.id))
        : h("code", {}, r.id),
      KINDS[r.kind]?.label ?? r.kind,
      describeLimit(r, ctx.currency),
      r.paused ? badge("paused") : badge("active"),
      r.builtin ? badge("built-in", "role") : badge("custom", "role"),
      h("div", { class: "row-actions" }, usage, toggle, rename, remove, errors.el),
    ];
  });
  return h(
    "div",
    {},
    section(
      "Rules",
      table(
        "Policy rules of this project",
        ["Rule", "Kind", "Limit", "State", "Origin", "Actions"],
        rows,
        "No rules: only the allowlist and the gas tank limit sponsorship.",
      ),
      usageSlot,
    ),
    section("Add or replace a rule", put),
  );
}

function describeLimit(r, currency) {
  const window = r.window === "interval" ? `every ${r.window_seconds} s` : r.window ? `per ${r.window}` : "";
  if (r.max_wei !== null) return h("span", {}, money(r.max_wei, currency), window ? ` ${window}` : "");
  if (r.max_operations !== null) return `${r.max_operations} operations ${window}`.trim();
  if (r.kind === "campaign") return `${r.starts_at ?? "…"} → ${r.ends_at ?? "…"}`;
  if (r.senders) return senderList(r);
  return "—";
}

/** A sender allow- or blocklist, readable: its count, and every address (whole) when opened. */
function senderList(r) {
  const count = `${r.senders.length} sender${r.senders.length === 1 ? "" : "s"}`;
  if (r.senders.length === 0) return count;
  return h(
    "details",
    { class: "senders" },
    h("summary", { "aria-label": `${count} of rule ${r.id}` }, count),
    h(
      "ul",
      { class: "address-list" },
      r.senders.map((address) => h("li", {}, h("code", { class: "address" }, address))),
    ),
  );
}
