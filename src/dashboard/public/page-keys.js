// API keys: issue one (the full key appears once, with a copy button), list them by preview,
// revoke one.
import { api, del, get, post, seg } from "./api.js";
import {
  announce,
  badge,
  confirmDialog,
  copyButton,
  errorBox,
  field,
  form,
  h,
  InputProblem,
  nameOf,
  renameControl,
  section,
  table,
  time,
} from "./ui.js";

const SCOPES = [
  ["sponsor", "sponsor — authorize operations (what a game backend needs)"],
  ["read", "read — project, analytics, parity"],
  ["manage", "manage — allowlist and keys"],
];

export async function render(ctx) {
  const id = ctx.projectId;
  const keys = await get(`/projects/${seg(id)}/apikeys`);
  const reveal = h("div", { class: "reveal", hidden: true, tabindex: "-1" });
  const scopeBoxes = h(
    "fieldset",
    { class: "scopes" },
    h("legend", {}, "Scopes"),
    SCOPES.map(([value, label]) =>
      h(
        "label",
        { class: "check" },
        h("input", { type: "checkbox", name: `scope-${value}`, value, checked: value === "sponsor" }),
        label,
      ),
    ),
  );
  const create = form(
    { class: "inline", "aria-label": "Create an API key" },
    [
      field(
        "Name (optional)",
        { name: "name", maxlength: 128, autocomplete: "off" },
        "Yours, to tell keys apart: “Game server EU”.",
      ),
      field("Rate limit (requests per minute)", {
        name: "rateLimit",
        type: "number",
        min: 1,
        max: 1000000,
        value: 600,
        required: true,
      }),
      scopeBoxes,
    ],
    "Create key",
    async (data) => {
      const scopes = SCOPES.map(([s]) => s).filter((s) => data[`scope-${s}`]);
      // The API gives a key without scopes the sponsor scope: a key with none ticked would
      // silently become what the person just unticked.
      if (scopes.length === 0) {
        throw new InputProblem("choose at least one scope for the key", scopeBoxes.querySelector("input"));
      }
      const name = data.name.trim();
      const created = await post(`/projects/${seg(id)}/apikeys`, {
        rateLimit: Number(data.rateLimit),
        scopes,
        ...(name ? { name } : {}),
      });
      showOnce(reveal, created, ctx);
    },
  );
  const rows = keys.map((k) => {
    const errors = errorBox();
    const revoke = k.revoked_at
      ? null
      : h(
          "button",
          {
            type: "button",
            class: "danger small",
            "aria-label": `Revoke key ${k.key_preview}`,
            onclick: async () => {
              errors.clear();
              const sure = await confirmDialog(
                "Revoke this key?",
                `Requests with ${k.key_preview}… are refused within seconds. This cannot be undone.`,
                "Revoke key",
              );
              if (!sure) return;
              try {
                await del(`/projects/${seg(id)}/apikeys/${k.id}`);
                announce(`Key ${k.key_preview} revoked`);
                ctx.refresh();
              } catch (err) {
                errors.show(err);
              }
            },
          },
          "Revoke",
        );
    const rename = renameControl(`key ${k.key_preview}`, k.name, async (name) => {
      await api("PATCH", `/projects/${seg(id)}/apikeys/${k.id}`, { name });
      announce(name ? `Key ${k.key_preview} renamed ${name}` : `Key ${k.key_preview} has no name now`);
      ctx.refresh();
    });
    return [
      nameOf(k.name),
      h("code", {}, `${k.key_preview}…`),
      k.scopes.join(", "),
      String(k.rate_limit),
      time(k.issued_at),
      time(k.last_used_at),
      k.revoked_at ? badge("revoked") : badge("active"),
      h("div", { class: "row-actions" }, rename, revoke, errors.el),
    ];
  });
  return h(
    "div",
    {},
    section("Create an API key", create, reveal),
    section(
      "Keys",
      table(
        "API keys of this project",
        ["Name", "Key", "Scopes", "Rate limit", "Issued", "Last used", "Status", "Actions"],
        rows,
        "No keys yet.",
      ),
    ),
  );
}

/** The full key, once: copy it now, it is never shown again. */
function showOnce(reveal, created, ctx) {
  const input = h("input", {
    type: "text",
    readonly: true,
    value: created.apiKey,
    class: "secret",
    "aria-label": "The new API key",
    id: "new-api-key",
  });
  const done = h("button", { type: "button", class: "secondary" }, "I have stored it");
  done.addEventListener("click", () => {
    reveal.replaceChildren();
    reveal.hidden = true;
    ctx.refresh();
  });
  reveal.replaceChildren(
    h("h3", {}, "Your new key — shown once"),
    h(
      "p",
      {},
      "Store it now in your game backend's secrets. The service keeps only a digest and can never show it again.",
    ),
    h("div", { class: "copy-row" }, input, copyButton(created.apiKey, "Copy key")),
    done,
  );
  reveal.hidden = false;
  reveal.focus();
  announce(`Key ${created.keyPreview} created: copy it now, it is shown once`);
}
