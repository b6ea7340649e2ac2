/**
 * Helpers for tests that run the service against a real local chain: project balances through
 * the HTTP API, authorizations from the service, and user operations that carry them.
 */
import assert from "node:assert/strict";
import type { Address, Hex, LocalAccount } from "viem";
import { encodeFunctionData } from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { createChainClient } from "../../src/chains/rpc.ts";
import { type DepositWatcher, depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import { type SettlementWatcher, settlementWatcher } from "../../src/settlement/watcher.ts";
import { startTestApp, TEST_SIGNER_KEY, type TestApp, type TestAppOptions } from "./app.ts";
import { DEVNET_CHAIN_ID, type DevChain, startChain } from "./chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi } from "./chain/devnet.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  getAccountNonce,
  signUserOp,
  type UserOpGas,
} from "./chain/userop.ts";

export const ITEM_ID = 7n;
export const mintCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
export const failCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "fail" });
export const MINT_SELECTOR = mintCall.slice(0, 10) as Hex;
export const FAIL_SELECTOR = failCall.slice(0, 10) as Hex;

/** Every gas limit of an operation, paymaster's included: what estimatedGas must cover. */
export function totalGas(gas: UserOpGas = devnetUserOpGas): bigint {
  return (
    gas.verificationGasLimit +
    gas.callGasLimit +
    gas.preVerificationGas +
    PAYMASTER_GAS_LIMITS.verificationGasLimit +
    PAYMASTER_GAS_LIMITS.postOpGasLimit
  );
}

/** A viem client for the watchers, the way the service builds one. */
export function watcherClient(chain: DevChain) {
  return createChainClient(chain.rpcUrl);
}

export interface Project {
  projectId: string;
  ownerToken: string;
  apiKey: string;
  depositAddress: string;
}

export async function balanceOf(t: TestApp, p: Project): Promise<bigint> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/balance`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return BigInt(res.json().balance);
}

export async function allowlist(t: TestApp, p: Project, target: Address, selector: Hex): Promise<void> {
  const res = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: target, functionSelector: selector },
  });
  assert.ok(res.statusCode === 200 || res.statusCode === 201, res.body);
}

export interface Authorization {
  authorized: boolean;
  paymasterAndData: Hex;
  paymaster: Address;
  paymasterData: Hex;
  signature: Hex;
  validUntil: number;
  validAfter: number;
  maxGasCost: string;
  authorizationId: Hex;
  maxTotalGas: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
  maxPreVerificationGas: string;
  senderCodeHash: Hex;
}

/**
 * Lets the project sponsor senders whose code the service does not know, on cost caps alone
 * (`unknown_accounts: caps_only`): for tests whose accounts are hostile code by design.
 */
export async function sponsorUnknownAccounts(t: TestApp, p: Project): Promise<void> {
  const res = await t.request({
    method: "PATCH",
    url: `/projects/${p.projectId}`,
    token: p.ownerToken,
    payload: { unknownAccounts: "caps_only" },
  });
  assert.equal(res.statusCode, 200, res.body);
}

/** Account gas limits with the fees set to an authorization's ceilings (the most it allows). */
export function gasFor(auth: Authorization, limits: UserOpGas = devnetUserOpGas): UserOpGas {
  return {
    ...limits,
    maxFeePerGas: BigInt(auth.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
  };
}

export async function authorize(
  t: TestApp,
  p: Project,
  body: {
    user: Address;
    target: Address;
    selector: Hex;
    estimatedGas?: bigint;
    initCode?: Hex;
    /** Default: the devnet's chain (14601). */
    chainId?: number;
  },
): Promise<Authorization> {
  const res = await t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user: body.user,
      target: body.target,
      selector: body.selector,
      estimatedGas: Number(body.estimatedGas ?? totalGas()),
      chainId: body.chainId ?? DEVNET_CHAIN_ID,
      ...(body.initCode ? { initCode: body.initCode } : {}),
    },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** The SimpleAccount of `owner` and whether it exists yet. */
export async function accountOf(chain: DevChain, stack: DevnetStack, owner: LocalAccount) {
  const sender = await getAccountAddress(chain.publicClient, stack.accountFactory, owner.address);
  const code = await chain.publicClient.getCode({ address: sender });
  return { sender, deployed: code !== undefined && code !== "0x" };
}

/** A signed operation from `owner`'s account calling `target` with `data`, carrying `paymasterAndData`. */
export async function userOpWith(
  chain: DevChain,
  stack: DevnetStack,
  owner: LocalAccount,
  call: { target: Address; data: Hex; paymasterAndData: Hex; gas?: UserOpGas },
): Promise<{ userOp: PackedUserOperation; userOpHash: Hex; sender: Address }> {
  const { sender, deployed } = await accountOf(chain, stack, owner);
  const unsigned = buildUserOp({
    sender,
    nonce: await getAccountNonce(chain.publicClient, stack.entryPoint, sender),
    initCode: deployed ? undefined : accountInitCode(stack.accountFactory, owner.address),
    callData: executeCallData(call.target, call.data),
    gas: call.gas ?? devnetUserOpGas,
    paymasterAndData: call.paymasterAndData,
  });
  const signed = await signUserOp(chain.publicClient, stack.entryPoint, owner, unsigned);
  return { ...signed, sender };
}

/** Polls `check` until it returns a value (not undefined), a bounded number of times. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  attempts = 200,
): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** The paymaster's deposit in the EntryPoint: what every sponsored operation is paid from. */
export function paymasterDeposit(chain: DevChain, stack: DevnetStack): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.entryPoint,
    abi: entryPoint07Abi,
    functionName: "balanceOf",
    args: [stack.paymaster],
  });
}

/** GET /blockchain/chains/:chainId/parity as an operator reads it (the fields the tests check). */
export interface ChainParity {
  entryPointDeposit: string | null;
  tanks: string;
  openReservations: string;
  promised: string;
  depositCovers: boolean | null;
  operations: number;
  paidOnChain: string;
  billed: string;
  unattributed: string;
  unattributedCount: number;
  recentUnattributed: unknown[];
  inSync: boolean;
}

export async function chainParity(
  t: TestApp,
  token: string,
  chainId = DEVNET_CHAIN_ID,
): Promise<ChainParity> {
  const res = await t.request({ method: "GET", url: `/blockchain/chains/${chainId}/parity`, token });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/**
 * An operation from `owner`'s account calling `target` with `data`, authorized by the service for
 * exactly its gas limits (estimatedGas = their total) and paying the most the authorization
 * allows per gas (fees at its ceilings), as an honest client would build it.
 */
export async function authorizedUserOp(
  t: TestApp,
  p: Project,
  chain: DevChain,
  stack: DevnetStack,
  owner: LocalAccount,
  call: { target: Address; data: Hex; limits?: UserOpGas },
): Promise<{ auth: Authorization; userOp: PackedUserOperation; userOpHash: Hex; sender: Address }> {
  const chainId = chain.chainId;
  const limits = call.limits ?? devnetUserOpGas;
  const { sender, deployed } = await accountOf(chain, stack, owner);
  const auth = await authorize(t, p, {
    user: sender,
    target: call.target,
    selector: call.data.slice(0, 10) as Hex,
    estimatedGas: totalGas(limits),
    initCode: deployed ? undefined : accountInitCode(stack.accountFactory, owner.address),
    chainId,
  });
  const op = await userOpWith(chain, stack, owner, {
    target: call.target,
    data: call.data,
    paymasterAndData: auth.paymasterAndData,
    gas: gasFor(auth, limits),
  });
  return { auth, ...op };
}

export interface ServiceOnChain {
  chain: DevChain;
  stack: DevnetStack;
  t: TestApp;
  stop(): Promise<void>;
}

/**
 * A fresh anvil with the sponsorship stack (paymaster signer = the test app's key) and the
 * service configured for it: fees read from the chain, the given confirmation depth, and
 * `operator` allowed to read chain parity.
 */
export async function startServiceOnChain(options: {
  confirmations: number;
  operator?: string;
  now?: TestAppOptions["now"];
  /** More settings for the service (they win over the ones above). */
  env?: Record<string, string>;
}): Promise<ServiceOnChain> {
  const chain = await startChain();
  let stack: DevnetStack;
  let t: TestApp;
  try {
    stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
    t = await startTestApp({
      env: {
        CHAIN_14601_RPC_URL: chain.rpcUrl,
        CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
        CHAIN_14601_PAYMASTER_V08_ADDRESS: stack.v08.paymaster,
        CHAIN_14601_CONFIRMATIONS: String(options.confirmations),
        ...(options.operator ? { OPERATOR_EMAILS: options.operator } : {}),
        ...options.env,
      },
      feeOracle: "chain",
      now: options.now,
    });
  } catch (err) {
    // The caller never gets a handle to stop: a running anvil would keep the test file's process
    // alive until the file timeout (a CI run's deployment that timed out held one for 15 minutes).
    await chain.stop();
    throw err;
  }
  return {
    chain,
    stack,
    t,
    async stop() {
      await t.close();
      await chain.stop();
    },
  };
}

/**
 * A deposit watcher of `chain` writing to the test app's database, from block 0 with the given
 * confirmation depth; `overrides` replace any of its settings.
 */
export function depositWatcherOn(
  t: Pick<TestApp, "db">,
  chain: DevChain,
  confirmations: number,
  overrides: Partial<Parameters<typeof depositWatcher>[0]> = {},
): DepositWatcher {
  return depositWatcher({
    db: t.db,
    client: watcherClient(chain),
    chainId: chain.chainId,
    confirmations,
    startBlock: 0n,
    ...overrides,
  });
}

/**
 * The service's settlement watcher for a test chain, driven by hand with tick(): the v0.7 pair's,
 * or with `version: "0.8"` the v0.8 pair's (its own cursor; releases only its own reservations).
 */
export function settlementWatcherOn(
  s: Pick<ServiceOnChain, "chain" | "stack" | "t">,
  options: { confirmations: number; startBlock: bigint; releaseMarginSec?: number; version?: "0.7" | "0.8" },
): SettlementWatcher {
  const { version, ...rest } = options;
  const v08 = version === "0.8";
  return settlementWatcher({
    db: s.t.db,
    client: watcherClient(s.chain),
    chainId: s.chain.chainId,
    entryPoint: v08 ? s.stack.v08.entryPoint : s.stack.entryPoint,
    paymaster: v08 ? s.stack.v08.paymaster : s.stack.paymaster,
    ...(v08 ? { name: "settlement:0.8" as const, releases: "own" as const } : {}),
    ...rest,
  });
}
