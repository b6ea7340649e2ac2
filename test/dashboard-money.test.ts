/**
 * What a studio sees of its money (issue 24), in headless Chromium against the real service (on
 * the run's store, no chain: deposits are recorded and credited through the ledger as the deposit
 * watcher does, spend is reserved and settled through it too). The Funding page tells the tank in
 * plain words and lists the deposit history; each check runs at a laptop's width and a phone's,
 * and axe finds no violation on what it shows.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { fundedProject, seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { assertNoAxeViolations, LAPTOP_WIDTH, PHONE_WIDTH } from "./support/axe.ts";
import { type Browser, CHROMIUM, launchBrowser, openPage, screenshot, signIn } from "./support/dashboard.ts";
import { heldDay } from "./support/held-day.ts";
import { MONEY_SELECTOR, MONEY_TARGET, reserveMint, spend, watchedDeposit } from "./support/money.ts";

const STUDIO = "money-studio@example.com";
const PROJECT_ID = "money-view";
const EMPTY_ID = "money-empty";
const WIDTHS = [
  ["laptop", LAPTOP_WIDTH],
  ["phone", PHONE_WIDTH],
] as const;
const ONE_S = 10n ** 18n;

let t: TestApp;
let b: Browser;
let page: Page;
let baseUrl = "";
let project: Awaited<ReturnType<typeof fundedProject>>;
const deposits: { txHash: string; block: bigint; amount: bigint }[] = [];
// Today is the day the 3 S were spent on, for the service and the browser alike.
const clock = heldDay();

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  t = await startTestApp({ now: clock.now });
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  project = await fundedProject(t, { target: MONEY_TARGET, selector: MONEY_SELECTOR }, 0n, {
    email: STUDIO,
    projectId: PROJECT_ID,
  });
  // 26 deposits: one more than the page shows before "Show older deposits". The newest is
  // 12.345678901234567891 S, a figure a float would round.
  for (let i = 0; i < 26; i++) {
    const amount = i === 25 ? 12_345_678_901_234_567_891n : ONE_S + BigInt(i);
    const block = 1_000n + BigInt(i);
    const { txHash } = await watchedDeposit(t.db, project, amount, block);
    deposits.unshift({ txHash, block, amount });
  }
  // 7 S spent over the last 7 days (1 S a day on average), 2 S before them, 0.5 S reserved.
  await spend(t.db, PROJECT_ID, 3n * ONE_S, 0);
  const [today] = await t.db.query<{ ms: string }>(
    "SELECT (extract(epoch FROM max(settled_at)) * 1000)::bigint::text AS ms FROM sponsorships WHERE project_id = $1",
    [PROJECT_ID],
  );
  clock.hold(Number(today!.ms));
  await spend(t.db, PROJECT_ID, 4n * ONE_S, 3);
  await spend(t.db, PROJECT_ID, 2n * ONE_S, 10);
  await reserveMint(t.db, PROJECT_ID, ONE_S / 2n);
  await seedProject(t, { email: STUDIO, projectId: EMPTY_ID });
  b = await launchBrowser(baseUrl);
  page = b.page;
  await page.clock.setFixedTime(clock.at);
  await signIn(page, baseUrl, project.ownerToken);
});

after(async () => {
  assert.deepEqual(b?.errors ?? [], [], "no console or page error");
  await b?.close();
  await t?.close();
});

const open = (hash: string, title: RegExp) => openPage(page, baseUrl, hash, title);

/** The text of the description-list value whose term is `term`, inside the money facts. */
const fact = (term: string) =>
  page.locator("[data-money] dl div", { has: page.locator("dt", { hasText: term }) }).locator("dd");

describe("the money view and the deposit history in a browser", () => {
  for (const [name, size] of WIDTHS) {
    test(`the Funding page tells available, reserved, spent and days of gas left, exactly (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/funding`, /Funding/);
      const m = (
        await t.request({
          method: "GET",
          url: `/projects/${PROJECT_ID}/analytics/money`,
          token: project.ownerToken,
        })
      ).json();
      await page.locator("[data-money]").waitFor();
      assert.equal(await fact("Available").locator(".money").getAttribute("data-wei"), m.available);
      assert.equal(await fact("Reserved by open authorizations").locator(".money").textContent(), "0.5 S");
      assert.equal(await fact("Spent today").locator(".money").textContent(), "3 S");
      assert.equal(await fact("Spent in the last 7 days").locator(".money").textContent(), "7 S");
      assert.equal(await fact("Average spend per day").locator(".money").textContent(), "1 S");
      assert.equal(await fact("Spent in total").locator(".money").textContent(), "9 S");
      const days = await fact("Gas left for").textContent();
      assert.match(days ?? "", new RegExp(`about ${m.daysOfGasLeft.toLocaleString("en")} days`));
      assert.ok(m.daysOfGasLeft > 0);
      await screenshot(page, `money-01-funding-${name}`);
      await assertNoAxeViolations(page, `the Funding page at ${name} width`);
    });

    test(`the deposit history lists each deposit newest first with transaction, block and exact amount, older ones a click away (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/funding`, /Funding/);
      const table = page.getByRole("table", { name: /Deposits credited to the gas tank/ });
      await table.waitFor();
      const rows = table.locator("tbody tr");
      assert.equal(await rows.count(), 25);
      const first = rows.first();
      assert.equal(await first.locator("code.hex").getAttribute("data-value"), deposits[0]!.txHash);
      assert.match((await first.textContent()) ?? "", /1025/);
      assert.equal(await first.locator(".money").textContent(), "12.345678901234567891 S");
      assert.equal(await first.locator(".money").getAttribute("data-wei"), "12345678901234567891");
      await page.getByRole("button", { name: "Show older deposits" }).click();
      await rows.nth(25).waitFor();
      assert.equal(await rows.count(), 26);
      assert.equal(await rows.nth(25).locator("code.hex").getAttribute("data-value"), deposits[25]!.txHash);
      assert.equal(await page.getByRole("button", { name: "Show older deposits" }).isVisible(), false);
      await assertNoAxeViolations(page, `the deposit history at ${name} width`);
    });
  }

  test("a deposit credited while the page is open appears on top without a reload", async () => {
    await page.setViewportSize(LAPTOP_WIDTH);
    await open(`#/projects/${PROJECT_ID}/funding`, /Funding/);
    const table = page.getByRole("table", { name: /Deposits credited to the gas tank/ });
    await table.waitFor();
    const { txHash } = await watchedDeposit(t.db, project, 7n, 2_000n);
    await table.locator(`tbody tr:first-child code.hex[data-value="${txHash}"]`).waitFor({ timeout: 10_000 });
    assert.equal(await table.locator("tbody tr").first().locator(".money").getAttribute("data-wei"), "7");
  });

  for (const [name, size] of WIDTHS) {
    test(`the analytics charts have a labelled y axis, values on hover and in a table, and a cumulative spend line (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/analytics`, /Analytics/);
      const cost = page.locator("svg.chart.cost");
      await cost.waitFor();
      const ticks = await cost.locator(".tick text").allTextContents();
      // 4 S is the highest day: round ticks from 0 S to 4 S, each with its gridline.
      assert.deepEqual(ticks, ["0 S", "1 S", "2 S", "3 S", "4 S"]);
      assert.equal(await cost.locator(".tick line.grid").count(), 5);
      const today = clock.day;
      assert.equal(await cost.locator(`.mark[data-day="${today}"] title`).textContent(), `${today}: 3 S`);
      const cumulative = page.locator("svg.chart.cumulative");
      assert.equal(await cumulative.locator("polyline.line").count(), 1);
      assert.equal(await cumulative.locator("circle.point").count(), 14);
      assert.equal(
        await cumulative.locator(`.mark[data-day="${today}"] title`).textContent(),
        `${today}: 9 S`,
      );
      // The same figures in the data table under the chart.
      const figure = page.locator("figure", { has: cumulative });
      await figure.locator("summary").click();
      const lastRow = figure.getByRole("table").locator("tbody tr").last();
      assert.match((await lastRow.textContent()) ?? "", new RegExp(`${today}.*9 S`));
      await screenshot(page, `money-02-analytics-${name}`);
      await assertNoAxeViolations(page, `the Analytics page at ${name} width`);
    });

    test(`charts with no data say so instead of drawing an empty box (${name})`, async () => {
      await page.setViewportSize(size);
      // The empty project's heading: the previous page (money-view) has an empty figure too (no refusals).
      await open(`#/projects/${EMPTY_ID}/analytics`, new RegExp(`Analytics — ${EMPTY_ID}`));
      await page.locator("figure[data-empty]").first().waitFor();
      assert.equal(await page.locator("svg.chart.cost, svg.chart.cumulative").count(), 0);
      const empty = await page.locator("figure[data-empty] .chart-empty").allTextContents();
      assert.equal(empty.length, 5, "operations, cost, cumulative spend, active senders and refusals");
      assert.ok(empty.every((text) => text === "No data for these 14 days yet."));
      await assertNoAxeViolations(page, `an empty Analytics page at ${name} width`);
    });

    test(`a project with no deposit and no spend says so (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${EMPTY_ID}/funding`, /Funding/);
      await page.getByText("No deposits yet").waitFor();
      assert.match((await fact("Gas left for").textContent()) ?? "", /no spend in the last 7 days/);
      assert.equal(await fact("Available").locator(".money").textContent(), "0 S");
      await assertNoAxeViolations(page, `an empty Funding page at ${name} width`);
    });
  }
});
