/**
 * npm run demo: the whole loop on a local chain, in one command.
 *
 * `npm run demo -- --chain <id>` picks the local chain's id: 14601 (Sonic testnet, the default),
 * 146 (Sonic), or any other id, served as a chain of settings alone (CHAINS, CHAIN_<id>_NAME,
 * CHAIN_<id>_CURRENCY_SYMBOL; README, "Adding a chain"). The project's home chain and its tank are
 * that chain's.
 *
 * Starts anvil (chain 14601 by default) and deploys EntryPoint v0.7, SimpleAccountFactory, SponsorPaymaster
 * v2 and GameItems; starts a real ERC-4337 bundler (Alto) and the service as their own processes
 * (the service with an embedded store in a fresh temporary DATA_DIR); then, only through the HTTP
 * API and the bundler's JSON-RPC, creates an organization, a project, a key and an allowlist
 * entry, funds the tank with a real transfer, and sponsors two operations from a new player's
 * SimpleAccount as a wallet would: estimate with the bundler, authorize with the estimate, send
 * the operation with the authorization's paymaster fields and fee ceilings, wait for the
 * settlement. The first operation also deploys the account; the second is the typical one. For
 * each it prints what was reserved, what the chain charged and their ratio (the goal is ≤ 3×).
 * Everything it started is stopped at the end, on failure and on Ctrl-C.
 *
 * anvil mines only when a transaction arrives, so while the demo waits for confirmations it
 * mines empty blocks itself, as a live chain would produce them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { createPimlicoClient } from "permissionless/clients/pimlico";
import {
  type Address,
  concat,
  encodeFunctionData,
  formatEther,
  formatGwei,
  type Hex,
  http,
  parseEther,
  slice,
} from "viem";
import {
  type BundlerClient,
  createBundlerClient,
  entryPoint07Abi,
  type SmartAccount,
  type UserOperationReceipt,
} from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { localIssuer } from "../src/identity/tokens.ts";
import { PAYMASTER_GAS_LIMITS } from "../src/paymaster/gas.ts";
import { PAYMASTER_DATA_OFFSET, stubPaymasterAndData } from "../src/paymaster/layout.ts";
import { type Bundler, startBundler } from "../test/support/bundler.ts";
import { type DevChain, freePort, startChain } from "../test/support/chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi } from "../test/support/chain/devnet.ts";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const CHAIN_ID = chainArgument(process.argv.slice(2));
/** Built into the service; any other id is given its name and currency by settings. */
const BUILT_IN = [14601, 146];
const SYMBOL = BUILT_IN.includes(CHAIN_ID) ? "S" : "ETH";
const CONFIRMATIONS = 1;
const DEPOSIT = parseEther("1");
const ITEM_ID = 1n;
const DEVELOPER = "studio@example.com";
/** The goal of issue 7 for a typical honest operation: reserved ÷ charged. */
const RATIO_GOAL = 3;
const WAIT_ATTEMPTS = 150;
const MINT_CALL = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
const MINT_SELECTOR = slice(MINT_CALL, 0, 4);

interface Running {
  chain?: DevChain;
  bundler?: Bundler;
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

const S = (wei: bigint | string) => `${formatEther(BigInt(wei))} ${SYMBOL}`;
const gwei = (wei: bigint | string) => `${formatGwei(BigInt(wei))} gwei`;
const gas = (n: bigint) => n.toLocaleString("en-US");

async function main(): Promise<void> {
  say(
    `Starting anvil (chain ${CHAIN_ID}) and deploying EntryPoint v0.7, SimpleAccountFactory, SponsorPaymaster v2, GameItems`,
  );
  const chain = await startChain({ chainId: CHAIN_ID });
  running.chain = chain;
  const signerKey = generatePrivateKey();
  const stack = await deployStack(chain, { signer: privateKeyToAccount(signerKey).address });
  detail(`anvil        ${chain.rpcUrl}`);
  detail(`EntryPoint   ${stack.entryPoint} (${stack.entryPointDeployment})`);
  detail(`paymaster    ${stack.paymaster} (signer ${privateKeyToAccount(signerKey).address})`);
  detail(`GameItems    ${stack.gameItems}`);

  say(
    "Starting the bundler (Alto, anvil accounts 2 and 3) and the service (embedded store in a fresh DATA_DIR)",
  );
  const bundler = await startBundler({ rpcUrl: chain.rpcUrl, entryPoints: [stack.entryPoint] });
  running.bundler = bundler;
  detail(`bundler      ${bundler.url}`);
  const api = await startService(chain, stack, signerKey);

  const project = await createProject(api, stack);
  await fundTank(api, chain, project);
  const depositBefore = await paymasterDeposit(chain, stack);
  const player = await newPlayer(chain, stack, bundler);
  const scene: Scene = { api, chain, stack, project, player };
  const first = await sponsorMint(scene, "first operation: deploys the account, then mints");
  const typical = await sponsorMint(scene, "typical operation: the same account mints again");
  await showCharges(chain, stack, depositBefore, [first, typical]);
  await showReports(api, project);
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
  // The fee oracle reads this anvil's base fee and priority fee; the ceiling stays the default.
  Object.assign(env, {
    NODE_ENV: "development",
    HOST: "127.0.0.1",
    PORT: String(port),
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    SIGNER_PRIVATE_KEY: signerKey,
    OPERATOR_EMAILS: DEVELOPER,
    CHAINS: String(CHAIN_ID),
    [`CHAIN_${CHAIN_ID}_RPC_URL`]: chain.rpcUrl,
    [`CHAIN_${CHAIN_ID}_PAYMASTER_ADDRESS`]: stack.paymaster,
    [`CHAIN_${CHAIN_ID}_CONFIRMATIONS`]: String(CONFIRMATIONS),
    [`CHAIN_${CHAIN_ID}_POLL_INTERVAL_MS`]: "250",
    [`CHAIN_${CHAIN_ID}_START_BLOCK`]: "0",
    ...(BUILT_IN.includes(CHAIN_ID)
      ? {}
      : { [`CHAIN_${CHAIN_ID}_NAME`]: `Local ${CHAIN_ID}`, [`CHAIN_${CHAIN_ID}_CURRENCY_SYMBOL`]: SYMBOL }),
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
  const token = await (await localIssuer(running.dataDir!)).issue(DEVELOPER);
  detail(`token issued for ${DEVELOPER} (also an operator: OPERATOR_EMAILS)`);

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
  await api.call("POST", `/projects/${project.id}/allowlist`, token, {
    targetContract: stack.gameItems,
    functionSelector: MINT_SELECTOR,
  });
  detail(`organization ${org.slug} (id ${org.id})`);
  detail(`project      ${project.id}, deposit address ${project.deposit_address}`);
  detail(`API key      ${key.keyPreview}… (rate limit 600/min)`);
  detail(`allowlist    ${stack.gameItems} ${MINT_SELECTOR} (mint)`);
  return { id: project.id, token, apiKey: key.apiKey, depositAddress: project.deposit_address };
}

async function balance(api: Api, p: DemoProject): Promise<bigint> {
  return BigInt((await api.call<{ balance: string }>("GET", `/projects/${p.id}/balance`, p.token)).balance);
}

async function fundTank(api: Api, chain: DevChain, p: DemoProject): Promise<void> {
  say(`Funding the gas tank: sending ${S(DEPOSIT)} to the deposit address`);
  const before = await balance(api, p);
  // Wallet 1: anvil accounts 2 and 3 belong to the bundler, whose transactions must not race ours.
  const hash = await chain.wallets[1]!.sendTransaction({ to: p.depositAddress, value: DEPOSIT });
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

interface Player {
  account: SmartAccount;
  bundlerClient: BundlerClient;
  /** The same bundler's own methods (its gas price). */
  pimlicoClient: ReturnType<typeof createPimlicoClient>;
}

/** A new player's SimpleAccount (not deployed yet), with a bundler client as a wallet would hold. */
async function newPlayer(chain: DevChain, stack: DevnetStack, bundler: Bundler): Promise<Player> {
  const account = await toSimpleSmartAccount({
    client: chain.publicClient,
    owner: privateKeyToAccount(generatePrivateKey()),
    entryPoint: { address: stack.entryPoint, version: "0.7" },
    factoryAddress: stack.accountFactory,
  });
  const bundlerClient = createBundlerClient({
    client: chain.publicClient,
    chain: chain.chain,
    account,
    transport: http(bundler.url),
    pollingInterval: 100,
  });
  const pimlicoClient = createPimlicoClient({
    transport: http(bundler.url),
    entryPoint: { address: stack.entryPoint, version: "0.7" },
  });
  return { account, bundlerClient, pimlicoClient };
}

/** The authorize response (INTERFACE.md's fields and the v2 ones the client must respect). */
interface Authorization {
  paymasterAndData: Hex;
  paymaster: Address;
  paymasterData: Hex;
  paymasterVerificationGasLimit: string;
  paymasterPostOpGasLimit: string;
  maxGasCost: string;
  authorizationId: Hex;
  validUntil: number;
  validAfter: number;
  maxTotalGas: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
}

interface AccountGas {
  verificationGasLimit: bigint;
  callGasLimit: bigint;
  preVerificationGas: bigint;
}

/** What one sponsored operation reserved and cost. */
interface Measured {
  label: string;
  reservedWei: bigint;
  maxTotalGas: bigint;
  maxFeePerGasWei: bigint;
  actualGasCostWei: bigint;
  actualGasUsed: bigint;
  tankChargeWei: bigint;
}

/** Everything one sponsored operation needs: the service, the chain, the project and the player. */
interface Scene {
  api: Api;
  chain: DevChain;
  stack: DevnetStack;
  project: DemoProject;
  player: Player;
}

async function sponsorMint(scene: Scene, label: string): Promise<Measured> {
  say(`Sponsoring the ${label}`);
  const { api, project } = scene;
  const calls = [{ to: scene.stack.gameItems, data: MINT_CALL }];
  const accountGas = await estimate(scene, calls);
  const before = await balance(api, project);
  const auth = await authorizeMint(scene, accountGas);
  detail(
    `             reserved maxGasCost ${S(auth.maxGasCost)}; tank ${S(before)} → ${S(await balance(api, project))}`,
  );
  const receipt = await sendSponsored(scene, calls, accountGas, auth);

  await waitForSettlement(scene, auth.authorizationId, receipt.actualGasCost);
  const tankChargeWei = before - (await balance(api, project));
  const measured: Measured = {
    label,
    reservedWei: BigInt(auth.maxGasCost),
    maxTotalGas: BigInt(auth.maxTotalGas),
    maxFeePerGasWei: BigInt(auth.maxFeePerGas),
    actualGasCostWei: receipt.actualGasCost,
    actualGasUsed: receipt.actualGasUsed,
    tankChargeWei,
  };
  reportRatio(measured);
  if (tankChargeWei !== receipt.actualGasCost) {
    throw new Error(
      `the tank was charged ${tankChargeWei} wei, the chain charged ${receipt.actualGasCost} wei`,
    );
  }
  return measured;
}

/** estimatedGas is the operation's total gas: the bundler's limits plus the paymaster's own. */
async function authorizeMint(scene: Scene, accountGas: AccountGas): Promise<Authorization> {
  const estimatedGas =
    accountGas.verificationGasLimit +
    accountGas.callGasLimit +
    accountGas.preVerificationGas +
    PAYMASTER_GAS_LIMITS.verificationGasLimit +
    PAYMASTER_GAS_LIMITS.postOpGasLimit;
  // An account not yet deployed is deployed by this operation: the service reads the code its
  // factory call will put there (initCode = factory ‖ factoryData), as the bundler will run it.
  const account = scene.player.account;
  const initCode = (await account.isDeployed())
    ? undefined
    : await account.getFactoryArgs().then(({ factory, factoryData }) => concat([factory!, factoryData!]));
  const auth = await scene.api.call<Authorization>("POST", "/sponsor/authorize", scene.project.apiKey, {
    projectId: scene.project.id,
    user: account.address,
    target: scene.stack.gameItems,
    selector: MINT_SELECTOR,
    estimatedGas: Number(estimatedGas),
    chainId: CHAIN_ID,
    ...(initCode ? { initCode } : {}),
  });
  detail(`authorize    estimatedGas ${gas(estimatedGas)} → authorization ${auth.authorizationId}`);
  detail(
    `             fee ceilings maxFeePerGas ${gwei(auth.maxFeePerGas)}, maxPriorityFeePerGas ${gwei(auth.maxPriorityFeePerGas)}; window ${auth.validAfter}..${auth.validUntil}`,
  );
  return auth;
}

/** Sends the operation through the bundler with the authorization's paymaster fields; waits for it. */
async function sendSponsored(
  scene: Scene,
  calls: { to: Address; data: Hex }[],
  accountGas: AccountGas,
  auth: Authorization,
): Promise<UserOperationReceipt> {
  const { player, chain, stack } = scene;
  await checkBundlerPrice(player, auth);
  // The operation offers exactly the fee ceilings it was authorized for, with the bundler's limits.
  const userOpHash = await player.bundlerClient.sendUserOperation({
    calls,
    ...accountGas,
    maxFeePerGas: BigInt(auth.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
    paymaster: auth.paymaster,
    paymasterData: auth.paymasterData,
    paymasterVerificationGasLimit: BigInt(auth.paymasterVerificationGasLimit),
    paymasterPostOpGasLimit: BigInt(auth.paymasterPostOpGasLimit),
  });
  const receipt = await player.bundlerClient.waitForUserOperationReceipt({
    hash: userOpHash,
    timeout: 60_000,
  });
  if (!receipt.success) throw new Error(`the operation failed on chain: ${receipt.reason ?? "no reason"}`);
  const items = await chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [player.account.address, ITEM_ID],
  });
  detail(
    `bundled      ${receipt.receipt.transactionHash} (block ${receipt.receipt.blockNumber}), userOp ${userOpHash}`,
  );
  detail(
    `on chain     UserOperationEvent success=${receipt.success}, actualGasCost ${S(receipt.actualGasCost)} for ${gas(receipt.actualGasUsed)} gas; player holds ${items} of item ${ITEM_ID}`,
  );
  return receipt;
}

/**
 * The bundler's gas estimate, as a wallet gets it before asking for sponsorship: the operation
 * carries a stub paymasterAndData of the final length (src/paymaster/layout.ts), which the
 * paymaster answers with a signature failure rather than a revert, so estimation goes through.
 * The service does not serve a stub yet (ERC-7677 pm_getPaymasterStubData), so the demo builds
 * it with the service's own layout module.
 */
async function estimate(scene: Scene, calls: { to: Address; data: Hex }[]): Promise<AccountGas> {
  const { chain, stack, player } = scene;
  const nowSec = Number((await chain.publicClient.getBlock()).timestamp);
  const stub = stubPaymasterAndData({
    paymaster: stack.paymaster,
    mode: "call",
    gas: PAYMASTER_GAS_LIMITS,
    validAfterSec: nowSec - 60,
    validUntilSec: nowSec + 300,
  });
  const estimate = await player.bundlerClient.estimateUserOperationGas({
    calls,
    paymaster: stack.paymaster,
    paymasterData: `0x${stub.slice(2 + PAYMASTER_DATA_OFFSET * 2)}`,
    paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit,
    paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit,
  });
  detail(
    `estimate     Alto: verification ${gas(estimate.verificationGasLimit)}, call ${gas(estimate.callGasLimit)}, preVerification ${gas(estimate.preVerificationGas)}`,
  );
  // Alto measures the paymaster too; the service's own limits are the ones signed and used.
  detail(
    `             paymaster: Alto would set ${gas(estimate.paymasterVerificationGasLimit ?? 0n)} + ${gas(estimate.paymasterPostOpGasLimit ?? 0n)}; the service signs ${gas(PAYMASTER_GAS_LIMITS.verificationGasLimit)} + ${gas(PAYMASTER_GAS_LIMITS.postOpGasLimit)}`,
  );
  return {
    verificationGasLimit: estimate.verificationGasLimit,
    callGasLimit: estimate.callGasLimit,
    preVerificationGas: estimate.preVerificationGas,
  };
}

/**
 * A wallet asks the bundler for its price before sending, as viem and permissionless do with
 * Pimlico's bundlers: the bundler refuses an operation priced below it. Alto (with its default
 * gas-price-refresh-interval of 0) samples the chain only when asked, and demands the lowest
 * price it sampled in the last 20 s; on anvil, whose base fee falls 12.5 % with every empty block,
 * an operation sent without this call was refused because its last sample was several blocks old
 * and above the service's ceiling. The operation is sponsored only up to the ceilings, so a
 * bundler asking more than them cannot carry it now.
 */
async function checkBundlerPrice(player: Player, auth: Authorization): Promise<void> {
  const { standard } = await player.pimlicoClient.getUserOperationGasPrice();
  detail(
    `bundler      asks at least maxFeePerGas ${gwei(standard.maxFeePerGas)}, maxPriorityFeePerGas ${gwei(standard.maxPriorityFeePerGas)}`,
  );
  if (standard.maxFeePerGas > BigInt(auth.maxFeePerGas)) {
    throw new Error("the bundler's price is above the authorization's maxFeePerGas ceiling");
  }
  if (standard.maxPriorityFeePerGas > BigInt(auth.maxPriorityFeePerGas)) {
    throw new Error("the bundler's price is above the authorization's maxPriorityFeePerGas ceiling");
  }
}

async function waitForSettlement(scene: Scene, authId: Hex, actualGasCostWei: bigint): Promise<void> {
  const { api, chain, project: p } = scene;
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
    `settled      status ${event.status}, actual gas ${gas(BigInt(event.actual_gas))}, cost ${S(event.actual_gas_cost)}, tx ${event.tx_hash}`,
  );
  if (event.status !== "success") throw new Error(`the operation settled as ${event.status}`);
  if (BigInt(event.actual_gas_cost) !== actualGasCostWei) {
    throw new Error(`settled at ${event.actual_gas_cost} wei, the chain charged ${actualGasCostWei} wei`);
  }
}

/**
 * reserved ÷ actual = (maxTotalGas ÷ gas used) × (maxFeePerGas ceiling ÷ price paid per gas):
 * the first factor is the headroom of the bundler's gas limits, the second the fee margin.
 */
function reportRatio(m: Measured): void {
  const ratio = Number(m.reservedWei) / Number(m.actualGasCostWei);
  const gasFactor = Number(m.maxTotalGas) / Number(m.actualGasUsed);
  const paidPerGasWei = m.actualGasCostWei / m.actualGasUsed;
  const feeFactor = Number(m.maxFeePerGasWei) / (Number(m.actualGasCostWei) / Number(m.actualGasUsed));
  detail(
    `tank charge  ${S(m.tankChargeWei)} ${m.tankChargeWei === m.actualGasCostWei ? "=" : "≠"} actualGasCost ${S(m.actualGasCostWei)}; the reservation's rest went back to the tank`,
  );
  detail(
    `RATIO        reserved ${S(m.reservedWei)} ÷ actual ${S(m.actualGasCostWei)} = ${ratio.toFixed(2)}× ` +
      `(gas ${gas(m.maxTotalGas)} ÷ ${gas(m.actualGasUsed)} = ${gasFactor.toFixed(2)}, ` +
      `fee ${gwei(m.maxFeePerGasWei)} ÷ ${gwei(paidPerGasWei)} = ${feeFactor.toFixed(2)})`,
  );
}

async function paymasterDeposit(chain: DevChain, stack: DevnetStack): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.entryPoint,
    abi: entryPoint07Abi,
    functionName: "balanceOf",
    args: [stack.paymaster],
  });
}

async function showCharges(
  chain: DevChain,
  stack: DevnetStack,
  depositBefore: bigint,
  ops: Measured[],
): Promise<void> {
  say("Reservation ÷ actual cost, and what the paymaster paid against what the tank was charged");
  for (const m of ops) {
    const ratio = Number(m.reservedWei) / Number(m.actualGasCostWei);
    detail(`${m.label.split(":")[0]!.padEnd(18)} reserved ÷ actual = ${ratio.toFixed(2)}×`);
  }
  const typical = ops[ops.length - 1]!;
  const typicalRatio = Number(typical.reservedWei) / Number(typical.actualGasCostWei);
  detail(
    `goal for a typical operation ≤ ${RATIO_GOAL}×: ${typicalRatio <= RATIO_GOAL ? "met" : "NOT met"} (${typicalRatio.toFixed(2)}×)`,
  );
  const paid = depositBefore - (await paymasterDeposit(chain, stack));
  const charged = ops.reduce((sum, m) => sum + m.tankChargeWei, 0n);
  detail(
    `paymaster's EntryPoint deposit fell by ${S(paid)}; tanks charged ${S(charged)} (${paid === charged ? "equal, to the wei" : "DIFFERENT"})`,
  );
  if (paid !== charged)
    throw new Error(`the paymaster paid ${paid} wei, the tanks were charged ${charged} wei`);
}

async function showReports(api: Api, p: DemoProject): Promise<void> {
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
  const chainParity = await api.call<{
    entryPointDeposit: string | null;
    promised: string;
    operations: number;
    paidOnChain: string;
    billed: string;
    unattributed: string;
    inSync: boolean;
  }>("GET", `/blockchain/chains/${CHAIN_ID}/parity`, p.token);
  const ready = await fetch(`${api.baseUrl}/health/ready`).then(
    (r) =>
      r.json() as Promise<{ status: string; checks: Record<string, { status: string; detail?: string }> }>,
  );
  detail(`overview     ${JSON.stringify(overview)}`);
  detail(`parity       inSync=${parity.inSync}, ledger balance ${S(parity.ledgerBalance)}`);
  detail(
    `chain parity ${chainParity.operations} operations, paid on chain ${S(chainParity.paidOnChain)}, billed ${S(chainParity.billed)}, ` +
      `unattributed ${S(chainParity.unattributed)}, inSync=${chainParity.inSync}; ` +
      `EntryPoint deposit ${chainParity.entryPointDeposit === null ? "unknown" : S(chainParity.entryPointDeposit)} covers tanks + reservations ${S(chainParity.promised)}`,
  );
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
  const { service, bundler, chain, dataDir } = running;
  running.service = undefined;
  running.bundler = undefined;
  running.chain = undefined;
  running.dataDir = undefined;
  if (service && service.exitCode === null && service.signalCode === null) {
    const exited = new Promise((r) => service.once("exit", r));
    service.kill("SIGTERM");
    const force = setTimeout(() => service.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(force);
  }
  await bundler?.stop();
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
// Should the demo die without cleaning up, the service must not outlive it (anvil and Alto have their own guards).
process.once("exit", () => running.service?.kill("SIGKILL"));

try {
  await main();
  await stopAll();
} catch (err) {
  console.error(`\ndemo failed: ${(err as Error).message}`);
  const bundlerOutput = running.bundler?.output();
  if (bundlerOutput) console.error(`\nthe bundler's output:\n${bundlerOutput}`);
  const tail = serviceLogTail();
  if (tail) console.error(`\nlast lines of the service log:\n${tail}`);
  await stopAll();
  process.exitCode = 1;
}

/** `--chain <id>` (or `--chain=<id>`): the local chain's id, 14601 unless given. */
function chainArgument(args: string[]): number {
  const at = args.findIndex((a) => a === "--chain" || a.startsWith("--chain="));
  if (at < 0) return 14601;
  const raw = args[at]!.includes("=") ? args[at]!.slice("--chain=".length) : args[at + 1];
  const id = Number(raw);
  if (!raw || !/^\d{1,10}$/.test(raw) || id < 1 || id > 2 ** 31 - 1) {
    console.error(
      `--chain takes a chain id (an integer from 1 to ${2 ** 31 - 1}), not ${JSON.stringify(raw ?? "")}`,
    );
    process.exit(2);
  }
  return id;
}
