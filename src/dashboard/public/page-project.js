// A project's overview and settings: name, daily cap (typed in the native token, sent in wei),
// the validity TTL of its authorizations and the sponsor icon wallets show. With several chains
// served, the tank and the amounts are the chosen chain's (ctx.chainId, ctx.currency).
import { get, patch, seg } from "./api.js";
import { formatUnits, parseAmount } from "./money.js";
import { announce, facts, field, form, h, hex, InputProblem, money, section, time } from "./ui.js";

export async function render(ctx) {
  const id = ctx.projectId;
  const [project, balance] = await Promise.all([
    get(`/projects/${seg(id)}`),
    get(ctx.forChain(`/projects/${seg(id)}/balance`)),
  ]);
  const { decimals, symbol } = ctx.currency;
  const settings = form(
    { class: "stack", "aria-label": "Project settings" },
    [
      field("Name", { name: "name", value: project.name, required: true, maxlength: 128 }),
      field(
        `Daily cap (${symbol})`,
        {
          name: "dailyCap",
          value:
            project.daily_cap === null ? "" : formatUnits(project.daily_cap, decimals).replaceAll(",", ""),
          inputmode: "decimal",
        },
        ctx.chainId === null
          ? "Most the tank may spend per UTC day; empty for no cap. Exact: sent to the API in wei."
          : // One figure in wei, which every chain's tank applies to itself apart.
            "Most each chain's tank may spend per UTC day, the same amount in wei on every chain; empty for no cap. Exact: sent to the API in wei.",
      ),
      field(
        "Authorization TTL (seconds)",
        {
          name: "validityTtlSec",
          type: "number",
          min: 30,
          max: 3600,
          value: project.validity_ttl_sec,
          required: true,
        },
        "How long an authorization stays valid: 30 to 3600 seconds.",
      ),
      field(
        "Sponsor icon URL",
        { name: "sponsorIcon", type: "url", value: project.sponsor_icon ?? "" },
        "https URL or data:image URI; shown by wallets (ERC-7677). Empty removes it.",
      ),
    ],
    "Save settings",
    async (data, el) => {
      let dailyCap = null;
      if (data.dailyCap.trim() !== "") {
        const amount = parseAmount(data.dailyCap, decimals);
        if (amount.error)
          throw new InputProblem(`Daily cap: ${amount.error}`, el.querySelector('[name="dailyCap"]'));
        dailyCap = amount.wei;
      }
      await patch(`/projects/${seg(id)}`, {
        name: data.name,
        dailyCap,
        validityTtlSec: Number(data.validityTtlSec),
        sponsorIcon: data.sponsorIcon.trim() === "" ? null : data.sponsorIcon.trim(),
      });
      announce("Settings saved");
      ctx.refresh();
    },
  );
  return h(
    "div",
    {},
    section(
      "Project",
      facts([
        ["Name", project.name],
        ["Id", h("code", {}, project.id)],
        ["Organization", h("a", { href: `#/orgs/${project.organization_id}` }, project.owner)],
        ["Gas tank", money(balance.balance, ctx.currency)],
        ["Daily cap", project.daily_cap === null ? "none" : money(project.daily_cap, ctx.currency)],
        ["Authorization TTL", `${project.validity_ttl_sec} s`],
        ["Deposit address", hex(project.deposit_address)],
        ["Created", time(project.created_at)],
      ]),
    ),
    section("Settings", settings),
  );
}
