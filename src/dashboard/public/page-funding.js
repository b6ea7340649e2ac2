// Funding: the deposit address per chain (with a QR code for a wallet to scan), the gas tank's
// balance, and what each address has credited. Deposits are credited by the service's watcher at
// the chain's confirmation depth; the page re-reads the balance and the newest deposits every few
// seconds. The deposit history pages by the API's cursor ("Show older deposits"). With several
// chains served, the tank and its money view are the chosen chain's (ctx.chainId); the deposit
// addresses and the history list every chain, each amount in its own chain's currency.
import { get, seg } from "./api.js";
import { qrCode } from "./qr.js";
import { badge, copyButton, facts, h, hex, money, section, table, time } from "./ui.js";

const REFRESH_MS = 3000;
const PAGE_SIZE = 25;

export async function render(ctx) {
  const id = ctx.projectId;
  // Reading an account provisions it: every active chain gets its address on first visit.
  const accounts = await Promise.all(
    ctx.settings.chains.map((c) => get(`/projects/${seg(id)}/funding-accounts/${c.chainId}`)),
  );
  const [balance, firstPage, figures] = await Promise.all([
    get(ctx.forChain(`/projects/${seg(id)}/balance`)),
    get(`/projects/${seg(id)}/deposits?limit=${PAGE_SIZE}`),
    get(ctx.forChain(`/projects/${seg(id)}/analytics/money`)),
  ]);
  const moneySlot = h("div", { "data-money": "" }, moneyFacts(figures, ctx.currency));
  const history = depositHistory(ctx, firstPage);
  const balanceSlot = h("span", { id: "tank-balance" }, money(balance.balance, ctx.currency));
  const creditedSlots = new Map();
  // The table's cells are refreshed with the cards' (both show what each address has credited).
  const tableSlots = new Map();
  const cards = accounts.map((a) => {
    const chain = ctx.settings.chains.find((c) => c.chainId === a.chain_id);
    // EIP-681: wallets that scan it open a transfer to this address on this chain.
    const uri = `ethereum:${a.address}@${a.chain_id}`;
    const credited = h(
      "span",
      { "data-credited": a.chain_id },
      money(a.total_credited, ctx.currencyOf(a.chain_id)),
    );
    creditedSlots.set(a.chain_id, credited);
    tableSlots.set(a.chain_id, h("span", {}, money(a.total_credited, ctx.currencyOf(a.chain_id))));
    return section(
      `Deposit address on ${chain?.name ?? `chain ${a.chain_id}`}`,
      h(
        "div",
        { class: "funding" },
        qrCode(uri, `QR code of the deposit address ${a.address}`),
        h(
          "div",
          {},
          h(
            "p",
            {},
            `Send ${chain?.nativeCurrency.symbol ?? "the native token"} to this address to fund the gas tank:`,
          ),
          h(
            "div",
            { class: "copy-row" },
            h("code", { class: "address", "data-address": a.address }, a.address),
            copyButton(a.address, "Copy address"),
          ),
          facts([
            ["Chain id", String(a.chain_id)],
            ["Credited so far", credited],
            ["Provisioned", time(a.created_at)],
          ]),
        ),
      ),
    );
  });
  const timer = setInterval(async () => {
    try {
      const [b, list, newest, m] = await Promise.all([
        get(ctx.forChain(`/projects/${seg(id)}/balance`)),
        get(`/projects/${seg(id)}/funding-accounts`),
        get(`/projects/${seg(id)}/deposits?limit=${PAGE_SIZE}`),
        get(ctx.forChain(`/projects/${seg(id)}/analytics/money`)),
      ]);
      history.refresh(newest);
      if (JSON.stringify(m) !== JSON.stringify(figures)) {
        Object.assign(figures, m);
        moneySlot.replaceChildren(moneyFacts(m, ctx.currency));
      }
      balanceSlot.replaceChildren(money(b.balance, ctx.currency));
      for (const a of list) {
        creditedSlots.get(a.chain_id)?.replaceChildren(money(a.total_credited, ctx.currencyOf(a.chain_id)));
        tableSlots.get(a.chain_id)?.replaceChildren(money(a.total_credited, ctx.currencyOf(a.chain_id)));
      }
    } catch {
      // A failed background refresh is retried at the next tick; actions show their own errors.
    }
  }, REFRESH_MS);
  ctx.onCleanup(() => clearInterval(timer));
  return h(
    "div",
    {},
    section(
      ctx.chainId === null ? "Gas tank" : `Gas tank on ${chainName(ctx)}`,
      h("p", { class: "big", "aria-live": "polite" }, "Balance: ", balanceSlot),
      moneySlot,
      h(
        "p",
        { class: "muted" },
        `Deposits are credited once they have the chain's confirmations; this page re-reads every ${REFRESH_MS / 1000} s.`,
      ),
    ),
    cards,
    section("Deposits", history.el),
    section(
      "Credited per chain",
      table(
        "Deposits credited per chain",
        ["Chain", "Address", "Credited"],
        accounts.map((a) => [String(a.chain_id), h("code", {}, a.address), tableSlots.get(a.chain_id)]),
      ),
    ),
  );
}

/**
 * Every credited deposit, newest first: chain, transaction, block, amount and when it was
 * credited. A deposit a reorganisation took back stays listed, marked reversed with what was
 * taken back. Older pages are appended by cursor; a refresh puts newer deposits on top and
 * updates the status of those already shown.
 */
function depositHistory(ctx, firstPage) {
  const shown = new Map();
  let nextCursor = firstPage.nextCursor;
  const slot = h("div", { "data-deposits": "" });
  const older = h("button", { type: "button", class: "secondary" }, "Show older deposits");
  const more = h("p", { class: "actions" }, older);
  const draw = () => {
    const rows = [...shown.values()].sort((a, b) => b.id - a.id);
    slot.replaceChildren(
      table(
        "Deposits credited to the gas tank, newest first",
        ["Credited", "Chain", "Transaction", "Block", "Amount", "Status"],
        rows.map((d) => {
          // Every credit names the tank it went to, a credit made by hand too.
          const currency = ctx.currencyOf(d.chain_id);
          return [
            time(d.credited_at),
            String(d.chain_id),
            hex(d.tx_hash),
            d.block_number === null ? h("span", { class: "muted" }, "—") : String(d.block_number),
            money(d.amount, currency),
            d.status === "reversed"
              ? h("span", {}, badge("reversed"), " ", money(d.reversed_amount, currency), " taken back")
              : badge("credited", "success"),
          ];
        }),
        "No deposits yet: send the native token to a deposit address above.",
      ),
    );
    // Taken out of the page rather than hidden: its flex layout would override `hidden`.
    more.replaceChildren(...(nextCursor ? [older] : []));
  };
  const add = (deposits) => {
    for (const d of deposits) shown.set(d.id, d);
  };
  older.addEventListener("click", async () => {
    if (!nextCursor || older.disabled) return;
    older.disabled = true;
    try {
      const res = await get(
        `/projects/${seg(ctx.projectId)}/deposits?limit=${PAGE_SIZE}&cursor=${nextCursor}`,
      );
      add(res.deposits);
      nextCursor = res.nextCursor;
      draw();
    } finally {
      older.disabled = false;
    }
  });
  add(firstPage.deposits);
  draw();
  return {
    el: h("div", {}, slot, more),
    refresh(page) {
      const before = JSON.stringify([...shown.values()]);
      const newestShown = Math.max(0, ...shown.keys());
      const oldestFetched = page.deposits.at(-1)?.id ?? 0;
      if (page.nextCursor && oldestFetched > newestShown) {
        // More arrived than a page holds: the list restarts from the newest, with no gap in it.
        shown.clear();
        nextCursor = page.nextCursor;
      }
      add(page.deposits);
      // Redrawn only on a change, so that a reader's focus or scroll in the table stays put.
      if (JSON.stringify([...shown.values()]) !== before) draw();
    },
  };
}

/** The tank in plain words: what it can spend, what is held, what went, and how long it lasts. */
function moneyFacts(m, currency) {
  const days =
    m.daysOfGasLeft === null
      ? "no spend in the last 7 days to measure by"
      : `about ${m.daysOfGasLeft.toLocaleString("en")} days at the last 7 days' average`;
  return facts([
    ["Available", money(m.available, currency)],
    ["Reserved by open authorizations", money(m.reserved, currency)],
    ["Spent today (UTC)", money(m.spentToday, currency)],
    ["Spent in the last 7 days", money(m.spentLast7Days, currency)],
    ["Average spend per day", money(m.averageDailySpend, currency)],
    ["Spent in total", money(m.spentTotal, currency)],
    ["Gas left for", h("span", { "data-days-left": m.daysOfGasLeft ?? "" }, days)],
  ]);
}

/** The chosen chain's name, as the served chains call it. */
function chainName(ctx) {
  const chain = ctx.settings.chains.find((c) => c.chainId === ctx.chainId);
  return chain ? `${chain.name} (${chain.chainId})` : `chain ${ctx.chainId}`;
}
