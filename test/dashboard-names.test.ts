/**
 * Rules by name in a browser (issue 24), headless Chromium against the real service: a contract's
 * ABI names the allowlist's functions and the events' calls; an allowlist entry and a policy rule
 * are paused and resumed in place; a key is named and renamed. Each page is checked with axe.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  type TestApp,
} from "./support/app.ts";
import { assertNoAxeViolations, LAPTOP_WIDTH } from "./support/axe.ts";
import { type Browser, CHROMIUM, launchBrowser, openPage, screenshot, signIn } from "./support/dashboard.ts";

const PROJECT_ID = "names-view";
const GAME_ABI = [
  { type: "function", name: "mint", inputs: [{ name: "id", type: "uint256" }], outputs: [] },
  { type: "function", name: "burn", inputs: [{ name: "id", type: "uint256" }], outputs: [] },
];

let t: TestApp;
let b: Browser;
let page: Page;
let baseUrl = "";
let project: Awaited<ReturnType<typeof fundedProject>>;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  t = await startTestApp();
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  project = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 18n, {
    email: "names-studio@example.com",
    projectId: PROJECT_ID,
  });
  b = await launchBrowser(baseUrl);
  page = b.page;
  await page.setViewportSize(LAPTOP_WIDTH);
  await signIn(page, baseUrl, project.ownerToken);
});

after(async () => {
  assert.deepEqual(b?.errors ?? [], [], "no console or page error");
  await b?.close();
  await t?.close();
});

const open = (hash: string, title: RegExp) => openPage(page, baseUrl, hash, title);

describe("names and pausing in the dashboard", () => {
  test("an uploaded ABI names the allowlist's contract and function, and the events' calls", async () => {
    await open(`#/projects/${PROJECT_ID}/allowlist`, /Allowlist/);
    await page.getByLabel("Address", { exact: true }).fill(MINT_TARGET);
    await page.getByLabel("Contract name (optional)").fill("Game items");
    await page.getByLabel("ABI (JSON)").fill(JSON.stringify({ abi: GAME_ABI }));
    await page.getByRole("button", { name: "Save names" }).click();
    const row = page.locator("tr", { has: page.locator("code.signature", { hasText: "mint(uint256)" }) });
    await row.waitFor();
    assert.match((await row.textContent()) ?? "", /Game items/);
    assert.equal(await row.locator("code.signature").getAttribute("title"), MINT_SELECTOR);
    // The picker offers the named functions for the selector field.
    const offered = await page
      .locator("#known-functions option")
      .evaluateAll((options) =>
        options.map((o) => [(o as HTMLOptionElement).value, (o as HTMLOptionElement).label]),
      );
    assert.deepEqual(offered, [
      [MINT_SELECTOR, "Game items: mint(uint256)"],
      ["0x42966c68", "Game items: burn(uint256)"],
    ]);
    await screenshot(page, "names-01-allowlist");
    await assertNoAxeViolations(page, "names-01-allowlist");

    const res = await authorizeMint(t, project);
    assert.equal(res.statusCode, 200, res.body);
    await open(`#/projects/${PROJECT_ID}/events`, /Events/);
    await page.locator("td code.signature", { hasText: "mint(uint256)" }).first().waitFor();
  });

  test("an allowlist entry is paused and resumed in place, and a rule too", async () => {
    await open(`#/projects/${PROJECT_ID}/allowlist`, /Allowlist/);
    await page.getByRole("button", { name: `Pause ${MINT_SELECTOR} on ${MINT_TARGET}` }).click();
    await page.locator(".badge-paused").first().waitFor();
    const paused = await t.request({
      method: "GET",
      url: `/projects/${PROJECT_ID}/allowlist`,
      token: project.ownerToken,
    });
    assert.equal((paused.json() as { enabled: boolean }[])[0]!.enabled, false);
    await page.getByRole("button", { name: `Resume ${MINT_SELECTOR} on ${MINT_TARGET}` }).click();
    await page.locator(".badge-active").first().waitFor();

    await t.request({
      method: "PUT",
      url: `/projects/${PROJECT_ID}/policies/launch-week`,
      token: project.ownerToken,
      payload: { kind: "project_count_cap", maxOperations: 1000, window: "week", name: "Launch week budget" },
    });
    await open(`#/projects/${PROJECT_ID}/policies`, /Policies/);
    const rule = page.locator("tr", { hasText: "Launch week budget" });
    await rule.waitFor();
    await page.getByRole("button", { name: "Pause rule Launch week budget" }).click();
    await rule.locator(".badge-paused").waitFor();
    const rules = await t.request({
      method: "GET",
      url: `/projects/${PROJECT_ID}/policies`,
      token: project.ownerToken,
    });
    assert.equal(
      (rules.json() as { id: string; paused: boolean }[]).find((r) => r.id === "launch-week")?.paused,
      true,
    );
    await screenshot(page, "names-02-policies");
    await assertNoAxeViolations(page, "names-02-policies");
  });

  test("a key is named when it is created and renamed in place", async () => {
    await open(`#/projects/${PROJECT_ID}/keys`, /API keys/);
    await page.getByLabel("Name (optional)").fill("Game server EU");
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByRole("button", { name: "I have stored it" }).click();
    const row = page.locator("tr", { hasText: "Game server EU" });
    await row.waitFor();
    await row.getByRole("button", { name: /^Rename key/ }).click();
    await row.getByRole("textbox").fill("Game server US");
    await row.getByRole("button", { name: "Save" }).click();
    await page.locator("tr", { hasText: "Game server US" }).waitFor();
    const keys = await t.request({
      method: "GET",
      url: `/projects/${PROJECT_ID}/apikeys`,
      token: project.ownerToken,
    });
    assert.ok((keys.json() as { name: string | null }[]).some((k) => k.name === "Game server US"));
    await screenshot(page, "names-03-keys");
    await assertNoAxeViolations(page, "names-03-keys");
  });
});
