// Funds parity: a project's cached balance against its ledger, the same for every project of an
// organization or of the developer, and chain parity (what the paymaster paid on chain against
// what the tanks were charged) for the service's operators.
import { get, seg } from "./api.js";
import { badge, errorBox, facts, field, form, h, hex, money, section, table } from "./ui.js";

export function parityTable(report, currency) {
  return h(
    "div",
    {},
    h(
      "p",
      {},
      `${report.total} project(s) checked, `,
      h("strong", {}, `${report.driftCount} drifting`),
      ` — generated ${report.generatedAt}`,
    ),
    table(
      "Funds parity per project",
      ["Project", "Ledger", "Cached", "Delta", "State"],
      report.projects.map((p) => [
        h("a", { href: `#/projects/${encodeURIComponent(p.projectId)}/parity` }, p.projectId),
        money(p.ledgerBalance, currency),
        money(p.cachedBalance, currency),
        money(p.delta, currency),
        p.inSync ? badge("in sync", "ok") : badge("drift", "bad"),
      ]),
      "No projects.",
    ),
  );
}

export async function projectParity(ctx) {
  const report = await get(`/projects/${seg(ctx.projectId)}/funds/parity`);
  return section(
    "Funds parity",
    h(
      "p",
      {},
      report.inSync ? badge("in sync", "ok") : badge("drift", "bad"),
      " The cached gas tank balance against the sum of the ledger.",
    ),
    facts([
      ["Ledger balance", money(report.ledgerBalance, ctx.currency)],
      ["Cached balance", money(report.cachedBalance, ctx.currency)],
      ["Delta", money(report.delta, ctx.currency)],
    ]),
  );
}

export async function allParity(ctx) {
  const onlyDrift = ctx.query.get("onlyDrift") === "true";
  const report = await get(`/projects/funds/parity-report${onlyDrift ? "?onlyDrift=true" : ""}`);
  const toggle = h("input", { type: "checkbox", id: "only-drift", checked: onlyDrift });
  toggle.addEventListener("change", () => {
    location.hash = toggle.checked ? "#/parity?onlyDrift=true" : "#/parity";
  });
  return h(
    "div",
    {},
    h("h1", { tabindex: "-1" }, "Funds parity"),
    section(
      "Every project you can see",
      h("p", { class: "check" }, toggle, h("label", { for: "only-drift" }, " Only projects that drift")),
      parityTable(report, ctx.currency),
    ),
  );
}

export async function chainParity(ctx) {
  const out = h("div", { id: "chain-parity" });
  const chains = ctx.settings.chains;
  const load = async ({ chainId, fromBlock }) => {
    const q = fromBlock ? `?fromBlock=${encodeURIComponent(fromBlock)}` : "";
    const r = await get(`/blockchain/chains/${seg(chainId)}/parity${q}`);
    out.replaceChildren(chainReport(r, ctx.currency));
  };
  const choose = form(
    { class: "inline", "aria-label": "Chain parity" },
    [
      field("Chain", {
        tag: "select",
        name: "chainId",
        options: chains.map((c) => h("option", { value: c.chainId }, `${c.name} (${c.chainId})`)),
      }),
      field("From block", { name: "fromBlock", type: "number", min: 0, placeholder: "from the start" }),
    ],
    "Check",
    load,
    // A query, not a creation: the chosen chain and block stay for the next check.
    { resetOnSuccess: false },
  );
  const first = errorBox();
  if (chains[0]) await load({ chainId: chains[0].chainId }).catch((err) => first.show(err));
  return h(
    "div",
    {},
    h("h1", { tabindex: "-1" }, "Chain parity"),
    section(
      "What the paymaster paid on chain, against what the tanks were charged",
      h(
        "p",
        { class: "muted" },
        "For the service's operators (OPERATOR_EMAILS); others are refused by the API.",
      ),
      choose,
      first.el,
      out,
    ),
  );
}

function chainReport(r, currency) {
  const wei = (v) => money(v, currency);
  return h(
    "div",
    {},
    h(
      "p",
      {},
      r.inSync ? badge("in sync", "ok") : badge("attention", "bad"),
      ` Blocks ${r.fromBlock ?? "?"}–${r.throughBlock ?? "?"}, generated ${r.generatedAt}`,
    ),
    facts([
      ["Operations", String(r.operations)],
      ["Paid on chain", wei(r.paidOnChain)],
      ["Billed to tanks", wei(r.billed)],
      ["Unattributed", h("span", {}, wei(r.unattributed), ` (${r.unattributedCount})`)],
      ["Tanks", wei(r.tanks)],
      ["Open reservations", wei(r.openReservations)],
      ["Promised", wei(r.promised)],
      ["EntryPoint deposits", wei(r.entryPointDeposits)],
      ["Deposits cover promises", r.depositsCover === null ? "unknown" : r.depositsCover ? "yes" : "no"],
      ["Reorganisations", `${r.reorgs.detected} detected, ${r.reorgs.unreconciled} unreconciled`],
    ]),
    table(
      "Per EntryPoint",
      ["EntryPoint", "Paymaster", "Operations", "Paid", "Billed"],
      (r.entryPoints ?? []).map((e) => [
        hex(e.entryPoint),
        hex(e.paymaster),
        String(e.operations),
        wei(e.paidOnChain),
        wei(e.billed),
      ]),
    ),
  );
}
