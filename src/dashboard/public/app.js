// The dashboard's shell: sign-in, the router (hash routes: the server serves one page), the
// navigation and the page registry. Pages are modules with a `render(ctx)` that returns nodes;
// they load on demand.
import { devSignIn, get, seg } from "./api.js";
import { claims, completeOidc, currentToken, onAuthChange, setToken, signOut, startOidc } from "./auth.js";
import { chainChoice, currencyOf, withChainId } from "./chains.js";
import { announce, errorBox, field, form, h } from "./ui.js";

/**
 * A project's pages, in tab order. Adding one is a module with `render(ctx)` and a line here.
 * `perChain`: the page shows one chain's tank and figures, chosen with the chain switcher.
 */
export const PROJECT_TABS = [
  { id: "overview", label: "Overview", load: () => import("./page-project.js"), perChain: true },
  { id: "keys", label: "API keys", load: () => import("./page-keys.js") },
  { id: "allowlist", label: "Allowlist", load: () => import("./page-allowlist.js") },
  { id: "policies", label: "Policies", load: () => import("./page-policies.js") },
  { id: "webhooks", label: "Webhooks", load: () => import("./page-webhooks.js") },
  { id: "funding", label: "Funding", load: () => import("./page-funding.js"), perChain: true },
  { id: "analytics", label: "Analytics", load: () => import("./page-analytics.js"), perChain: true },
  { id: "events", label: "Events", load: () => import("./page-events.js"), perChain: true },
  { id: "refusals", label: "Refusals", load: () => import("./page-refusals.js") },
  { id: "parity", label: "Parity", load: () => import("./page-parity.js"), exportName: "projectParity" },
];

/** Top-level routes: a pattern over the hash path, the navigation entry it belongs to, its page. */
const ROUTES = [
  { pattern: /^\/orgs$/, nav: "orgs", load: () => import("./page-orgs.js"), exportName: "orgList" },
  {
    pattern: /^\/orgs\/([^/]+)$/,
    nav: "orgs",
    load: () => import("./page-orgs.js"),
    exportName: "orgDetail",
  },
  { pattern: /^\/projects$/, nav: "projects", load: () => import("./page-projects.js") },
  { pattern: /^\/parity$/, nav: "parity", load: () => import("./page-parity.js"), exportName: "allParity" },
  {
    pattern: /^\/operators$/,
    nav: "operators",
    load: () => import("./page-parity.js"),
    exportName: "chainParity",
  },
];

const main = document.getElementById("main");
let settings = { signIn: "token", oidc: null, chains: [] };
let cleanups = [];
let renderSeq = 0;

/** The chain switcher's id: a change re-renders the page, and focus returns to the new one. */
const CHAIN_SWITCHER_ID = "chain-switcher";

function parseRoute() {
  const path = location.hash.startsWith("#/") ? location.hash.slice(1).split("?")[0] : "/orgs";
  const query = new URLSearchParams(location.hash.split("?")[1] ?? "");
  const project = /^\/projects\/([^/]+)(?:\/([a-z-]+))?$/.exec(path);
  if (project) {
    const tab = PROJECT_TABS.find((t) => t.id === (project[2] ?? "overview"));
    if (tab) return { nav: "projects", tab, params: [decodeURIComponent(project[1])], query };
  }
  for (const route of ROUTES) {
    const m = route.pattern.exec(path);
    if (m) return { ...route, params: m.slice(1).map(decodeURIComponent), query };
  }
  return null;
}

async function render() {
  const seq = ++renderSeq;
  for (const fn of cleanups) fn();
  cleanups = [];
  if (!currentToken()) return renderSignIn();
  document.getElementById("main-nav").hidden = false;
  renderUser();
  showOperatorsEntry();
  const route = parseRoute();
  if (!route) {
    location.replace("#/orgs");
    return;
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === route.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const ctx = {
    settings,
    // The first served chain's, until a page about one chain (projectFrame) chooses its own.
    currency: currencyOf(settings.chains, undefined),
    // The chain the page's figures are for: null (ask the API without a chainId) unless a switcher is shown.
    chainId: null,
    homeChainId: null,
    // What links to the page's own views carry over (`chain` when the address named one).
    linkQuery: {},
    forChain: (path) => withChainId(path, ctx.chainId),
    currencyOf: (chainId) => currencyOf(settings.chains, chainId),
    params: route.params,
    query: route.query,
    onCleanup: (fn) => cleanups.push(fn),
    // A page re-renders itself (after a change) without moving focus.
    refresh: () => render(),
    isCurrent: () => seq === renderSeq,
  };
  const errors = errorBox();
  try {
    const module = await (route.tab ?? route).load();
    const page = module[(route.tab ?? route).exportName ?? "render"];
    const content = route.tab ? await projectFrame(ctx, route.tab, page) : await page(ctx);
    if (seq !== renderSeq) return;
    const focusWasInMain = main.contains(document.activeElement) && document.activeElement !== main;
    const switcherHadFocus = document.activeElement?.id === CHAIN_SWITCHER_ID;
    main.replaceChildren(content);
    document.title = `${main.querySelector("h1")?.textContent ?? "Dashboard"} — Gas Sponsorship`;
    const switcher = document.getElementById(CHAIN_SWITCHER_ID);
    // Choosing a chain keeps the reader on the switcher, as choosing from any list would.
    if (switcherHadFocus && switcher) switcher.focus();
    else if (!focusWasInMain || !ctx.keepFocus) main.querySelector("h1")?.focus();
  } catch (err) {
    if (seq !== renderSeq) return;
    errors.show(err);
    main.replaceChildren(h("h1", { tabindex: "-1" }, "Something went wrong"), errors.el);
  }
}

/** A project's heading and tabs around one of its pages. */
async function projectFrame(ctx, tab, page) {
  const id = ctx.params[0];
  ctx.projectId = id;
  const switcher = tab.perChain ? await chooseChain(ctx) : null;
  const content = await page(ctx);
  const tabs = h(
    "nav",
    { class: "tabs", "aria-label": "Project sections" },
    h(
      "ul",
      {},
      PROJECT_TABS.map((t) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              href: tabHref(id, t, ctx.linkQuery),
              "aria-current": t === tab ? "page" : null,
            },
            t.label,
          ),
        ),
      ),
    ),
  );
  return h(
    "div",
    { class: "project" },
    h("p", { class: "crumbs" }, h("a", { href: "#/projects" }, "Projects"), " / ", h("span", {}, id)),
    h("h1", { tabindex: "-1" }, `${tab.label} — ${id}`),
    tabs,
    switcher,
    content,
  );
}

/** A tab's address; the pages about one chain keep the chain the address named. */
function tabHref(projectId, tab, linkQuery) {
  const path = `#/projects/${encodeURIComponent(projectId)}${tab.id === "overview" ? "" : `/${tab.id}`}`;
  return tab.perChain && linkQuery.chain
    ? `${path}?${new URLSearchParams({ chain: linkQuery.chain })}`
    : path;
}

/** The home chain of the project shown last: it is set when the project is made, so asked once. */
let homeChain = { projectId: null, chainId: null };

async function homeChainOf(projectId) {
  if (homeChain.projectId !== projectId) {
    const project = await get(`/projects/${seg(projectId)}`);
    homeChain = { projectId, chainId: project.home_chain_id };
  }
  return homeChain.chainId;
}

/**
 * With more than one chain served, chooses the chain a page's figures are for (the address's
 * `chain`, else the project's home chain), sets it on the page's context and returns the switcher.
 * With one chain there is nothing to choose: the page asks the API as it always has, no chainId.
 */
async function chooseChain(ctx) {
  if (settings.chains.length < 2) return null;
  const homeChainId = await homeChainOf(ctx.projectId);
  const { offered, selected, unknown } = chainChoice(settings.chains, homeChainId, ctx.query.get("chain"));
  Object.assign(ctx, {
    chainId: selected.chainId,
    homeChainId,
    currency: selected.currency,
    linkQuery: unknown === null && ctx.query.has("chain") ? { chain: String(selected.chainId) } : {},
  });
  const choose = (event) => {
    const query = new URLSearchParams(location.hash.split("?")[1] ?? "");
    query.set("chain", event.target.value);
    // A page number counts the previous chain's rows.
    query.delete("page");
    const chosen = offered.find((c) => String(c.chainId) === event.target.value);
    if (chosen) announce(`Showing ${chosen.label}`);
    location.hash = `${location.hash.split("?")[0]}?${query}`;
  };
  return h(
    "div",
    { class: "chain-switcher" },
    field(
      "Chain",
      {
        tag: "select",
        id: CHAIN_SWITCHER_ID,
        name: "chain",
        onchange: choose,
        options: offered.map((c) =>
          h("option", { value: String(c.chainId), selected: c === selected }, c.label),
        ),
      },
      `The gas tank and figures below are this chain's, in ${selected.currency.symbol || "its currency"}.`,
    ),
    unknown === null
      ? null
      : h(
          "p",
          { class: "muted", role: "status" },
          `Chain ${unknown} is not served here: showing the home chain, ${selected.label}.`,
        ),
  );
}

/** Whether the signed-in developer is an operator, asked once per token (null: not known yet). */
let operatorOf = { token: null, operator: null };

/**
 * The operators' entry is offered only to operators: the settings asked with the developer's
 * token say whether they are one. Until the answer comes, and if it fails, the entry stays hidden
 * (an operator can still open #/operators; the API decides who is served there).
 */
function showOperatorsEntry() {
  const entry = document.getElementById("nav-operators");
  const token = currentToken();
  if (operatorOf.token === token) {
    entry.hidden = operatorOf.operator !== true;
    return;
  }
  entry.hidden = true;
  operatorOf = { token, operator: null };
  get("/dashboard/settings.json")
    .then((personal) => {
      if (operatorOf.token !== token) return;
      operatorOf.operator = personal?.operator === true;
      entry.hidden = !operatorOf.operator;
    })
    .catch(() => {
      // Unknown: hidden, and asked again on the next page.
      if (operatorOf.token === token) operatorOf = { token: null, operator: null };
    });
}

function renderUser() {
  const email = claims().email ?? "signed in";
  document
    .getElementById("user")
    .replaceChildren(
      h("span", { class: "who", title: email }, email),
      h("button", { type: "button", class: "secondary small", onclick: () => signOut(null) }, "Sign out"),
    );
}

function renderSignIn(reason) {
  document.getElementById("main-nav").hidden = true;
  document.getElementById("nav-operators").hidden = true;
  document.getElementById("user").replaceChildren();
  const notice = errorBox();
  if (reason) notice.show(new Error(reason));
  const parts = [h("h1", { tabindex: "-1" }, "Sign in"), notice.el];
  if (settings.signIn === "oidc") {
    const errors = errorBox();
    parts.push(
      h("p", {}, "Sign in with your organization's identity provider."),
      h(
        "button",
        {
          type: "button",
          class: "primary",
          onclick: () => startOidc(settings.oidc).catch((err) => errors.show(err)),
        },
        "Sign in with the identity provider",
      ),
      errors.el,
    );
  }
  if (settings.signIn === "dev") {
    parts.push(
      h(
        "p",
        {},
        "Development sign-in: this service has no identity provider, so its local issuer signs a one-hour token " +
          "for the address you type (the same token `npm run token` prints). Production refuses this mode.",
      ),
      form(
        { class: "stack", "aria-label": "Development sign-in" },
        [field("Email", { name: "email", type: "email", required: true, autocomplete: "email" })],
        "Sign in",
        async ({ email }) => {
          await devSignIn(email);
          announce(`Signed in as ${email}`);
          render();
        },
      ),
    );
  }
  parts.push(
    h(
      "details",
      { class: "token-signin", open: settings.signIn === "token" ? true : null },
      h("summary", {}, "Use a token you already have"),
      form(
        { class: "stack", "aria-label": "Sign in with a token" },
        [field("Developer token", { name: "token", type: "password", required: true, autocomplete: "off" })],
        "Use this token",
        async ({ token }) => {
          setToken(token.trim());
          try {
            await get("/orgs");
          } catch (err) {
            setToken(null);
            throw err;
          }
          render();
        },
      ),
    ),
  );
  main.replaceChildren(h("div", { class: "signin card" }, parts));
  main.querySelector("h1").focus();
}

async function start() {
  document.getElementById("skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    (main.querySelector("h1") ?? main).focus();
  });
  try {
    const res = await fetch("/dashboard/settings.json", { credentials: "omit" });
    settings = await res.json();
  } catch {
    // Settings unreachable: the token sign-in still works.
  }
  onAuthChange((reason) => {
    if (reason === null) location.hash = "#/orgs";
    renderSignIn(reason ?? undefined);
  });
  window.addEventListener("hashchange", () => {
    if (location.hash.startsWith("#/")) render();
  });
  try {
    if (await completeOidc(settings.oidc)) announce("Signed in");
  } catch (err) {
    renderSignIn(err.message);
    return;
  }
  render();
}

start();
