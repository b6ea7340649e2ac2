/**
 * The dashboard defects of issue 24, each driven in headless Chromium against the real service
 * (listening on a port, on the run's store; no chain: the project's tank is credited straight to
 * the ledger and its pending operations are authorizations nobody ran). Each test names the
 * defect it holds fixed, and the key ones run at a laptop's width and at a phone's (375 × 740).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { parseEther } from "viem";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  type TestApp,
} from "./support/app.ts";
import { assertNoAxeViolations } from "./support/axe.ts";
import { type Browser, CHROMIUM, launchBrowser, screenshot } from "./support/dashboard.ts";

const STUDIO = "studio@example.com";
const OPERATOR = "ops@example.com";
const PROJECT_ID = "defects";
const ORG_SLUG = "defects-studio";
const LAPTOP = { width: 1280, height: 900 };
const PHONE = { width: 375, height: 740 };
const WIDTHS = [
  ["laptop", LAPTOP],
  ["phone", PHONE],
] as const;
/** --danger in styles.css (#b42318), as getComputedStyle reports it. */
const DANGER = "rgb(180, 35, 24)";

let t: TestApp;
let b: Browser;
let page: Page;
let baseUrl = "";
let studioToken = "";
let project: Awaited<ReturnType<typeof fundedProject>>;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run does)`);
  t = await startTestApp({ env: { OPERATOR_EMAILS: OPERATOR } });
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  project = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, parseEther("1"), {
    email: STUDIO,
    slug: ORG_SLUG,
    projectId: PROJECT_ID,
  });
  studioToken = project.ownerToken;
  // Two authorizations nobody runs: pending, their most possible cost reserved in the tank.
  for (let i = 0; i < 2; i++) {
    const res = await authorizeMint(t, project);
    assert.equal(res.statusCode, 200, res.body);
  }
  b = await launchBrowser(baseUrl);
  page = b.page;
});

after(async () => {
  await b?.close();
  await t?.close();
});

const url = (hash: string) => `${baseUrl}/dashboard${hash}`;
const alert = (within = page.locator("main")) => within.locator('[role="alert"]:not([hidden])').first();

/** Signs in with a developer token as the page keeps it (sessionStorage), then opens `hash`. */
async function signInAs(token: string, hash = "#/orgs") {
  await page.goto(url(hash));
  await page.evaluate((value) => sessionStorage.setItem("gss.token", value), token);
  await page.reload();
  await page.locator("h1").first().waitFor();
}

/** Goes to a page and waits for its heading; the page already shown is loaded afresh. */
async function open(hash: string, title: string | RegExp) {
  // Going to the address already shown changes no hash, so the page would not render again.
  if (page.url() === url(hash)) await page.reload();
  else await page.goto(url(hash));
  await page.getByRole("heading", { level: 1, name: title }).waitFor();
}

async function api(method: string, path: string, payload?: unknown) {
  const res = await t.request({
    method: method as "GET",
    url: path,
    token: studioToken,
    payload: payload as object,
  });
  return { status: res.statusCode, json: res.json() as unknown };
}

const borderOf = (selector: string) =>
  page.locator(selector).evaluate((el) => getComputedStyle(el).borderTopColor);

describe("dashboard defects of issue 24", () => {
  before(async () => {
    await signInAs(studioToken, "#/orgs");
    await page.getByRole("heading", { level: 1, name: "Organizations" }).waitFor();
  });

  for (const [index, [name, size]] of WIDTHS.entries()) {
    test(`1. a decimal comma is a decimal point, never a multiplier; a grouping separator is refused (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}`, /Overview/);
      // Each width saves its own amount: waiting for the page to show it then
      // proves this save landed (the same amount would already be on screen,
      // and the late re-render after its save would wipe the alerts below).
      const amount = `${index + 1}.5`;
      await page.getByLabel("Daily cap (S)").fill(amount.replace(".", ","));
      await page.getByRole("button", { name: "Save settings" }).click();
      const cap = page.locator("dd .money").nth(1);
      await page.locator("dd .money", { hasText: `${amount} S` }).waitFor();
      assert.equal(await cap.getAttribute("title"), `${parseEther(amount)} wei`);
      assert.equal(
        ((await api("GET", `/projects/${PROJECT_ID}`)).json as { daily_cap: string }).daily_cap,
        parseEther(amount).toString(),
      );

      for (const ambiguous of ["1,000", "1,000.5", "1.000,5", "1 000"]) {
        await page.getByLabel("Daily cap (S)").fill(ambiguous);
        await page.getByRole("button", { name: "Save settings" }).click();
        await alert().waitFor();
        assert.match((await alert().textContent()) ?? "", /plain number such as 1\.5/, ambiguous);
        assert.equal(await page.getByLabel("Daily cap (S)").getAttribute("aria-invalid"), "true");
      }
      assert.equal(
        ((await api("GET", `/projects/${PROJECT_ID}`)).json as { daily_cap: string }).daily_cap,
        parseEther(amount).toString(),
        "nothing refused was saved",
      );

      // The low-balance alert reads amounts with the same parser.
      await open(`#/projects/${PROJECT_ID}/webhooks`, /Webhooks/);
      const threshold = `0.0${index + 5}`;
      await page.getByLabel("Alert below (S)").fill(threshold.replace(".", ","));
      await page.getByRole("button", { name: "Save alert" }).click();
      await page.getByText(`Alert below ${threshold} S`).waitFor();
      const saved = await api("GET", `/projects/${PROJECT_ID}/balance-alert`);
      assert.equal((saved.json as { thresholdWei: string }).thresholdWei, parseEther(threshold).toString());
      await screenshot(page, `defects-01-amounts-${name}`);
      await assertNoAxeViolations(page, `defects-01-amounts-${name}`);
    });
  }

  test("2. an endpoint submitted twice is created once; the button waits, the form is emptied", async () => {
    await page.setViewportSize(LAPTOP);
    await open(`#/projects/${PROJECT_ID}/webhooks`, /Webhooks/);
    let posts = 0;
    const slow = `${baseUrl}/projects/${PROJECT_ID}/webhooks`;
    await page.route(slow, async (route) => {
      if (route.request().method() === "POST") {
        posts++;
        await new Promise((r) => setTimeout(r, 400));
      }
      await route.continue();
    });
    await page.getByLabel("URL", { exact: true }).fill("https://hooks.example.com/once");
    await page.getByLabel("Description").fill("double submit");
    const button = page.getByRole("button", { name: "Add endpoint" });
    // Two submissions before the first is answered (a double Enter, a double click's second event).
    await page.evaluate(() => {
      const form = document.querySelector('form[aria-label="Add a webhook endpoint"]') as HTMLFormElement;
      form.requestSubmit();
      form.requestSubmit();
    });
    assert.equal(await button.isDisabled(), true, "disabled while the request is in flight");
    await page.getByRole("heading", { name: "The endpoint's signing secret — shown once" }).waitFor();
    t.secrets.add(await page.getByLabel("Signing secret").inputValue());
    await page.unroute(slow);
    assert.equal(posts, 1, "one POST");
    assert.equal(await button.isDisabled(), false);
    assert.equal(await page.getByLabel("URL", { exact: true }).inputValue(), "", "the form was reset");
    assert.equal(await page.getByLabel("Description").inputValue(), "");
    const hooks = (await api("GET", `/projects/${PROJECT_ID}/webhooks`)).json as { url: string }[];
    assert.equal(hooks.filter((h) => h.url === "https://hooks.example.com/once").length, 1);
    await page.getByRole("button", { name: "I have stored it" }).click();
  });

  for (const [name, size] of WIDTHS) {
    test(`3. a pending event shows its reserved amount and when it expires (${name})`, async () => {
      await page.setViewportSize(size);
      const listed = (await api("GET", `/projects/${PROJECT_ID}/analytics/events?status=pending`)).json as {
        events: { max_gas_cost: string; valid_until: number }[];
      };
      assert.equal(listed.events.length, 2);
      const first = listed.events[0]!;
      assert.ok(BigInt(first.max_gas_cost) > 0n);
      await open(`#/projects/${PROJECT_ID}/events`, /Events/);
      const row = page.locator("tbody tr", { has: page.locator(".badge-pending") }).first();
      await row.waitFor();
      const reserved = row.locator(".reserved");
      assert.match(
        (await reserved.textContent()) ?? "",
        /^≤ [\d.,]+ S reserved · expires \d{4}-\d{2}-\d{2} /,
      );
      assert.equal(await reserved.locator(".money").getAttribute("data-wei"), first.max_gas_cost);
      assert.equal(
        await reserved.locator("time").getAttribute("datetime"),
        new Date(first.valid_until * 1000).toISOString(),
      );
      assert.equal(await row.getByText("0 S", { exact: true }).count(), 0, "no free-looking 0 S");
      await screenshot(page, `defects-03-pending-${name}`);
      await assertNoAxeViolations(page, `defects-03-pending-${name}`);
    });

    test(`4. a bad date range keeps the page, its filters and its table, with the error beside the filters (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/events`, /Events/);
      const rows = page.locator("tbody tr");
      await rows.first().waitFor();
      const before = await rows.count();
      const filters = page.getByRole("form", { name: "Filter events" });

      // From after To: refused on the page, nothing navigates.
      await page.getByLabel("From (UTC day)").fill("2030-01-02");
      await page.getByLabel("To (UTC day)").fill("2030-01-01");
      await page.getByRole("button", { name: "Apply" }).click();
      await alert(filters).waitFor();
      assert.match((await alert(filters).textContent()) ?? "", /before it starts/);
      assert.equal(await page.getByLabel("From (UTC day)").inputValue(), "2030-01-02");
      assert.equal(await rows.count(), before, "the previous table stays");
      assert.equal(await page.getByRole("heading", { name: "Something went wrong" }).count(), 0);

      // The API refuses (a 400): the same, and the table stays.
      const events = (u: URL) => u.pathname === `/projects/${PROJECT_ID}/analytics/events`;
      await page.route(events, (route) =>
        route.fulfill({
          status: 400,
          contentType: "application/problem+json",
          body: JSON.stringify({
            type: "about:blank",
            title: "Invalid request",
            status: 400,
            code: "invalid_request",
            detail: "`from` must be before `to`",
          }),
        }),
      );
      await page.getByLabel("From (UTC day)").fill("2030-01-01");
      await page.getByLabel("To (UTC day)").fill("2030-01-01");
      await page.getByRole("button", { name: "Apply" }).click();
      await alert(filters).waitFor();
      assert.match((await alert(filters).textContent()) ?? "", /must be before/);
      assert.equal(await rows.count(), before);
      assert.equal(await page.getByLabel("To (UTC day)").inputValue(), "2030-01-01");
      await page.unroute(events);

      // A day that is no day, typed into the address: the page and its filters are there.
      await page.goto(url(`#/projects/${PROJECT_ID}/events?from=2026-02-30&status=pending`));
      await page.getByRole("heading", { level: 1, name: /Events/ }).waitFor();
      // The previous step's alert may still be on screen while the page re-renders: wait for this one's words.
      await alert(filters).filter({ hasText: "not a date" }).waitFor();
      assert.equal(await page.getByLabel("Status").inputValue(), "pending");
      await screenshot(page, `defects-04-bad-range-${name}`);
      await assertNoAxeViolations(page, `defects-04-bad-range-${name}`);
    });

    test(`5. a key with no scope ticked is refused on the page and nothing is sent (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/keys`, /API keys/);
      const keysBefore = ((await api("GET", `/projects/${PROJECT_ID}/apikeys`)).json as unknown[]).length;
      const sent: string[] = [];
      const watch = (req: { method(): string; url(): string }) => {
        if (req.method() === "POST" && req.url().endsWith("/apikeys")) sent.push(req.url());
      };
      page.on("request", watch);
      await page.getByLabel(/^sponsor/).uncheck();
      await page.getByRole("button", { name: "Create key" }).click();
      await alert().waitFor();
      assert.match((await alert().textContent()) ?? "", /at least one scope/);
      page.off("request", watch);
      assert.deepEqual(sent, []);
      assert.equal(
        ((await api("GET", `/projects/${PROJECT_ID}/apikeys`)).json as unknown[]).length,
        keysBefore,
      );
    });
  }

  test("6. a required field is not red before anything is typed, and is after a submit", async () => {
    await page.setViewportSize(LAPTOP);
    await open("#/projects", "Projects");
    const id = 'form[aria-label="Create a project"] input[name="id"]';
    assert.notEqual(await borderOf(id), DANGER, "red on a fresh form");
    await page.getByRole("button", { name: "Create project" }).click();
    assert.equal(await borderOf(id), DANGER, "red once a submit was tried");
    await page.getByLabel("Project id").fill("fine-id");
    assert.notEqual(await borderOf(id), DANGER, "valid again once fixed");
  });

  test("7. an error goes when the form is edited, submitted again with success, or the page changes", async () => {
    await page.setViewportSize(LAPTOP);
    await open("#/orgs", "Organizations");
    const create = page.getByRole("form", { name: "Create an organization" });
    await page.getByLabel("Name", { exact: true }).fill("Taken");
    await page.getByLabel("Slug").fill(ORG_SLUG);
    await page.getByRole("button", { name: "Create organization" }).click();
    await alert(create).waitFor();
    assert.match((await alert(create).textContent()) ?? "", /is taken/);
    await page.getByLabel("Slug").fill(`${ORG_SLUG}-2`);
    assert.equal(await alert(create).count(), 0, "an edit clears the old error");

    // Refused, then accepted: the later success leaves no error behind.
    await open(`#/projects/${PROJECT_ID}/allowlist`, /Allowlist/);
    const add = page.getByRole("form", { name: "Allow a contract function" });
    await page.getByLabel("Contract address").fill(MINT_TARGET);
    await page.getByLabel("Function selector").fill("0x12345678");
    await page.route(`${baseUrl}/projects/${PROJECT_ID}/allowlist`, (route) =>
      route.request().method() === "POST"
        ? route.fulfill({
            status: 503,
            contentType: "application/problem+json",
            body: JSON.stringify({
              title: "Service unavailable",
              status: 503,
              code: "unavailable",
              detail: "retry",
            }),
          })
        : route.continue(),
    );
    await page.getByRole("button", { name: "Allow", exact: true }).click();
    await alert(add).waitFor();
    await page.unroute(`${baseUrl}/projects/${PROJECT_ID}/allowlist`);
    await add.evaluate((form: HTMLFormElement) => form.requestSubmit());
    await page.getByText("Allowlist entry added").waitFor();
    assert.equal(await alert().count(), 0);

    // Refused again, then another page and back: nothing old on screen.
    await open(`#/projects/${PROJECT_ID}/webhooks`, /Webhooks/);
    await page.getByLabel("Alert below (S)").fill("abc");
    await page.getByRole("button", { name: "Save alert" }).click();
    await alert().waitFor();
    await page.getByRole("link", { name: "Policies" }).click();
    await page.getByRole("heading", { level: 1, name: /Policies/ }).waitFor();
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { level: 1, name: /Webhooks/ }).waitFor();
    assert.equal(await alert().count(), 0);
  });

  test("8. a schema refusal is said in the form's words, without a regex or a body/ path, code kept", async () => {
    await page.setViewportSize(LAPTOP);
    await open(`#/projects/${PROJECT_ID}/policies`, /Policies/);
    await page.getByLabel("Rule id").fill("few-senders");
    await page.getByLabel("Kind").selectOption("sender_allowlist");
    await page.getByLabel("Senders", { exact: true }).fill("0x1234");
    await page.getByRole("button", { name: "Save rule" }).click();
    await alert().waitFor();
    const text = (await alert().textContent()) ?? "";
    assert.match(text, /Sender 1 must be 0x followed by 40 hexadecimal characters/);
    assert.doesNotMatch(text, /body[./]|\^0x|\{40\}|pattern/);
    assert.equal(await alert().locator(".code").getAttribute("title"), "Error code invalid_request");
  });

  for (const [name, size] of WIDTHS) {
    test(`9. a sender list can be read back: its count, and its addresses when opened (${name})`, async () => {
      await page.setViewportSize(size);
      await open(`#/projects/${PROJECT_ID}/policies`, /Policies/);
      const senders = [`0x${"ab".repeat(20)}`, `0x${"cd".repeat(20)}`];
      const rule = "blocked";
      // Added once, through the form (a project has one blocklist); both widths read it back.
      if (name === "laptop") {
        await page.getByLabel("Rule id").fill(rule);
        await page.getByLabel("Kind").selectOption("sender_blocklist");
        await page.getByLabel("Senders", { exact: true }).fill(senders.join("\n"));
        await page.getByRole("button", { name: "Save rule" }).click();
      }
      const row = page.locator("tr", { has: page.getByRole("cell", { name: rule, exact: true }) });
      await row.waitFor();
      const list = row.locator("details");
      assert.equal(await list.getAttribute("open"), null, "closed until asked");
      await list.getByText("2 senders").click();
      for (const s of senders) await row.getByText(s, { exact: true }).waitFor();
      assert.equal(await row.getByText(senders[1]!, { exact: true }).isVisible(), true);
      await screenshot(page, `defects-09-senders-${name}`);
      await assertNoAxeViolations(page, `defects-09-senders-${name}`);
    });
  }

  test("10. the operators' entry is offered to operators only", async () => {
    await page.setViewportSize(LAPTOP);
    await open("#/orgs", "Organizations");
    const entry = page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Operators" });
    // The settings question answered before asserting that nothing appeared.
    await page.waitForLoadState("networkidle");
    assert.equal(await entry.isVisible(), false, "a studio developer does not see it");
    await signInAs(await t.token(OPERATOR), "#/orgs");
    await entry.waitFor();
    assert.equal(await entry.isVisible(), true);
    await signInAs(studioToken, "#/orgs");
  });

  test("11. at phone width every table row is stacked: each cell on screen under its column's name, the page never scrolls sideways", async () => {
    await page.setViewportSize(PHONE);
    const org = (await api("GET", "/orgs")).json as { id: number; slug: string }[];
    const orgId = org.find((o) => o.slug === ORG_SLUG)!.id;
    await api("POST", `/orgs/${orgId}/members`, {
      email: "a-long-member-address@example.com",
      role: "developer",
    });
    for (const [hash, title] of [
      [`#/orgs/${orgId}`, ORG_SLUG],
      [`#/projects/${PROJECT_ID}/events`, /Events/],
      [`#/projects/${PROJECT_ID}/keys`, /API keys/],
      [`#/projects/${PROJECT_ID}/policies`, /Policies/],
      [`#/projects/${PROJECT_ID}/webhooks`, /Webhooks/],
    ] as const) {
      await open(hash, title);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `${hash}: the page scrolls sideways by ${overflow}px`);
      const clipped = await page.locator(".table-wrap").evaluateAll((wraps) =>
        wraps.flatMap((wrap, i) => {
          const edge = wrap.getBoundingClientRect().right + 0.5;
          const problems: string[] = [];
          for (const cell of wrap.querySelectorAll("td")) {
            const box = cell.getBoundingClientRect();
            const label = cell.querySelector(".cell-label");
            const name = label?.textContent ?? "?";
            // Seen without scrolling anything sideways: inside the region, and the region on screen.
            if (box.left < -0.5 || box.right > edge || edge > window.innerWidth + 0.5)
              problems.push(`table ${i}: the ${name} cell is past the screen's edge`);
            if (cell.scrollWidth > cell.clientWidth + 1) problems.push(`table ${i}: the ${name} cell is cut`);
            if (!label || getComputedStyle(label).display === "none")
              problems.push(`table ${i}: a cell without its column's name`);
          }
          return problems;
        }),
      );
      assert.deepEqual(clipped, [], String(hash));
      await screenshot(page, `defects-11-phone-${String(hash).split("/").pop()}`);
      await assertNoAxeViolations(page, `defects-11-phone-${String(hash).split("/").pop()}`);
    }
    // The header is still there for assistive technology: the table keeps its column headers.
    assert.ok((await page.getByRole("columnheader").count()) > 0);
    await page.setViewportSize(LAPTOP);
  });

  test("no page error, and console errors only for the refusals the tests provoked", () => {
    const unexpected = b.errors.filter(
      (e) =>
        !/^console: Failed to load resource: the server responded with a status of (400|409|503) /.test(e),
    );
    assert.deepEqual(unexpected, []);
  });
});
