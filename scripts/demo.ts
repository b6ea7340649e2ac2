/**
 * npm run demo: the whole loop on a local chain, in one command.
 *
 * Starts anvil (chain 14601) and deploys EntryPoint v0.7, SimpleAccountFactory, SponsorPaymaster
 * and GameItems; starts the service as its own process (embedded store in a fresh temporary
 * DATA_DIR); then, only through the HTTP API, creates an organization, a project, a key and an
 * allowlist entry, funds the tank with a real transfer, authorizes and submits a real user
 * operation, and waits for the settlement. Everything it started is stopped at the end, on
 * failure and on Ctrl-C.
 *
 * anvil mines only when a transaction arrives, so while the demo waits for confirmations it
 * mines empty blocks itself, as a live chain would produce them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Address,
  encodeFunctionData,
  formatEther,
  type Hex,
  parseEther,
  parseEventLogs,
  slice,
} from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { localIssuer } from "../src/identity/tokens.ts";
import { PAYMASTER_POST_OP_GAS_LIMIT, PAYMASTER_VERIFICATION_GAS_LIMIT } from "../src/sponsor/routes.ts";
import { type DevChain, freePort, startChain } from "../test/support/chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi } from "../test/support/chain/devnet.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  getAccountNonce,
  handleOps,
  requiredPrefundWei,
  signUserOp,
} from "../test/support/chain/userop.ts";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const CHAIN_ID = 14601;
const CONFIRMATIONS = 1;
const DEPOSIT = parseEther("1");
const ITEM_ID = 1n;
/** The service prices reservations with this fee cap; the user operation offers exactly it. */
const MAX_FEE_PER_GAS_WEI = devnetUserOpGas.maxFeePerGas;
const WAIT_ATTEMPTS = 150;
const MINT_CALL = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
const MINT_SELECTOR = slice(MINT_CALL, 0, 4);

interface Running {
  chain?: DevChain;
  service?: ChildProcess;
  dataDir?: string;
}

const running: Running = {};
let step = 0;

function say(message: string): void {
  step++;
  console.log(`\n${String(step).padStart(2)}. ${message}`);
}

function detail(message: string): void {
  console.log(`    ${message}`);
}

const S = (wei: bigint | string) => `${formatEther(BigInt(wei))} S`;

async function main(): Promise<void> {
  say(
    "Starting anvil (chain 14601) and deploying EntryPoint v0.7, SimpleAccountFactory, SponsorPaymaster, GameItems",
  );
  const chain = await startChain({ chainId: CHAIN_ID });
  running.chain = chain;
  const signerKey = generatePrivateKey();
  const stack = await deployStack(chain, { signer: privateKeyToAccount(signerKey).address });
  detail(`anvil        ${chain.rpcUrl}`);
  detail(`EntryPoint   ${stack.entryPoint} (${stack.entryPointDeployment})`);
  detail(`paymaster    ${stack.paymaster} (signer ${privateKeyToAccount(signerKey).address})`);
  detail(`GameItems    ${stack.gameItems}`);

  say("Starting the service (embedded store in a fresh DATA_DIR)");
  const api = await startService(chain, stack, signerKey);

  const project = await createProject(api, stack);
  await fundTank(api, chain, project);
  await sponsorOneOperation(api, chain, stack, project);
  await showAnalytics(api, project);
  console.log("\nDemo complete.");
}

interface Api {
  baseUrl: string;
  call<T = Record<string, unknown>>(method: string, path: string, token: string, body?: unknown): Promise<T>;
}

async function startService(chain: DevChain, stack: DevnetStack, signerKey: Hex): Promise<Api> {
  const dataDir = mkdtempSync(join(tmpdir(), "gas-sponsorship-demo-"));
  running.dataDir = dataDir;
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of [
    "DATABASE_URL",
    "REDIS_URL",
    "OIDC_ISSUER",
    "OIDC_AUDIENCE",
    "OIDC_JWKS_URL",
    "DEPOSIT_XPUB",
  ]) {
    delete env[name];
  }
  Object.assign(env, {
    NODE_ENV: "development",
    HOST: "127.0.0.1",
    PORT: String(port),
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    SIGNER_PRIVATE_KEY: signerKey,
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
    CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
    CHAIN_14601_MAX_FEE_PER_GAS_WEI: MAX_FEE_PER_GAS_WEI.toString(),
    CHAIN_14601_POLL_INTERVAL_MS: "250",
    CHAIN_14601_START_BLOCK: "0",
  });
  const logPath = join(dataDir, "service.log");
  const log = createWriteStream(logPath);
  const service = spawn(process.execPath, ["--import", "tsx", "src/server.ts"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.service = service;
  service.stdout?.pipe(log);
  service.stderr?.pipe(log);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitFor("the service to answer /health", async () => {
    if (service.exitCode !== null)
      throw new Error(`the service exited (${service.exitCode}); see ${logPath}`);
    const res = await fetch(`${baseUrl}/health`).catch(() => null);
    return res?.ok ? true : undefined;
  });
  detail(`service      ${baseUrl} (pid ${service.pid}, log ${logPath})`);
  return { baseUrl, call: (method, path, token, body) => request(baseUrl, method, path, token, body) };
}

async function request<T>(
  baseUrl: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<T> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

interface DemoProject {
  id: string;
  token: string;
  apiKey: string;
  depositAddress: Address;
}

async function createProject(api: Api, stack: DevnetStack): Promise<DemoProject> {
  say("Signing in as a developer (the local token issuer shares the service's DATA_DIR)");
  const token = await (await localIssuer(running.dataDir!)).issue("studio@example.com");
  detail("token issued for studio@example.com");

  say("Creating an organization, a project, an API key and an allowlist entry (GameItems.mint)");
  const org = await api.call<{ id: number; slug: string }>("POST", "/orgs", token, {
    name: "Demo Studio",
    slug: "demo-studio",
  });
  const project = await api.call<{ id: string; deposit_address: Address }>("POST", "/projects", token, {
    id: "demo-game",
    name: "Demo Game",
    owner: org.slug,
  });
  const key = await api.call<{ apiKey: string; keyPreview: string }>(
    "POST",
    `/projects/${project.id}/apikeys`,
    token,
    {
      rateLimit: 600,
    },
  );
  const selector = MINT_SELECTOR;
  await api.call("POST", `/projects/${project.id}/allowlist`, token, {
    targetContract: stack.gameItems,
    functionSelector: selector,
  });
  detail(`organization ${org.slug} (id ${org.id})`);
  detail(`project      ${project.id}, deposit address ${project.deposit_address}`);
  detail(`API key      ${key.keyPreview}… (rate limit 600/min)`);
  detail(`allowlist    ${stack.gameItems} ${selector} (mint)`);
  return { id: project.id, token, apiKey: key.apiKey, depositAddress: project.deposit_address };
}

async function balance(api: Api, p: DemoProject): Promise<bigint> {
  return BigInt((await api.call<{ balance: string }>("GET", `/projects/${p.id}/balance`, p.token)).balance);
}

async function fundTank(api: Api, chain: DevChain, p: DemoProject): Promise<void> {
  say(`Funding the gas tank: sending ${S(DEPOSIT)} to the deposit address`);
  const before = await balance(api, p);
  const hash = await chain.wallets[3]!.sendTransaction({ to: p.depositAddress, value: DEPOSIT });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  detail(`transfer     ${hash}`);
  detail(`balance before ${S(before)}`);
  const after = await waitFor("the deposit to be credited", async () => {
    await chain.testClient.mine({ blocks: 1 });
    const now = await balance(api, p);
    return now > before ? now : undefined;
  });
  detail(`balance after  ${S(after)} (credited after ${CONFIRMATIONS} confirmation)`);
}

async function sponsorOneOperation(
  api: Api,
  chain: DevChain,
  stack: DevnetStack,
  p: DemoProject,
): Promise<void> {
  const owner = privateKeyToAccount(generatePrivateKey());
  const sender = await getAccountAddress(chain.publicClient, stack.accountFactory, owner.address);
  const paymasterGas = {
    verificationGasLimit: PAYMASTER_VERIFICATION_GAS_LIMIT,
    postOpGasLimit: PAYMASTER_POST_OP_GAS_LIMIT,
  };
  const estimatedGas = requiredPrefundWei(devnetUserOpGas, paymasterGas) / devnetUserOpGas.maxFeePerGas;

  say(`Authorizing GameItems.mint for a new player's SimpleAccount ${sender}`);
  const before = await balance(api, p);
  const auth = await api.call<{
    paymasterAndData: Hex;
    maxGasCost: string;
    authorizationId: Hex;
    validUntil: number;
  }>("POST", "/sponsor/authorize", p.apiKey, {
    projectId: p.id,
    user: sender,
    target: stack.gameItems,
    selector: MINT_SELECTOR,
    estimatedGas: Number(estimatedGas),
    chainId: CHAIN_ID,
  });
  detail(
    `authorization ${auth.authorizationId}, valid until ${new Date(auth.validUntil * 1000).toISOString()}`,
  );
  detail(
    `balance before ${S(before)}; reserved maxGasCost ${S(auth.maxGasCost)}; balance after ${S(await balance(api, p))}`,
  );

  say("Submitting the user operation through EntryPoint.handleOps (a bundler's job)");
  const unsigned = buildUserOp({
    sender,
    nonce: await getAccountNonce(chain.publicClient, stack.entryPoint, sender),
    initCode: accountInitCode(stack.accountFactory, owner.address),
    callData: executeCallData(stack.gameItems, MINT_CALL),
    gas: devnetUserOpGas,
    paymasterAndData: auth.paymasterAndData,
  });
  const { userOp, userOpHash } = await signUserOp(chain.publicClient, stack.entryPoint, owner, unsigned);
  const receipt = await handleOps(chain.publicClient, chain.wallets[1]!, stack.entryPoint, [userOp]);
  const [event] = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationEvent",
  });
  const items = await chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [sender, ITEM_ID],
  });
  detail(`transaction  ${receipt.transactionHash} (${receipt.status}), userOp ${userOpHash}`);
  detail(
    `on chain     success=${event?.args.success}, charged ${S(event?.args.actualGasCost ?? 0n)} for ${event?.args.actualGasUsed} gas`,
  );
  detail(`game state   player holds ${items} of item ${ITEM_ID}`);

  await waitForSettlement(api, chain, p, auth.authorizationId);
}

async function waitForSettlement(api: Api, chain: DevChain, p: DemoProject, authId: Hex): Promise<void> {
  say("Waiting for the settlement watcher to settle the operation");
  const before = await balance(api, p);
  interface Event {
    auth_id: string;
    status: string;
    actual_gas: number;
    actual_gas_cost: string;
    tx_hash: string | null;
  }
  const event = await waitFor("the settlement", async () => {
    await chain.testClient.mine({ blocks: 1 });
    const { events } = await api.call<{ events: Event[] }>(
      "GET",
      `/projects/${p.id}/analytics/events`,
      p.token,
    );
    const found = events.find((e) => e.auth_id === authId);
    return found && found.status !== "pending" ? found : undefined;
  });
  detail(
    `event        status ${event.status}, actual gas ${event.actual_gas}, cost ${S(event.actual_gas_cost)}, tx ${event.tx_hash}`,
  );
  detail(
    `balance before ${S(before)} (reservation held); after ${S(await balance(api, p))} (= deposit − actual cost)`,
  );
  if (event.status !== "success") throw new Error(`the operation settled as ${event.status}`);
}

async function showAnalytics(api: Api, p: DemoProject): Promise<void> {
  say("Analytics, parity and readiness");
  const overview = await api.call<Record<string, unknown>>(
    "GET",
    `/projects/${p.id}/analytics/overview`,
    p.token,
  );
  const parity = await api.call<{ inSync: boolean; ledgerBalance: string }>(
    "GET",
    `/projects/${p.id}/funds/parity`,
    p.token,
  );
  const ready = await fetch(`${api.baseUrl}/health/ready`).then(
    (r) =>
      r.json() as Promise<{ status: string; checks: Record<string, { status: string; detail?: string }> }>,
  );
  detail(`overview     ${JSON.stringify(overview)}`);
  detail(`parity       inSync=${parity.inSync}, ledger balance ${S(parity.ledgerBalance)}`);
  for (const [name, check] of Object.entries(ready.checks))
    detail(`ready        ${name}: ${check.status}${check.detail ? ` (${check.detail})` : ""}`);
}

/** Polls `check` (about every 200 ms) until it returns a value; bounded. */
async function waitFor<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < WAIT_ATTEMPTS; i++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function stopAll(): Promise<void> {
  const { service, chain, dataDir } = running;
  running.service = undefined;
  running.chain = undefined;
  running.dataDir = undefined;
  if (service && service.exitCode === null && service.signalCode === null) {
    const exited = new Promise((r) => service.once("exit", r));
    service.kill("SIGTERM");
    const force = setTimeout(() => service.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(force);
  }
  await chain?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}

function serviceLogTail(): string {
  try {
    return readFileSync(join(running.dataDir ?? "", "service.log"), "utf8")
      .split("\n")
      .slice(-20)
      .join("\n");
  } catch {
    return "";
  }
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: stopping everything`);
    void stopAll().finally(() => process.exit(130));
  });
}
// Should the demo die without cleaning up, the service must not outlive it (anvil has its own guard).
process.once("exit", () => running.service?.kill("SIGKILL"));

try {
  await main();
  await stopAll();
} catch (err) {
  console.error(`\ndemo failed: ${(err as Error).message}`);
  const tail = serviceLogTail();
  if (tail) console.error(`\nlast lines of the service log:\n${tail}`);
  await stopAll();
  process.exitCode = 1;
}
