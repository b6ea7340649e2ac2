/**
 * "Why are my players not sponsored?" in headless Chromium against the real service (on the
 * run's store, no chain): the Refusals page lists refused requests with their reason in plain
 * words and what was asked, filters by reason and by a range of days (a bad range is said beside
 * the filters, which stay); Analytics draws refusals per day by reason and the shares of requests
 * sponsored and refused. Each check runs at a laptop's width and a phone's, with axe.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { fundedProject, startTestApp, type TestApp } from "./support/app.ts";
import { assertNoAxeViolations, LAPTOP_WIDTH, PHONE_WIDTH } from "./support/axe.ts";
import { type Browser, CHROMIUM, launchBrowser, openPage, screenshot, signIn } from "./support/dashboard.ts";
import { heldDay } from "./support/held-day.ts";

const STUDIO = "refusal-studio@example.com";
const PROJECT_ID = "refusal-view";
const GAME = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const OTHER = "0x00000000000000000000000000000000000000c0";
const MINT = "0xa0712d68";
const WIDTHS = [
  ["laptop", LAPTOP_WIDTH],
  ["phone", PHONE_WIDTH],
] as const;

let t: TestApp;
let b: Browser;
let page: Page;
let baseUrl = "";
let project: Awaited<ReturnType<typeof fundedProject>>;
// Today is the day the refusals were recorded on, for the service and the browser alike.
const clock = heldDay();

function authorize(extra: Record<string, unknown>) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: project.apiKey,
    payload: {
      projectId: PROJECT_ID,
      user: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
      target: GAME,
      selector: MINT,
      estimatedGas: 150_000,
      chainId: 14601,
      ...extra,
    },
  });
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  t = await startTestApp({ now: clock.now });
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  project = await fundedProject(t, { target: GAME, selector: MINT }, 10n ** 18n, {
    email: STUDIO,
    projectId: PROJECT_ID,
  });
  clock.hold(Date.now());
  // Two granted, three refused off the allowlist, one refused for a bad body.
  for (let i = 0; i < 2; i++) assert.equal((await authorize({})).statusCode, 200);
  for (let i = 0; i < 3; i++) assert.equal((await authorize({ target: OTHER })).statusCode, 403);
  assert.equal((await authorize({ estimatedGas: 0 })).statusCode, 400);
  await t.services.refusals.flush();
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

describe("refusals in a browser", () => {
  for (const [name, size] of WIDTHS) {
    test(`the Refusals page says why in plain words, with the code, what was asked and the key (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/refusals`, /Refusals/);
      const list = page.getByRole("table", { name: /Refused requests, newest first/ });
      await list.waitFor();
      const rows = list.locator("tbody tr");
      assert.equal(await rows.count(), 4);
      const newest = (await rows.first().textContent()) ?? "";
      assert.match(newest, /The request was missing a field or had one in the wrong format\./);
      assert.match(newest, /invalid_request/);
      const oldest = (await rows.last().textContent()) ?? "";
      assert.match(oldest, /not on the project's allowlist/);
      assert.match(oldest, /not_allowlisted/);
      assert.match(oldest, /chain 14601/);
      assert.match(oldest, /150000 gas/);
      assert.match(oldest, /key #\d+/);
      assert.equal(await rows.last().locator(`code.hex[data-value="${OTHER}"]`).count(), 1);
      const totals = page.getByRole("table", { name: /Refusals per reason/ });
      assert.match((await totals.locator("tbody tr").first().textContent()) ?? "", /not_allowlisted.*3/);
      await screenshot(page, `refusals-01-list-${name}`);
      await assertNoAxeViolations(page, `the Refusals page at ${name} width`);
    });

    test(`filters by reason, and a backwards range is said beside the filters, which stay (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/refusals`, /Refusals/);
      const form = page.getByRole("form", { name: "Filter refusals" });
      await form.getByLabel("Reason").selectOption("not_allowlisted");
      await form.getByRole("button", { name: "Apply" }).click();
      const list = page.getByRole("table", { name: /Refused requests/ });
      const rows = list.locator("tbody tr");
      await page.waitForFunction(() => location.hash.includes("code=not_allowlisted"));
      // The filtered table has replaced the whole one once the other reason's row is gone.
      await list.locator("tbody tr", { hasText: "invalid_request" }).waitFor({ state: "detached" });
      assert.equal(await rows.count(), 3);
      for (const text of await rows.allTextContents()) assert.match(text, /not_allowlisted/);
      await form.getByLabel("From (UTC day)").fill("2030-01-02");
      await form.getByLabel("To (UTC day)").fill("2030-01-01");
      await form.getByRole("button", { name: "Apply" }).click();
      await form.getByText(/the range ends \(2030-01-01\) before it starts \(2030-01-02\)/).waitFor();
      assert.equal(await form.getByLabel("Reason").inputValue(), "not_allowlisted");
      assert.equal(await rows.count(), 3, "the table stays as it was");
      await screenshot(page, `refusals-02-filtered-${name}`);
      await assertNoAxeViolations(page, `the filtered Refusals page at ${name} width`);
    });

    test(`Analytics draws refusals per day by reason and the shares sponsored and refused (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/analytics`, /Analytics/);
      const chart = page.locator("svg.chart.stacked");
      await chart.waitFor();
      const today = clock.day;
      assert.equal(
        await chart.locator(`.mark[data-day="${today}"] title`).textContent(),
        `${today}: 4 (not_allowlisted 3, invalid_request 1)`,
      );
      assert.equal(await chart.locator(`.mark[data-day="${today}"] rect.series`).count(), 2);
      const shares = page.locator("figure", { hasText: "Requests sponsored and refused" });
      assert.equal(await shares.locator('[data-status="authorized"]').textContent(), "2");
      assert.equal(await shares.locator('[data-status="refused"]').textContent(), "4");
      await screenshot(page, `refusals-03-analytics-${name}`);
      await assertNoAxeViolations(page, `the Analytics page with refusals at ${name} width`);
    });
  }
});
