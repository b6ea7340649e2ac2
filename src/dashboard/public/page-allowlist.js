// The (contract, function selector) pairs the project sponsors, each with an optional name; an
// entry is paused and resumed in place (PATCH), its name kept.
import { api, del, get, post, seg } from "./api.js";
import { contractNames } from "./names.js";
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
  nameOf,
  renameControl,
  section,
  table,
  time,
} from "./ui.js";

export async function render(ctx) {
  const id = ctx.projectId;
  const [entries, names] = await Promise.all([get(`/projects/${seg(id)}/allowlist`), contractNames(id)]);
  // The picker: every function of an uploaded ABI, offered as the selector field's suggestions.
  const picker = h(
    "datalist",
    { id: "known-functions" },
    names
      .functions()
      .map((f) => h("option", { value: f.selector, label: `${f.contract ?? f.address}: ${f.signature}` })),
  );
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
          list: "known-functions",
        },
        "The first 4 bytes of the call data, as 0x and 8 hex digits; the functions of uploaded ABIs are offered.",
      ),
      picker,
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
      names.contract(e.target_contract),
      names.fn(e.target_contract, e.function_selector),
      e.enabled ? badge("active") : badge("paused"),
      time(e.created_at),
      h("div", { class: "row-actions" }, toggle, rename, errors.el),
    ];
  });
  const upload = form(
    { class: "inline", "aria-label": "Name a contract from its ABI" },
    [
      field("Address", {
        name: "address",
        required: true,
        pattern: "0x[0-9a-fA-F]{40}",
        placeholder: "0x…",
        autocomplete: "off",
      }),
      field("Contract name (optional)", { name: "name", maxlength: 128, autocomplete: "off" }),
      field(
        "ABI (JSON)",
        {
          tag: "textarea",
          name: "abi",
          rows: 4,
          required: true,
          placeholder: '[{"type":"function","name":"mint",…}]',
        },
        "The JSON array a compiler or a block explorer gives; only function names and signatures are kept.",
      ),
    ],
    "Save names",
    async (data, el) => {
      let abi;
      try {
        abi = JSON.parse(data.abi);
      } catch {
        throw new InputProblem("ABI (JSON): not valid JSON", el.querySelector('[name="abi"]'));
      }
      // A compiler's artifact holds the ABI under `abi`.
      if (abi && !Array.isArray(abi) && Array.isArray(abi.abi)) abi = abi.abi;
      const name = data.name.trim();
      const saved = await api("PUT", `/projects/${seg(id)}/contracts/${seg(data.address.trim())}`, {
        abi,
        ...(name ? { name } : {}),
      });
      announce(`${saved.functions.length} function names saved for ${saved.name ?? saved.address}`);
      ctx.refresh();
    },
  );
  const contractRows = names.list.map((c) => {
    const errors = errorBox();
    const remove = h(
      "button",
      {
        type: "button",
        class: "secondary small",
        "aria-label": `Forget the names of ${c.name ?? c.address}`,
        onclick: async () => {
          errors.clear();
          if (!(await confirmDialog("Forget these names?", "The allowlist is not changed.", "Forget names")))
            return;
          try {
            await del(`/projects/${seg(id)}/contracts/${seg(c.address)}`);
            announce("Names forgotten");
            ctx.refresh();
          } catch (err) {
            errors.show(err);
          }
        },
      },
      "Forget",
    );
    return [
      nameOf(c.name),
      hex(c.address),
      h(
        "details",
        { class: "senders" },
        h("summary", {}, `${c.functions.length} function${c.functions.length === 1 ? "" : "s"}`),
        h(
          "ul",
          { class: "address-list" },
          c.functions.map((f) =>
            h("li", {}, h("code", {}, f.signature), " ", h("code", { class: "muted" }, f.selector)),
          ),
        ),
      ),
      time(c.updated_at),
      h("div", { class: "row-actions" }, remove, errors.el),
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
        ["Name", "Contract", "Function", "State", "Added", "Actions"],
        rows,
        "Nothing is allowlisted: every authorization is refused.",
      ),
    ),
    section(
      "Contract names",
      table(
        "Contracts named from their ABI",
        ["Name", "Address", "Functions", "Updated", "Actions"],
        contractRows,
        "No ABI uploaded: contracts and functions are shown by address and selector.",
      ),
      upload,
    ),
  );
}
