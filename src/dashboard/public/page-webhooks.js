// Webhooks (issue 11): event endpoints (the signing secret shown once, on creation and rotation),
// pausing, deleting, and each endpoint's delivery log with redelivery; the approval webhook asked
// before each sponsorship is signed; the low-balance alert (balance.low).
import { api, del, get, patch, post, seg } from "./api.js";
import { parseAmount } from "./money.js";
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
  money,
  section,
  table,
  time,
} from "./ui.js";

export async function render(ctx) {
  const id = ctx.projectId;
  // The event types, each with what it reports, come from the service's registry.
  const [endpoints, eventTypes] = await Promise.all([
    get(`/projects/${seg(id)}/webhooks`),
    get("/webhooks/event-types"),
  ]);
  const reveal = h("div", { class: "reveal", hidden: true, tabindex: "-1" });
  const showSecret = (secret, what) => {
    reveal.replaceChildren(
      h("h3", {}, `${what} — shown once`),
      h("p", {}, "Verify each delivery's signature with it; the service cannot show it again."),
      h(
        "div",
        { class: "copy-row" },
        h("input", {
          type: "text",
          readonly: true,
          value: secret,
          class: "secret",
          "aria-label": "Signing secret",
        }),
        copyButton(secret, "Copy secret"),
      ),
      h("button", { type: "button", class: "secondary", onclick: () => ctx.refresh() }, "I have stored it"),
    );
    reveal.hidden = false;
    reveal.focus();
  };
  const types = h(
    "fieldset",
    { class: "scopes" },
    h("legend", {}, "Events"),
    h(
      "label",
      { class: "check" },
      h("input", { type: "checkbox", name: "type-*", value: "*", checked: true }),
      "every event (*)",
    ),
    eventTypes.map(({ type, description }) =>
      h(
        "label",
        { class: "check", title: description },
        h("input", { type: "checkbox", name: `type-${type}`, value: type }),
        type,
      ),
    ),
  );
  const create = form(
    { class: "inline", "aria-label": "Add a webhook endpoint" },
    [
      field("URL", { name: "url", type: "url", required: true, placeholder: "https://…" }),
      field("Description", { name: "description", maxlength: 256 }),
      field(
        "Events per request",
        {
          name: "maxEventsPerRequest",
          type: "number",
          min: 1,
          max: 100,
          step: 1,
          value: "1",
          required: true,
        },
        '1 sends each event alone. More sends the events due together in one request, {"events":[…]}: de-duplicate on each event\'s id.',
      ),
      types,
    ],
    "Add endpoint",
    async (data) => {
      const eventTypes = Object.keys(data)
        .filter((k) => k.startsWith("type-"))
        .map((k) => k.slice(5));
      const created = await post(`/projects/${seg(id)}/webhooks`, {
        url: data.url,
        eventTypes,
        description: data.description,
        maxEventsPerRequest: Number(data.maxEventsPerRequest),
      });
      showSecret(created.secret, "The endpoint's signing secret");
    },
  );
  const rows = endpoints.map((e) => {
    const errors = errorBox();
    const act = (label, aria, fn, kind = "secondary") =>
      h(
        "button",
        {
          type: "button",
          class: `${kind} small`,
          "aria-label": aria,
          onclick: async () => {
            errors.clear();
            try {
              await fn();
            } catch (err) {
              errors.show(err);
            }
          },
        },
        label,
      );
    return [
      h("a", { href: `#/projects/${encodeURIComponent(id)}/webhooks?endpoint=${e.id}` }, e.url),
      e.event_types.join(", "),
      String(e.max_events_per_request),
      e.description,
      e.enabled ? badge("enabled") : badge("paused", "expired"),
      h(
        "div",
        { class: "row-actions" },
        act(e.enabled ? "Pause" : "Resume", `${e.enabled ? "Pause" : "Resume"} ${e.url}`, async () => {
          await patch(`/projects/${seg(id)}/webhooks/${e.id}`, { enabled: !e.enabled });
          ctx.refresh();
        }),
        act("Rotate secret", `Rotate secret of ${e.url}`, async () => {
          const { secret } = await post(`/projects/${seg(id)}/webhooks/${e.id}/rotate-secret`);
          showSecret(secret, "The new signing secret");
        }),
        act(
          "Delete",
          `Delete ${e.url}`,
          async () => {
            if (
              !(await confirmDialog(
                "Delete this endpoint?",
                `${e.url}, its pending deliveries and its log go.`,
                "Delete endpoint",
              ))
            )
              return;
            await del(`/projects/${seg(id)}/webhooks/${e.id}`);
            announce("Endpoint deleted");
            ctx.refresh();
          },
          "danger",
        ),
        errors.el,
      ),
    ];
  });
  const selected = ctx.query.get("endpoint");
  const log = selected ? await deliveryLog(ctx, id, selected) : null;
  const [approval, alert] = await Promise.all([
    approvalSection(ctx, id, showSecret),
    balanceAlertSection(ctx, id),
  ]);
  return h(
    "div",
    {},
    section("Add an endpoint", create, reveal),
    section(
      "Endpoints",
      table(
        "Webhook endpoints",
        ["URL", "Events", "Per request", "Description", "State", "Actions"],
        rows,
        "No endpoints.",
      ),
    ),
    log,
    approval,
    alert,
  );
}

/** The approval webhook: read, set (its secret shown once), remove. */
async function approvalSection(ctx, id, showSecret) {
  const path = `/projects/${seg(id)}/approval-webhook`;
  const state = await get(path);
  const current = state.configured ? state : null;
  const failModes = [
    ["closed", "Refuse the sponsorship (fail closed)"],
    ["open", "Sponsor it anyway (fail open)"],
  ];
  const set = form(
    { class: "inline", "aria-label": "Set the approval webhook" },
    [
      field("Approval URL", {
        name: "url",
        type: "url",
        required: true,
        placeholder: "https://…",
        value: current?.url ?? "",
      }),
      field(
        "Timeout (ms)",
        {
          name: "timeoutMs",
          type: "number",
          min: 50,
          max: 5000,
          required: true,
          value: current?.timeoutMs ?? 2000,
        },
        "How long a sponsorship waits for the answer.",
      ),
      field(
        "When it does not answer in time",
        {
          tag: "select",
          name: "failMode",
          options: failModes.map(([v, label]) =>
            h("option", { value: v, selected: (current?.failMode ?? "closed") === v }, label),
          ),
        },
        "Also when it errors or answers something that is not an approval.",
      ),
    ],
    current ? "Save approval webhook" : "Set approval webhook",
    async (data) => {
      const saved = await api("PUT", path, {
        url: data.url,
        timeoutMs: Number(data.timeoutMs),
        failMode: data.failMode,
      });
      if (saved.secret) showSecret(saved.secret, "The approval webhook's signing secret");
      else {
        announce("Approval webhook saved");
        ctx.refresh();
      }
    },
  );
  const errors = errorBox();
  const remove = current
    ? h(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: async () => {
            errors.clear();
            try {
              if (
                !(await confirmDialog(
                  "Remove the approval webhook?",
                  "Sponsorships are no longer asked about.",
                  "Remove",
                ))
              )
                return;
              await del(path);
              announce("Approval webhook removed");
              ctx.refresh();
            } catch (err) {
              errors.show(err);
            }
          },
        },
        "Remove approval webhook",
      )
    : null;
  return section(
    "Approval webhook",
    h(
      "p",
      { class: "muted" },
      current
        ? `Every sponsorship is first sent to ${current.url}, which approves or denies it within ${current.timeoutMs} ms.`
        : "None: sponsorships are decided by the allowlist, the policies and the tank alone.",
    ),
    set,
    remove,
    errors.el,
  );
}

/** The low-balance alert: balance.low each time the tank falls below the threshold. */
async function balanceAlertSection(ctx, id) {
  const path = `/projects/${seg(id)}/balance-alert`;
  const { thresholdWei } = await get(path);
  const { decimals, symbol } = ctx.currency;
  const set = form(
    { class: "inline", "aria-label": "Set the low-balance alert" },
    [
      field(
        `Alert below (${symbol})`,
        { name: "threshold", inputmode: "decimal", placeholder: "e.g. 0.5" },
        "Empty: no alert. Subscribed endpoints get balance.low each time the tank crosses below it.",
      ),
    ],
    "Save alert",
    async (data, el) => {
      const text = String(data.threshold ?? "").trim();
      const amount = text === "" ? { wei: null } : parseAmount(text, decimals);
      if (amount.error || amount.wei === "0") {
        throw new InputProblem(
          `${amount.error ?? "zero is no threshold"}; enter a positive amount of ${symbol}, or nothing to remove the alert`,
          el.querySelector('[name="threshold"]'),
        );
      }
      const wei = amount.wei;
      await api("PUT", path, { thresholdWei: wei });
      announce("Low-balance alert saved");
      ctx.refresh();
    },
  );
  return section(
    "Low-balance alert",
    h(
      "p",
      { class: "muted" },
      thresholdWei === null
        ? "No alert is set."
        : h("span", {}, "Alert below ", money(thresholdWei, ctx.currency)),
    ),
    set,
  );
}

async function deliveryLog(ctx, id, endpointId) {
  const before = ctx.query.get("before");
  const status = ctx.query.get("status") ?? "";
  const q = new URLSearchParams({
    limit: "25",
    ...(before ? { before } : {}),
    ...(status ? { status } : {}),
  });
  const res = await get(`/projects/${seg(id)}/webhooks/${seg(endpointId)}/deliveries?${q}`);
  const base = `#/projects/${encodeURIComponent(id)}/webhooks?endpoint=${endpointId}${status ? `&status=${status}` : ""}`;
  const rows = res.deliveries.map((d) => {
    const errors = errorBox();
    const again = h(
      "button",
      {
        type: "button",
        class: "secondary small",
        "aria-label": `Redeliver ${d.event_id}`,
        onclick: async () => {
          errors.clear();
          try {
            await api(
              "POST",
              `/projects/${seg(id)}/webhooks/${seg(endpointId)}/deliveries/${d.id}/redeliver`,
              {},
            );
            announce("Queued for delivery");
            ctx.refresh();
          } catch (err) {
            errors.show(err);
          }
        },
      },
      "Redeliver",
    );
    return [
      time(d.created_at),
      d.event_type,
      badge(d.status, d.status === "succeeded" ? "success" : d.status === "failed" ? "reverted" : "pending"),
      String(d.attempts),
      d.last_status_code === null ? "—" : String(d.last_status_code),
      d.last_error ?? "—",
      time(d.next_attempt_at),
      h("div", { class: "row-actions" }, again, errors.el),
    ];
  });
  const filter = h(
    "p",
    { class: "row-actions" },
    "Show: ",
    ["", "pending", "succeeded", "failed"].map((s) =>
      h(
        "a",
        {
          href: `#/projects/${encodeURIComponent(id)}/webhooks?endpoint=${endpointId}${s ? `&status=${s}` : ""}`,
          "aria-current": s === status ? "true" : null,
          class: "button secondary",
        },
        s || "all",
      ),
    ),
  );
  return section(
    `Delivery log of endpoint ${endpointId}`,
    filter,
    table(
      "Deliveries, newest first",
      ["Created", "Event", "Status", "Attempts", "Last HTTP status", "Last error", "Next attempt", "Actions"],
      rows,
      "No deliveries yet.",
    ),
    h(
      "nav",
      { class: "pager", "aria-label": "Delivery pages" },
      before ? h("a", { href: base, class: "button secondary" }, "Newest") : h("span", {}),
      res.nextBefore
        ? h(
            "a",
            { href: `${base}&before=${res.nextBefore}`, class: "button secondary", rel: "next" },
            "Older",
          )
        : h("span", {}),
    ),
  );
}
