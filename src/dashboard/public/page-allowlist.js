// The (contract, function selector) pairs the project sponsors, each with an optional name; an
// entry is paused and resumed in place (PATCH), its name kept.
import { api, get, post, seg } from "./api.js";
import {
  announce,
  badge,
  errorBox,
  field,
  form,
  h,
  hex,
  nameOf,
  renameControl,
  section,
  table,
  time,
} from "./ui.js";

export async function render(ctx) {
  const id = ctx.projectId;
  const entries = await get(`/projects/${seg(id)}/allowlist`);
  const add = form(
    { class: "inline", "aria-label": "Allow a contract function" },
    [
      field(
        "Name (optional)",
        { name: "name", maxlength: 128, autocomplete: "off" },
        "Yours, shown in this list: “Mint on the game contract”.",
      ),
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
      const name = pair.name.trim();
      await post(`/projects/${seg(id)}/allowlist`, {
        targetContract: pair.targetContract.trim(),
        functionSelector: pair.functionSelector.trim(),
        ...(name ? { name } : {}),
      });
      announce("Allowlist entry added");
      ctx.refresh();
    },
  );
  const rows = entries.map((e) => {
    const errors = errorBox();
    const pair = { targetContract: e.target_contract, functionSelector: e.function_selector };
    const what = e.name ?? `${e.function_selector} on ${e.target_contract}`;
    const toggle = h(
      "button",
      {
        type: "button",
        class: e.enabled ? "danger small" : "secondary small",
        "aria-label": `${e.enabled ? "Pause" : "Resume"} ${what}`,
        onclick: async () => {
          errors.clear();
          try {
            await api("PATCH", `/projects/${seg(id)}/allowlist`, { ...pair, enabled: !e.enabled });
            announce(e.enabled ? "Entry paused: its calls are refused" : "Entry resumed");
            ctx.refresh();
          } catch (err) {
            errors.show(err);
          }
        },
      },
      e.enabled ? "Pause" : "Resume",
    );
    const rename = renameControl(what, e.name, async (name) => {
      await api("PATCH", `/projects/${seg(id)}/allowlist`, { ...pair, name });
      announce("Entry renamed");
      ctx.refresh();
    });
    return [
      nameOf(e.name),
      hex(e.target_contract),
      h("code", {}, e.function_selector),
      e.enabled ? badge("active") : badge("paused"),
      time(e.created_at),
      h("div", { class: "row-actions" }, toggle, rename, errors.el),
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
        ["Name", "Contract", "Selector", "State", "Added", "Actions"],
        rows,
        "Nothing is allowlisted: every authorization is refused.",
      ),
    ),
  );
}
