// The (contract, function selector) pairs the project sponsors.
import { del, get, post, seg } from "./api.js";
import { announce, badge, errorBox, field, form, h, hex, section, table, time } from "./ui.js";

export async function render(ctx) {
  const id = ctx.projectId;
  const entries = await get(`/projects/${seg(id)}/allowlist`);
  const add = form(
    { class: "inline", "aria-label": "Allow a contract function" },
    [
      field("Contract address", {
        name: "targetContract",
        required: true,
        pattern: "0x[0-9a-fA-F]{40}",
        placeholder: "0x…",
        autocomplete: "off",
      }),
      field(
        "Function selector",
        {
          name: "functionSelector",
          required: true,
          pattern: "0x[0-9a-fA-F]{8}",
          placeholder: "0xa0712d68",
          autocomplete: "off",
        },
        "The first 4 bytes of the call data, as 0x and 8 hex digits.",
      ),
    ],
    "Allow",
    async (pair) => {
      await post(`/projects/${seg(id)}/allowlist`, {
        targetContract: pair.targetContract.trim(),
        functionSelector: pair.functionSelector.trim(),
      });
      announce("Allowlist entry added");
      ctx.refresh();
    },
  );
  const rows = entries.map((e) => {
    const errors = errorBox();
    const pair = { targetContract: e.target_contract, functionSelector: e.function_selector };
    const toggle = h(
      "button",
      {
        type: "button",
        class: e.enabled ? "danger small" : "secondary small",
        "aria-label": `${e.enabled ? "Disable" : "Enable"} ${e.function_selector} on ${e.target_contract}`,
        onclick: async () => {
          errors.clear();
          try {
            if (e.enabled) await del(`/projects/${seg(id)}/allowlist`, pair);
            else await post(`/projects/${seg(id)}/allowlist`, pair);
            announce(e.enabled ? "Entry disabled" : "Entry enabled");
            ctx.refresh();
          } catch (err) {
            errors.show(err);
          }
        },
      },
      e.enabled ? "Disable" : "Enable",
    );
    return [
      hex(e.target_contract),
      h("code", {}, e.function_selector),
      e.enabled ? badge("enabled") : badge("disabled"),
      time(e.created_at),
      h("div", { class: "row-actions" }, toggle, errors.el),
    ];
  });
  return h(
    "div",
    {},
    section("Allow a function", add),
    section(
      "Allowlist",
      table(
        "Allowlisted contract functions",
        ["Contract", "Selector", "State", "Added", "Actions"],
        rows,
        "Nothing is allowlisted: every authorization is refused.",
      ),
    ),
  );
}
