/**
 * The chain switcher (issue 23: one gas tank per project and chain), in headless Chromium against
 * the real service with two chains served and no node behind either: Sonic Testnet (14601, the
 * home chain, S with 18 decimals) and a local chain (31337, LOC with 6 decimals, so that an amount
 * formatted with the wrong chain's decimals is visibly wrong). Money goes into each tank and out
 * of it through the ledger's own functions, as the watchers move it. A project's pages about money
 * offer a "Chain" select, start on the home chain, keep the choice in the address, ask the API for
 * the chosen chain and show its amounts in its currency.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { recordChainDeposit } from "../src/funding/store.ts";
import { billOperation, creditDeposit, reserve } from "../src/ledger/ledger.ts";
import {
  allowMintOnEveryChain,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  OTHER_CHAIN,
  OTHER_PAYMASTER,
  startTestApp,
  TEST_PAYMASTER,
  type TestApp,
  twoChainsEnv,
} from "./support/app.ts";
import { assertNoAxeViolations, LAPTOP_WIDTH, PHONE_WIDTH } from "./support/axe.ts";
import { type Browser, CHROMIUM, launchBrowser, openPage, screenshot, signIn } from "./support/dashboard.ts";

const HOME = 14601;
const OTHER = OTHER_CHAIN;
const PAYMASTERS: Record<number, string> = { [HOME]: TEST_PAYMASTER, [OTHER]: OTHER_PAYMASTER };
const STUDIO = "chains-studio@example.com";
const PROJECT_ID = "two-chains";
const ONE_S = 10n ** 18n;
const ONE_LOC = 10n ** 6n;

let t: TestApp;
let b: Browser;
let page: Page;
let baseUrl = "";

const randomHash = () => `0x${randomBytes(32).toString("hex")}`;

/** Reserves `maxGasCostWei` on `chainId`'s tank for a mint, as an authorization does; returns its id. */
async function reserveOn(chainId: number, maxGasCostWei: bigint): Promise<string> {
  const authId = randomHash();
  const nowSec = Math.floor(Date.now() / 1000);
  const outcome = await reserve(t.db, {
    projectId: PROJECT_ID,
    clientNonce: null,
    requestDigest: null,
    authId,
    apiKeyId: null,
    chainId,
    sender: `0x${randomBytes(20).toString("hex")}`,
    target: MINT_TARGET,
    selector: MINT_SELECTOR,
    estimatedGas: 100_000n,
    maxGasCostWei,
    maxFeePerGasWei: 2_000_000_000n,
    maxPriorityFeePerGasWei: 1_000_000_000n,
    paymaster: PAYMASTERS[chainId]!,
    validAfterSec: nowSec - 60,
    validUntilSec: nowSec + 3600,
    response: null,
    requestedAtMs: Date.now(),
  });
  assert.equal(outcome.kind, "reserved", JSON.stringify(outcome));
  return authId;
}

/** An operation on `chainId` that cost `costWei`, reserved and then settled as the watcher bills it. */
async function settleOn(chainId: number, costWei: bigint): Promise<void> {
  const authId = await reserveOn(chainId, costWei);
  const billed = await t.db.transaction((tx) =>
    billOperation(tx, {
      authId,
      chainId,
      paymaster: PAYMASTERS[chainId]!,
      outcome: "success",
      actualGasUsed: 21_000n,
      actualGasCostWei: costWei,
      txHash: randomHash(),
      userOpHash: randomHash(),
    }),
  );
  assert.equal(billed.kind, "charged", billed.kind === "unbilled" ? billed.reason : undefined);
}

/** Records and credits a transfer to the project's deposit address on `chainId`, as the deposit watcher does. */
async function depositOn(chainId: number, token: string, amountWei: bigint): Promise<void> {
  const account = await t.request({
    method: "GET",
    url: `/projects/${PROJECT_ID}/funding-accounts/${chainId}`,
    token,
  });
  assert.equal(account.statusCode, 200, account.body);
  await t.db.transaction(async (tx) => {
    const recorded = await recordChainDeposit(tx, {
      chainId,
      txHash: randomHash(),
      position: "0",
      blockNumber: 1_000n,
      blockHash: randomHash(),
      projectId: PROJECT_ID,
      address: (account.json() as { address: string }).address,
      amountWei,
    });
    assert.equal(recorded.kind, "new");
    if (recorded.kind !== "new") return;
    await creditDeposit(
      t.db,
      { projectId: PROJECT_ID, chainId, reference: recorded.reference, amountWei },
      tx,
    );
  });
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  t = await startTestApp({
    // Six decimals: an amount formatted with the other chain's decimals is visibly wrong.
    env: twoChainsEnv({ CHAIN_31337_CURRENCY_DECIMALS: "6" }),
  });
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  // Home tank: 4 S in, 1 S spent, 0.5 S held by a pending authorization: 2.5 S left.
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 4n * ONE_S, {
    email: STUDIO,
    projectId: PROJECT_ID,
  });
  await allowMintOnEveryChain(t, p);
  await settleOn(HOME, ONE_S);
  await reserveOn(HOME, ONE_S / 2n);
  // The local tank: 7.25 LOC in (a transfer to its deposit address there), 1.5 LOC spent,
  // 0.75 LOC held: 5 LOC left.
  await depositOn(OTHER, p.ownerToken, 7_250_000n);
  await settleOn(OTHER, (3n * ONE_LOC) / 2n);
  await reserveOn(OTHER, (3n * ONE_LOC) / 4n);
  b = await launchBrowser(baseUrl);
  page = b.page;
  // A page that never shows what a test waits for fails the test in seconds, not at the runner's limit.
  page.setDefaultTimeout(10_000);
  await page.setViewportSize(LAPTOP_WIDTH);
  await signIn(page, baseUrl, p.ownerToken);
});

after(async () => {
  const errors = [...(b?.errors ?? [])];
  // Closed before asserting, so that a failure still ends the process.
  await b?.close();
  await t?.close();
  assert.deepEqual(errors, [], "no console or page error");
});

const switcher = () => page.getByLabel("Chain", { exact: true });
const tankBalance = () => page.locator("#tank-balance .money");
/** The requests made since `mark` (an index into the browser's request log) whose URL contains `part`. */
const requestedSince = (mark: number, part: string) => b.urls.slice(mark).filter((u) => u.includes(part));

describe("the chain switcher with two chains served", () => {
  test("the funding page lists both chains, starts on the home chain and shows its tank in S", async () => {
    const mark = b.urls.length;
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}/funding`, /Funding/);
    assert.deepEqual(await switcher().locator("option").allTextContents(), [
      "Sonic Testnet (14601)",
      "Local (31337)",
    ]);
    assert.equal(await switcher().inputValue(), String(HOME));
    await tankBalance().waitFor();
    assert.equal(await tankBalance().textContent(), "2.5 S");
    assert.ok(requestedSince(mark, `/projects/${PROJECT_ID}/balance?chainId=${HOME}`).length > 0);
    const fact = (term: string) =>
      page.locator("[data-money] dl div", { has: page.locator("dt", { hasText: term }) }).locator(".money");
    assert.equal(await fact("Spent in total").textContent(), "1 S");
    assert.equal(await fact("Reserved by open authorizations").textContent(), "0.5 S");
    await assertNoAxeViolations(page, "the Funding page with the chain switcher at laptop width");
  });

  test("choosing the other chain shows its tank in LOC, keeps ?chain= in the address and survives a reload", async () => {
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}/funding`, /Funding/);
    const mark = b.urls.length;
    await switcher().focus();
    await switcher().selectOption(String(OTHER));
    await page.locator("#tank-balance .money", { hasText: "LOC" }).waitFor();
    assert.equal(await tankBalance().textContent(), "5 LOC");
    assert.match(new URL(page.url()).hash, new RegExp(`[?&]chain=${OTHER}(&|$)`));
    assert.ok(requestedSince(mark, `/projects/${PROJECT_ID}/balance?chainId=${OTHER}`).length > 0);
    assert.ok(requestedSince(mark, `/projects/${PROJECT_ID}/analytics/money?chainId=${OTHER}`).length > 0);
    // The chooser keeps the focus, as choosing from any list would.
    assert.equal(await page.evaluate(() => document.activeElement?.id), "chain-switcher");
    const fact = (term: string) =>
      page.locator("[data-money] dl div", { has: page.locator("dt", { hasText: term }) }).locator(".money");
    assert.equal(await fact("Spent in total").textContent(), "1.5 LOC");
    assert.equal(await fact("Reserved by open authorizations").textContent(), "0.75 LOC");
    // The local chain's deposit is listed in its own currency, whichever chain is chosen.
    const deposits = page.getByRole("table", { name: /Deposits credited to the gas tank/ });
    assert.deepEqual(await deposits.locator(".money").allTextContents(), ["7.25 LOC", "4 S"]);
    // The tabs about money carry the choice; the others do not need it.
    const tab = (name: string) =>
      page.getByRole("navigation", { name: "Project sections" }).getByRole("link", { name });
    assert.match((await tab("Events").getAttribute("href")) ?? "", new RegExp(`\\?chain=${OTHER}$`));
    assert.doesNotMatch((await tab("API keys").getAttribute("href")) ?? "", /chain=/);
    await screenshot(page, "chains-01-funding-other-chain");
    await page.setViewportSize(PHONE_WIDTH);
    await assertNoAxeViolations(page, "the Funding page on the other chain at phone width");
    await page.setViewportSize(LAPTOP_WIDTH);

    await page.reload();
    await page.locator("#tank-balance .money", { hasText: "LOC" }).waitFor();
    assert.equal(await switcher().inputValue(), String(OTHER));
    assert.equal(await tankBalance().textContent(), "5 LOC");
  });

  test("the events page asks for the chosen chain and shows its events in its currency, with no chain column", async () => {
    let mark = b.urls.length;
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}/events?chain=${OTHER}`, /Events/);
    const table = page.getByRole("table", { name: /Sponsorship events/ });
    await table.waitFor();
    const asked = requestedSince(mark, `/projects/${PROJECT_ID}/analytics/events?`);
    assert.ok(asked.length > 0);
    assert.ok(
      asked.every((u) => new URL(u).searchParams.get("chainId") === String(OTHER)),
      asked.join("\n"),
    );
    assert.deepEqual((await table.locator("td .money").allTextContents()).sort(), ["0.75 LOC", "1.5 LOC"]);
    assert.equal(await table.getByRole("columnheader", { name: "Chain", exact: true }).count(), 0);
    // A filter applied on this chain stays on it.
    await page.getByLabel("Status").selectOption("success");
    await page.getByRole("button", { name: "Apply" }).click();
    await page.waitForURL(/status=success/);
    assert.match(new URL(page.url()).hash, new RegExp(`chain=${OTHER}`));
    // The address changes before the page has drawn the answer: the pager says when it has.
    await page.getByText("Page 1 of 1 · 1 event(s)").waitFor();
    assert.deepEqual(await table.locator("td .money").allTextContents(), ["1.5 LOC"]);

    mark = b.urls.length;
    await switcher().selectOption(String(HOME));
    await page.locator("table td .money", { hasText: " S" }).first().waitFor();
    assert.ok(
      requestedSince(mark, `/projects/${PROJECT_ID}/analytics/events?`).some(
        (u) => new URL(u).searchParams.get("chainId") === String(HOME),
      ),
    );
    assert.deepEqual(await table.locator("td .money").allTextContents(), ["1 S"]);
    await assertNoAxeViolations(page, "the Events page with the chain switcher");
  });

  test("the overview and analytics ask for the chosen chain and show its figures in its currency", async () => {
    let mark = b.urls.length;
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}?chain=${OTHER}`, /Overview/);
    const fact = (term: string) =>
      page.locator("dl div", { has: page.locator("dt", { hasText: term }) }).locator(".money");
    assert.equal(await fact("Gas tank").textContent(), "5 LOC");
    assert.ok(requestedSince(mark, `/projects/${PROJECT_ID}/balance?chainId=${OTHER}`).length > 0);

    mark = b.urls.length;
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}/analytics?chain=${OTHER}`, /Analytics/);
    for (const view of ["overview", "daily", "senders", "events"]) {
      const asked = requestedSince(mark, `/projects/${PROJECT_ID}/analytics/${view}`);
      assert.ok(asked.length > 0, view);
      for (const u of asked) assert.equal(new URL(u).searchParams.get("chainId"), String(OTHER), u);
    }
    assert.equal(await fact("Gas cost paid").textContent(), "1.5 LOC");
    await assertNoAxeViolations(page, "the Analytics page with the chain switcher");
  });

  test("a chain the address names that is not served falls back to the home chain, and says so", async () => {
    await openPage(page, baseUrl, `#/projects/${PROJECT_ID}/funding?chain=5`, /Funding/);
    await page.getByText("Chain 5 is not served here").waitFor();
    assert.equal(await switcher().inputValue(), String(HOME));
    await tankBalance().waitFor();
    assert.equal(await tankBalance().textContent(), "2.5 S");
  });
});

describe("chains.js: the choice a switcher offers", () => {
  interface Chains {
    chainChoice(
      chains: unknown[],
      homeChainId: number,
      requested: string | null,
    ): {
      offered: { chainId: number; label: string }[];
      selected: { chainId: number };
      unknown: string | null;
    };
    withChainId(path: string, chainId: number | null): string;
  }
  const chains = [
    { chainId: HOME, name: "Sonic Testnet", nativeCurrency: { symbol: "S", decimals: 18 } },
    { chainId: OTHER, name: "Local", nativeCurrency: { symbol: "LOC", decimals: 6 } },
  ];
  const load = async () =>
    (await import(new URL("../src/dashboard/public/chains.js", import.meta.url).href)) as Chains;

  test("the home chain by default and for a chain not served; a home chain no longer served is still offered", async () => {
    const { chainChoice } = await load();
    assert.equal(chainChoice(chains, OTHER, null).selected.chainId, OTHER);
    assert.equal(chainChoice(chains, HOME, String(OTHER)).selected.chainId, OTHER);
    const unknown = chainChoice(chains, HOME, "5");
    assert.deepEqual([unknown.selected.chainId, unknown.unknown], [HOME, "5"]);
    const gone = chainChoice(chains.slice(1), HOME, null);
    assert.deepEqual(
      gone.offered.map((c) => c.chainId),
      [HOME, OTHER],
    );
    assert.equal(gone.selected.chainId, HOME);
  });

  test("no chain chosen leaves a request as it was; a chosen one is added to its query", async () => {
    const { withChainId } = await load();
    assert.equal(withChainId("/projects/p/balance", null), "/projects/p/balance");
    assert.equal(withChainId("/projects/p/balance", OTHER), `/projects/p/balance?chainId=${OTHER}`);
    assert.equal(withChainId("/a?limit=1", OTHER), `/a?limit=1&chainId=${OTHER}`);
  });
});
