// Small DOM helpers. Everything is built with createElement and textContent: no HTML strings,
// so nothing the API returns can become markup.
import { plainDetail } from "./messages.js";
import { formatUnits } from "./money.js";

/** h("button", {class: "x", onclick: f, "aria-label": "y"}, "text", child, [children]) */
export function h(tag, props = {}, ...children) {
  const el =
    tag.startsWith("svg:") || SVG_TAGS.has(tag)
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.replace(/^svg:/, ""))
      : document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.setAttribute("class", value);
    else if (key === "text") el.textContent = value;
    // A form's reset (after a successful submit) goes back to the default state, not to empty:
    // the defaults are set with the values.
    else if (key === "value" && "value" in el) {
      el.value = value;
      if ("defaultValue" in el) el.defaultValue = value;
    } else if (key === "checked") el.checked = el.defaultChecked = Boolean(value);
    else if (key === "selected") el.selected = el.defaultSelected = Boolean(value);
    else if (key === "disabled") el.disabled = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

const SVG_TAGS = new Set(["svg", "g", "rect", "line", "text", "path", "polyline", "circle", "title", "desc"]);

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

let ids = 0;
export const uid = (prefix = "f") => `${prefix}-${++ids}`;

/** A labelled form field; `input` props go to the control. */
export function field(label, input = {}, hint) {
  const id = input.id ?? uid();
  const hintId = hint ? `${id}-hint` : undefined;
  const control =
    input.tag === "select"
      ? h("select", { ...omit(input, ["tag", "options"]), id, "aria-describedby": hintId }, input.options)
      : input.tag === "textarea"
        ? h("textarea", { ...omit(input, ["tag"]), id, "aria-describedby": hintId })
        : h("input", { ...omit(input, ["tag"]), id, "aria-describedby": hintId });
  return h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    control,
    hint ? h("p", { class: "hint", id: hintId }, hint) : null,
  );
}

function omit(obj, keys) {
  return Object.fromEntries(Object.entries(obj).filter(([k]) => !keys.includes(k)));
}

/** A region that announces errors (role=alert) with the API's problem detail. */
export function errorBox() {
  const box = h("div", { class: "error", role: "alert", hidden: true });
  return {
    el: box,
    show(err) {
      box.replaceChildren(...describeError(err));
      box.hidden = false;
    },
    clear() {
      box.replaceChildren();
      box.hidden = true;
    },
  };
}

/**
 * A refusal decided on the page before anything is sent (an amount that is not a plain number,
 * a key without a scope): shown like the API's, and the control it names is marked invalid.
 */
export class InputProblem extends Error {
  constructor(message, control) {
    super(message);
    this.control = control ?? null;
  }
}

/**
 * The problem+json title, detail and code of an API error, or the message of any other. A
 * schema refusal is said in the form's words (plainDetail); its code stays, small, for support.
 */
export function describeError(err) {
  if (err?.problem) {
    const p = err.problem;
    return [
      h("strong", {}, p.title ?? `HTTP ${err.status}`),
      ": ",
      h("span", { class: "detail" }, plainDetail(p.detail ?? "")),
      p.code ? h("small", { class: "code", title: `Error code ${p.code}` }, ` (${p.code})`) : null,
    ];
  }
  const title = err instanceof InputProblem ? "Not sent" : "Error";
  return [h("strong", {}, title), ": ", h("span", { class: "detail" }, err?.message ?? String(err))];
}

/**
 * A form whose submit runs `action(data, form)`; errors go to its alert box. One submission at a
 * time: the button is disabled and a second submit (a double click, Enter again) is ignored
 * until the first is answered; after success the form is reset, so the same values are not sent
 * twice by accident (`resetOnSuccess: false` for forms that are queries, not creations). An
 * error is cleared by the next submit and by any edit, since it described the values sent.
 * Invalid fields are marked only after a submit was tried (the `submitted` class; see the CSS).
 */
export function form(props, fields, submitLabel, action, { resetOnSuccess = true } = {}) {
  const errors = errorBox();
  const button = h("button", { type: "submit", class: "primary" }, submitLabel);
  const el = h(
    "form",
    { ...props, novalidate: false },
    fields,
    h("div", { class: "actions" }, button),
    errors.el,
  );
  let inFlight = false;
  const clearErrors = () => {
    errors.clear();
    for (const marked of el.querySelectorAll('[aria-invalid="true"]')) marked.removeAttribute("aria-invalid");
  };
  // `invalid` does not bubble: caught on the way down when the browser's own checks refuse.
  el.addEventListener("invalid", () => el.classList.add("submitted"), true);
  el.addEventListener("input", clearErrors);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (inFlight) return;
    inFlight = true;
    el.classList.add("submitted");
    clearErrors();
    button.disabled = true;
    el.setAttribute("aria-busy", "true");
    try {
      await action(Object.fromEntries(new FormData(el).entries()), el);
      if (resetOnSuccess) {
        el.reset();
        el.classList.remove("submitted");
      }
    } catch (err) {
      errors.show(err);
      if (err instanceof InputProblem && err.control) {
        err.control.setAttribute("aria-invalid", "true");
        err.control.focus();
      }
    } finally {
      inFlight = false;
      button.disabled = false;
      el.removeAttribute("aria-busy");
    }
  });
  return el;
}

/**
 * A table with a caption; rows are arrays of cells (strings or nodes). At phone width each row is
 * stacked into a card (styles.css), every cell under its column's name (a label hidden from
 * assistive technology, which has the header), so no column hides past the screen's edge. The
 * roles are explicit because a table laid out as blocks loses them in some browsers.
 */
export function table(caption, headers, rows, empty = "Nothing yet.") {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "table-wrap", role: "region", "aria-label": caption, tabindex: "0" },
    h(
      "table",
      { role: "table" },
      h("caption", {}, caption),
      h(
        "thead",
        { role: "rowgroup" },
        h(
          "tr",
          { role: "row" },
          headers.map((x) => h("th", { scope: "col", role: "columnheader" }, x)),
        ),
      ),
      h(
        "tbody",
        { role: "rowgroup" },
        rows.map((cells) =>
          h(
            "tr",
            { role: "row" },
            cells.map((c, i) =>
              h(
                "td",
                { role: "cell" },
                headers[i] ? h("span", { class: "cell-label", "aria-hidden": "true" }, headers[i]) : null,
                h("div", { class: "cell-value" }, c),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

/** An amount in the native token, exact, with the wei in its title for those who want them. */
export function money(wei, currency) {
  if (wei === null || wei === undefined) return h("span", { class: "muted" }, "—");
  return h(
    "span",
    { class: "money", title: `${wei} wei`, "data-wei": wei },
    `${formatUnits(wei, currency?.decimals ?? 18)} ${currency?.symbol ?? ""}`.trim(),
  );
}

export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  return h("time", { datetime: iso, title: iso }, d.toISOString().replace("T", " ").slice(0, 19));
}

/** An address or hash, shortened on screen, whole in its title and to screen readers' copy. */
export function hex(value) {
  if (!value) return h("span", { class: "muted" }, "—");
  const short = value.length > 14 ? `${value.slice(0, 8)}…${value.slice(-6)}` : value;
  return h("code", { class: "hex", title: value, "data-value": value }, short);
}

/**
 * A "Rename" button that becomes a one-field form in its place: Save sends the new name (an
 * empty field removes it) through `save(name)`, Cancel or Escape puts the button back. Names are
 * shown back as text only.
 */
export function renameControl(what, current, save) {
  const wrap = h("span", { class: "rename" });
  const button = h(
    "button",
    { type: "button", class: "secondary small", "aria-label": `Rename ${what}` },
    "Rename",
  );
  const restore = () => {
    wrap.replaceChildren(button);
    button.focus();
  };
  button.addEventListener("click", () => {
    const errors = errorBox();
    const input = h("input", {
      type: "text",
      value: current ?? "",
      maxlength: 128,
      autocomplete: "off",
      "aria-label": `New name of ${what}`,
    });
    const ok = h("button", { type: "submit", class: "primary small" }, "Save");
    const cancel = h("button", { type: "button", class: "secondary small", onclick: restore }, "Cancel");
    const edit = h("form", { class: "rename-form" }, input, ok, cancel, errors.el);
    edit.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (ok.disabled) return;
      errors.clear();
      ok.disabled = true;
      try {
        await save(input.value.trim() === "" ? null : input.value.trim());
      } catch (err) {
        errors.show(err);
        ok.disabled = false;
      }
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Escape") restore();
    });
    wrap.replaceChildren(edit);
    input.focus();
  });
  wrap.append(button);
  return wrap;
}

/** A record's name, or a muted dash when it has none. */
export function nameOf(name) {
  return name ? h("span", { class: "name" }, name) : h("span", { class: "muted" }, "—");
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${kind}` }, text);
}

/** Copies text; tells the user (and assistive technology) it did. */
export async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without clipboard permission (some browsers over plain http), select it for a manual copy.
    const temp = h("textarea", { class: "visually-hidden", readonly: true }, text);
    document.body.append(temp);
    temp.select();
    document.execCommand("copy");
    temp.remove();
  }
  if (button) {
    const label = button.textContent;
    button.textContent = "Copied";
    button.dataset.copied = "true";
    setTimeout(() => {
      button.textContent = label;
    }, 2000);
  }
  announce("Copied to the clipboard");
}

export function copyButton(text, label = "Copy") {
  const button = h("button", { type: "button", class: "secondary small" }, label);
  button.addEventListener("click", () => copy(text, button));
  return button;
}

let toastTimer = 0;

/** Polite announcements for screen readers (and a visible toast for a few seconds). */
export function announce(message) {
  const region = document.getElementById("status");
  if (!region) return;
  region.textContent = "";
  clearTimeout(toastTimer);
  // A fresh text node, a tick later: screen readers announce a change, not a repeat.
  setTimeout(() => {
    region.textContent = message;
    toastTimer = setTimeout(() => {
      region.textContent = "";
    }, 4000);
  }, 30);
}

/** A modal confirmation (native <dialog>: focus is trapped and Escape cancels). */
export function confirmDialog(title, message, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const titleId = uid("dlg");
    const yes = h("button", { type: "button", class: "danger", value: "yes" }, confirmLabel);
    const no = h("button", { type: "button", class: "secondary", value: "no" }, "Cancel");
    const dialog = h(
      "dialog",
      { "aria-labelledby": titleId, class: "confirm" },
      h("h2", { id: titleId }, title),
      h("p", {}, message),
      h("div", { class: "actions" }, no, yes),
    );
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    yes.addEventListener("click", () => done(true));
    no.addEventListener("click", () => done(false));
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}

/** A section with a heading. */
export function section(title, ...children) {
  const id = uid("sec");
  return h("section", { class: "card", "aria-labelledby": id }, h("h2", { id }, title), children);
}

/** Key-value pairs as a description list. */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))),
  );
}

/** YYYY-MM-DD naming a real day (not 2026-02-30): the date filters of events and refusals. */
export function isDay(text) {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  const d = new Date(`${text}T00:00:00.000Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === text;
}

/** The start of the UTC day after `day` (YYYY-MM-DD), as the API's exclusive `to`. */
export function nextDay(day) {
  const d = new Date(`${day}T00:00:00.000Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString();
}
