/**
 * axe-core in the browser tests: every dashboard page a test visits is checked for accessibility
 * violations, at a laptop's width and at a phone's, and a failure names each rule and the
 * elements it found.
 *
 * `page.addScriptTag({ path })` would inline axe's source, which the dashboard's
 * Content-Security-Policy (`script-src 'self'`) refuses, and loosening the policy for the tests
 * (`bypassCSP`) would hide the violations of it they should see. So the file is served at a
 * same-origin address the browser asks for, answered from node_modules by the test's route, and
 * added with `addScriptTag({ url })`.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";

export const AXE_PATH = fileURLToPath(new URL("../../node_modules/axe-core/axe.min.js", import.meta.url));
const AXE_URL_PATH = "/dashboard/__test-axe.min.js";
export const LAPTOP_WIDTH = { width: 1280, height: 900 };
export const PHONE_WIDTH = { width: 390, height: 844 };

const routed = new WeakSet<Page>();

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[] }[];
}

/** Puts axe into the page unless it is there (a hash route keeps it; a reload does not). */
async function inject(page: Page): Promise<void> {
  if (!routed.has(page)) {
    await page.route(`**${AXE_URL_PATH}`, (route) =>
      route.fulfill({ path: AXE_PATH, contentType: "text/javascript; charset=utf-8" }),
    );
    routed.add(page);
  }
  if (await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe === "object")) return;
  await page.addScriptTag({ url: new URL(AXE_URL_PATH, page.url()).href });
}

/** The page's violations, as axe reports them. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await inject(page);
  return page.evaluate(async () => {
    const axe = (
      globalThis as unknown as { axe: { run(context: Document): Promise<{ violations: unknown[] }> } }
    ).axe;
    const result = await axe.run(document);
    return result.violations as AxeViolation[];
  });
}

/** Fails with every violation's rule id, impact and elements when axe finds any. */
export async function assertNoAxeViolations(page: Page, label: string): Promise<void> {
  const violations = await axeViolations(page);
  const report = violations.map(
    (v) =>
      `${v.id} (${v.impact ?? "?"}): ${v.help}\n    ${v.nodes.map((n) => JSON.stringify(n.target)).join("\n    ")}`,
  );
  assert.deepEqual(report, [], `axe found violations on ${label}:\n${report.join("\n")}`);
}

/**
 * Checks the page as it is shown now at a laptop's width and at a phone's, then puts the window
 * back as it was. The page's layout changes with the width (tables become cards, the navigation
 * folds), so each width is a page of its own to axe.
 */
export async function assertAccessibleAtBothWidths(page: Page, label: string): Promise<void> {
  const before = page.viewportSize();
  try {
    for (const [name, size] of [
      ["laptop", LAPTOP_WIDTH],
      ["phone", PHONE_WIDTH],
    ] as const) {
      await page.setViewportSize(size);
      await assertNoAxeViolations(page, `${label} at ${name} width`);
    }
  } finally {
    if (before) await page.setViewportSize(before);
    // Resizing can leave the document unfocused, and the clipboard answers only a focused one.
    await page.bringToFront();
  }
}
