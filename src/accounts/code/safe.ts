/**
 * A Safe runs what its singleton, its modules, its fallback handler and its guard say, so a
 * SafeProxy alone proves nothing. A Safe is sponsored when all of it is known:
 *
 * - the singleton (storage slot 0 of the SafeProxy) is Safe or SafeL2 1.4.1;
 * - the fallback handler is a Safe4337Module 0.3.0 serving the operation's EntryPoint (it is
 *   what answers validateUserOp and executeUserOp);
 * - the enabled modules are Safe4337Module 0.3.0 and nothing else (a module can make the Safe
 *   do anything);
 * - there is no guard (a guard runs its own code on every transaction).
 *
 * A counterfactual Safe is checked in its creation call: SafeProxyFactory 1.4.1's
 * `createProxyWithNonce` with a known singleton and a `setup` initializer that enables only
 * Safe4337Module 0.3.0 through SafeModuleSetup (directly, or as MultiSend delegatecalls, the
 * way permissionless builds it), sets it as fallback handler, and pays no one.
 */
import {
  type Address,
  decodeFunctionData,
  decodeFunctionResult,
  encodeFunctionData,
  getAddress,
  type Hex,
  isAddressEqual,
  keccak256,
  parseAbi,
  stringToBytes,
  zeroAddress,
} from "viem";
import { wordToAddress } from "./bytecode.ts";
import { type CodeCache, rpc, type SenderCodeClient } from "./reader.ts";

export interface SafeContext {
  client: SenderCodeClient;
  chainId: number;
  cache: CodeCache;
  entryPoint: Address;
}

const FALLBACK_HANDLER_SLOT = keccak256(stringToBytes("fallback_manager.handler.address"));
const GUARD_SLOT = keccak256(stringToBytes("guard_manager.guard.address"));
const SENTINEL: Address = "0x0000000000000000000000000000000000000001";
/** More modules than this is already more than the one a 4337 Safe needs. */
const MODULE_PAGE_SIZE = 10n;

const safeAbi = parseAbi([
  "function getModulesPaginated(address start, uint256 pageSize) view returns (address[] array, address next)",
  "function setup(address[] owners, uint256 threshold, address to, bytes data, address fallbackHandler, address paymentToken, uint256 payment, address paymentReceiver)",
  "function createProxyWithNonce(address singleton, bytes initializer, uint256 saltNonce) returns (address)",
  "function enableModules(address[] modules)",
  "function multiSend(bytes transactions)",
]);

/** Null when the deployed Safe is fully known; otherwise why not. */
export async function checkDeployedSafe(ctx: SafeContext, sender: Address): Promise<string | null> {
  const [handlerWord, guardWord, modules] = await Promise.all([
    rpc("eth_getStorageAt fallback handler", () =>
      ctx.client.getStorageAt({ address: sender, slot: FALLBACK_HANDLER_SLOT }),
    ),
    rpc("eth_getStorageAt guard", () => ctx.client.getStorageAt({ address: sender, slot: GUARD_SLOT })),
    rpc("getModulesPaginated", async () => {
      const data = encodeFunctionData({
        abi: safeAbi,
        functionName: "getModulesPaginated",
        args: [SENTINEL, MODULE_PAGE_SIZE],
      });
      const out = await ctx.client.call({ to: sender, data });
      return decodeFunctionResult({
        abi: safeAbi,
        functionName: "getModulesPaginated",
        data: out.data ?? "0x",
      });
    }),
  ]);
  const guard = wordToAddress(guardWord ?? "0x");
  if (guard === null || !isAddressEqual(guard, zeroAddress)) return `the Safe has a guard (${guardWord})`;
  const handler = wordToAddress(handlerWord ?? "0x");
  if (handler === null) return "the Safe's fallback handler slot does not hold an address";
  const handlerProblem = await checkSafe4337Module(ctx, handler, "fallback handler");
  if (handlerProblem) return handlerProblem;
  const [enabled, next] = modules;
  if (!isAddressEqual(next, SENTINEL) && !isAddressEqual(next, zeroAddress)) {
    return `the Safe has more than ${MODULE_PAGE_SIZE} modules`;
  }
  return checkModules(ctx, enabled);
}

/** Null when `factoryData` creates a Safe that will be fully known; otherwise why not. */
export async function checkSafeCreation(ctx: SafeContext, factoryData: Hex): Promise<string | null> {
  const create = decodeOrNull(factoryData);
  if (create?.functionName !== "createProxyWithNonce") {
    return "the SafeProxyFactory call is not createProxyWithNonce(address,bytes,uint256)";
  }
  const [singleton, initializer] = create.args;
  const singletonCode = await ctx.cache.codeOf(ctx.client, ctx.chainId, singleton);
  if (singletonCode.kind !== "known" || singletonCode.match.reference.role !== "safe-singleton") {
    return `the Safe's singleton ${singleton} is not Safe 1.4.1`;
  }
  const setup = decodeOrNull(initializer);
  if (setup?.functionName !== "setup") return "the Safe's initializer is not setup(...)";
  const [, , to, data, fallbackHandler, paymentToken, payment, paymentReceiver] = setup.args;
  if (
    payment !== 0n ||
    !isAddressEqual(paymentToken, zeroAddress) ||
    !isAddressEqual(paymentReceiver, zeroAddress)
  ) {
    return "the Safe's setup makes a payment";
  }
  const handlerProblem = await checkSafe4337Module(ctx, fallbackHandler, "fallback handler");
  if (handlerProblem) return handlerProblem;
  const modules = await modulesEnabledBySetup(ctx, to, data);
  if (typeof modules === "string") return modules;
  return checkModules(ctx, modules);
}

/** The modules a setup's delegatecall enables, or why it is not a known way of enabling them. */
async function modulesEnabledBySetup(ctx: SafeContext, to: Address, data: Hex): Promise<Address[] | string> {
  const target = await ctx.cache.codeOf(ctx.client, ctx.chainId, to);
  const id = target.kind === "known" ? target.match.reference.id : null;
  if (id === "safe-module-setup-0.3.0") {
    const call = decodeOrNull(data);
    if (call?.functionName !== "enableModules")
      return "the Safe's setup call is not enableModules(address[])";
    return [...call.args[0]];
  }
  if (id !== "safe-multi-send-1.4.1")
    return `the Safe's setup delegatecalls ${to}, which is not SafeModuleSetup or MultiSend`;
  const call = decodeOrNull(data);
  if (call?.functionName !== "multiSend")
    return "the Safe's setup call into MultiSend is not multiSend(bytes)";
  const modules: Address[] = [];
  for (const tx of parseMultiSend(call.args[0])) {
    if (typeof tx === "string") return tx;
    const inner = await modulesEnabledBySetup(ctx, tx.to, tx.data);
    if (typeof inner === "string") return inner;
    if (tx.operation !== 1 || tx.valueWei !== 0n)
      return "the Safe's setup makes a call other than enableModules";
    modules.push(...inner);
  }
  return modules;
}

type MultiSendTx = { operation: number; to: Address; valueWei: bigint; data: Hex };

/** MultiSend's packed transactions: operation (1 byte), to (20), value (32), length (32), data. */
function* parseMultiSend(transactions: Hex): Generator<MultiSendTx | string> {
  const hex = transactions.slice(2);
  let i = 0;
  while (i < hex.length) {
    if (i + 2 * 85 > hex.length) return yield "the Safe's setup MultiSend transactions are truncated";
    const operation = Number.parseInt(hex.slice(i, i + 2), 16);
    const to = getAddress(`0x${hex.slice(i + 2, i + 42)}`);
    const valueWei = BigInt(`0x${hex.slice(i + 42, i + 106)}`);
    const length = BigInt(`0x${hex.slice(i + 106, i + 170)}`);
    const end = BigInt(i + 170) + 2n * length;
    if (end > BigInt(hex.length)) return yield "the Safe's setup MultiSend transactions are truncated";
    yield { operation, to, valueWei, data: `0x${hex.slice(i + 170, Number(end))}` };
    i = Number(end);
  }
}

async function checkModules(ctx: SafeContext, modules: readonly Address[]): Promise<string | null> {
  if (modules.length === 0) return "the Safe enables no Safe4337Module";
  for (const module of modules) {
    const problem = await checkSafe4337Module(ctx, module, "module");
    if (problem) return problem;
  }
  return null;
}

async function checkSafe4337Module(ctx: SafeContext, address: Address, what: string): Promise<string | null> {
  const code = await ctx.cache.codeOf(ctx.client, ctx.chainId, address);
  if (code.kind !== "known" || code.match.reference.id !== "safe-4337-module-0.3.0") {
    return `the Safe's ${what} ${address} is not a known module (only Safe4337Module 0.3.0 is)`;
  }
  const served = wordToAddress(code.match.immutables.entryPoint ?? "0x");
  if (served === null || !isAddressEqual(served, ctx.entryPoint)) {
    return `the Safe's ${what} serves EntryPoint ${served}, not ${ctx.entryPoint}`;
  }
  return null;
}

function decodeOrNull(data: Hex) {
  try {
    return decodeFunctionData({ abi: safeAbi, data });
  } catch {
    return null;
  }
}
