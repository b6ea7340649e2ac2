// Funding: the deposit address per chain (with a QR code for a wallet to scan), the gas tank's
// balance, and what each address has credited. Deposits are credited by the service's watcher at
// the chain's confirmation depth; the page re-reads the balance every few seconds.
import { get, seg } from "./api.js";
import { qrCode } from "./qr.js";
import { copyButton, facts, h, money, section, table, time } from "./ui.js";

const REFRESH_MS = 3000;

export async function render(ctx) {
  const id = ctx.projectId;
  // Reading an account provisions it: every active chain gets its address on first visit.
  const accounts = await Promise.all(
    ctx.settings.chains.map((c) => get(`/projects/${seg(id)}/funding-accounts/${c.chainId}`)),
  );
  const balance = await get(`/projects/${seg(id)}/balance`);
  const balanceSlot = h("span", { id: "tank-balance" }, money(balance.balance, ctx.currency));
  const creditedSlots = new Map();
  // The table's cells are refreshed with the cards' (both show what each address has credited).
  const tableSlots = new Map();
  const cards = accounts.map((a) => {
    const chain = ctx.settings.chains.find((c) => c.chainId === a.chain_id);
    // EIP-681: wallets that scan it open a transfer to this address on this chain.
    const uri = `ethereum:${a.address}@${a.chain_id}`;
    const credited = h("span", { "data-credited": a.chain_id }, money(a.total_credited, ctx.currency));
    creditedSlots.set(a.chain_id, credited);
    tableSlots.set(a.chain_id, h("span", {}, money(a.total_credited, ctx.currency)));
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
      const [b, list] = await Promise.all([
        get(`/projects/${seg(id)}/balance`),
        get(`/projects/${seg(id)}/funding-accounts`),
      ]);
      balanceSlot.replaceChildren(money(b.balance, ctx.currency));
      for (const a of list) {
        creditedSlots.get(a.chain_id)?.replaceChildren(money(a.total_credited, ctx.currency));
        tableSlots.get(a.chain_id)?.replaceChildren(money(a.total_credited, ctx.currency));
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
      "Gas tank",
      h("p", { class: "big", "aria-live": "polite" }, "Balance: ", balanceSlot),
      h(
        "p",
        { class: "muted" },
        `Deposits are credited once they have the chain's confirmations; this page re-reads every ${REFRESH_MS / 1000} s.`,
      ),
    ),
    cards,
    section(
      "Deposits",
      table(
        "Deposits credited per chain",
        ["Chain", "Address", "Credited"],
        accounts.map((a) => [String(a.chain_id), h("code", {}, a.address), tableSlots.get(a.chain_id)]),
      ),
    ),
  );
}
