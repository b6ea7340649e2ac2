/**
 * The dashboard under a real browser: the service listening on a port (against a fresh anvil with
 * the sponsorship stack and its real chain watchers running), and headless Chromium (Debian's
 * `chromium`, driven by playwright-core) with a fresh profile, collecting every console error,
 * page error and request URL so that tests can assert on them.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { privateKeyToAccount } from "viem/accounts";
import { type ChainWatchers, createChainWatchers } from "../../src/chains/watchers.ts";
import { startTestApp, TEST_SIGNER_KEY, type TestApp } from "./app.ts";
import { type DevChain, startChain } from "./chain/anvil.ts";
import { type DevnetStack, deployStack } from "./chain/devnet.ts";

export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
export const ARTIFACTS = join(process.cwd(), "test-artifacts", "dashboard");

export interface DashboardService {
  chain: DevChain;
  stack: DevnetStack;
  t: TestApp;
  watchers: ChainWatchers;
  baseUrl: string;
  stop(): Promise<void>;
}

/**
 * The service as `npm start` runs it, in-process: the app listening on 127.0.0.1, the fee oracle
 * and the chain watchers (deposits and settlement) polling a fresh anvil.
 */
export async function startDashboardService(options: {
  confirmations: number;
  operator: string;
}): Promise<DashboardService> {
  const chain = await startChain();
  const stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
  const t = await startTestApp({
    env: {
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
      CHAIN_14601_PAYMASTER_V08_ADDRESS: stack.v08.paymaster,
      CHAIN_14601_CONFIRMATIONS: String(options.confirmations),
      CHAIN_14601_POLL_INTERVAL_MS: "100",
      OPERATOR_EMAILS: options.operator,
    },
    feeOracle: "chain",
  });
  const watchers = createChainWatchers(t.config, t.db);
  // Their log lines go where the app's go: a test that fails can print them.
  watchers.start(t.app.log);
  const baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  return {
    chain,
    stack,
    t,
    watchers,
    baseUrl,
    async stop() {
      await watchers.stop();
      await t.close();
      await chain.stop();
    },
  };
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors and uncaught page errors, as text. */
  errors: string[];
  /** Every URL the page requested. */
  urls: string[];
  close(): Promise<void>;
}

export async function launchBrowser(baseUrl: string): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), "gss-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    viewport: { width: 1280, height: 900 },
  });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  const urls: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(`console: ${msg.text()}`);
  });
  page.on("pageerror", (err) => errors.push(`page error: ${err.message}`));
  page.on("request", (req) => urls.push(req.url()));
  return {
    context,
    page,
    errors,
    urls,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Saves a full-page screenshot as test-artifacts/dashboard/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.TEST_SCREENSHOTS === "0") return;
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/**
 * Signs in as the dashboard keeps a developer's token (sessionStorage) and opens `hash`; resolves
 * once the page has a heading.
 */
export async function signIn(page: Page, baseUrl: string, token: string, hash = "#/orgs"): Promise<void> {
  await page.goto(`${baseUrl}/dashboard${hash}`);
  await page.evaluate((value) => sessionStorage.setItem("gss.token", value), token);
  await page.reload();
  await page.locator("h1").first().waitFor();
}

/**
 * Opens a dashboard page and waits for its title. Going to the address already shown changes no
 * hash, so the page would not render again: it is reloaded instead.
 */
export async function openPage(
  page: Page,
  baseUrl: string,
  hash: string,
  title: string | RegExp,
): Promise<void> {
  const target = `${baseUrl}/dashboard${hash}`;
  if (page.url() === target) await page.reload();
  else await page.goto(target);
  await page.getByRole("heading", { level: 1, name: title }).waitFor();
}
