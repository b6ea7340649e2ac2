/**
 * An ERC-7579 account runs its modules' code as well as its own: an executor can make it call
 * anything, a validator decides what it signs, a hook runs on every call, and a fallback handler
 * answers selectors the account lacks. OpenZeppelin's AccountERC7579 keeps its modules in sets
 * it does not enumerate, but announces every change with ModuleInstalled / ModuleUninstalled
 * (ERC-7579's events, emitted by the account itself), so the installed set is the replay of the
 * account's own logs.
 *
 * Sponsored only when every module still installed is on KNOWN_ERC7579_MODULES, which is empty:
 * in practice, when none is. The plain AccountERC7579 has no hook (the hooked variant is other
 * code, so it never matches the registry). Fallback handlers are refused too, although only the
 * account's own selectors are decoded: the check costs nothing more.
 *
 * The logs are read from the earliest block: a provider that caps eth_getLogs' range makes this
 * "unavailable", never a guess.
 */
import { type Address, decodeAbiParameters, type Hex, keccak256, stringToBytes } from "viem";
import { KNOWN_ERC7579_MODULES } from "./implementations.ts";
import { rpc, type SenderCodeClient } from "./reader.ts";

const MODULE_INSTALLED = keccak256(stringToBytes("ModuleInstalled(uint256,address)"));
const MODULE_UNINSTALLED = keccak256(stringToBytes("ModuleUninstalled(uint256,address)"));
const MODULE_TYPES: Record<string, string> = {
  "1": "validator",
  "2": "executor",
  "3": "fallback",
  "4": "hook",
};

/** Null when the account has no module that is not known; otherwise which one it has. */
export async function checkModularAccount(
  client: SenderCodeClient,
  account: Address,
): Promise<string | null> {
  const logs = await rpc("eth_getLogs ERC-7579 modules", () =>
    client.getLogs({ address: account, fromBlock: "earliest", toBlock: "latest" }),
  );
  const installed = new Map<string, number>();
  for (const log of logs) {
    const topic = log.topics[0];
    if (topic !== MODULE_INSTALLED && topic !== MODULE_UNINSTALLED) continue;
    const module = decodeModule(log.data);
    if (module === null) return "the account emitted a module event that is not ERC-7579's";
    const count = installed.get(module) ?? 0;
    installed.set(module, count + (topic === MODULE_INSTALLED ? 1 : -1));
  }
  for (const [key, count] of installed) {
    const [type = "", module = ""] = key.split(":");
    if (count > 0 && !KNOWN_ERC7579_MODULES.has(module)) {
      return `the account has the ${MODULE_TYPES[type] ?? `type ${type}`} module ${module} installed, which is not a known module`;
    }
  }
  return null;
}

/** "<type>:<module>" from the events' data, abi.encode(uint256 moduleTypeId, address module). */
function decodeModule(data: Hex): string | null {
  try {
    const [type, module] = decodeAbiParameters([{ type: "uint256" }, { type: "address" }], data);
    return `${type}:${module.toLowerCase()}`;
  } catch {
    return null;
  }
}
