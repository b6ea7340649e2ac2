/**
 * What the service knows about each account implementation and factory in the generated
 * registry (known-code.ts): which callData encodings the code really has, how it may be reached
 * (proxy, clone, EIP-7702 delegation), which EntryPoint it serves, and what its factory's
 * creation call looks like. The registry says "this is that code"; this file says what that
 * code means. test/chain/account-code.test.ts checks that every id here is in the registry with
 * the role assumed.
 */
import type { Address, Hex } from "viem";
import type { AccountEncoding } from "../calls.ts";
import { type CodeReference, matchCode } from "./bytecode.ts";
import { KNOWN_CODE } from "./known-code.ts";

export interface KnownImplementation {
  /** e.g. "simple-account-v0.7", "safe-1.4.1+safe4337module-0.3.0", "oz-account-erc7579". */
  id: string;
  /** A human name for docs and errors. */
  name: string;
  /** The callData encodings (accounts/calls.ts) this implementation really has; any other is refused. */
  encodings: readonly AccountEncoding[];
  /**
   * Whether its execute(address,uint256,bytes) (selector 0xb61d27f6) is the real SimpleAccount-style
   * single call: call authorizations (POST /sponsor/authorize, mode 0) need it.
   */
  singleExecute: boolean;
}

/** How the sender reaches the implementation's code. */
export type Via = "deployed" | "erc1967" | "erc1167" | "safe-proxy" | "eip7702" | "factory";

interface ImplementationRule {
  implementation: KnownImplementation;
  /** The registry entry whose code this is (Safe: the singleton's; the Safe rule checks the rest). */
  codeIds: readonly string[];
  /** The ways a sender may run this code; any other is refused (an unusable or unaudited setup). */
  via: readonly Exclude<Via, "factory">[];
  /** The EntryPoint it serves: a constant in its code, or its `entryPoint` immutable. */
  entryPoint: Address | "immutable" | "safe4337-module";
  /** ERC-7579 accounts: their installed modules are checked too. */
  modular?: true;
}

const ENTRY_POINT_V07: Address = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
const ENTRY_POINT_V08: Address = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108";

export const IMPLEMENTATION_RULES: readonly ImplementationRule[] = [
  {
    implementation: {
      id: "simple-account-v0.7",
      name: "SimpleAccount (EntryPoint v0.7)",
      encodings: ["single_execute", "batch_targets_values_datas"],
      singleExecute: true,
    },
    codeIds: ["simple-account-v0.7"],
    // Its constructor disables the initializer, so only a proxy can have an owner.
    via: ["erc1967"],
    entryPoint: "immutable",
  },
  {
    implementation: {
      id: "simple-account-v0.8",
      name: "SimpleAccount (EntryPoint v0.8)",
      encodings: ["single_execute", "batch_calls"],
      singleExecute: true,
    },
    codeIds: ["simple-account-v0.8"],
    via: ["erc1967"],
    entryPoint: "immutable",
  },
  {
    implementation: {
      id: "simple-7702-account-v0.8",
      name: "Simple7702Account (EntryPoint v0.8, EIP-7702)",
      encodings: ["single_execute", "batch_calls"],
      singleExecute: true,
    },
    codeIds: ["simple-7702-account-v0.8"],
    // Its signer is address(this): only an EOA that delegates to it can sign for it.
    via: ["eip7702"],
    entryPoint: ENTRY_POINT_V08,
  },
  {
    implementation: {
      id: "safe-1.4.1+safe4337module-0.3.0",
      name: "Safe 1.4.1 with the Safe4337Module 0.3.0",
      encodings: ["safe_call", "safe_multisend"],
      singleExecute: false,
    },
    codeIds: ["safe-1.4.1", "safe-l2-1.4.1"],
    via: ["safe-proxy"],
    entryPoint: "safe4337-module",
  },
  {
    implementation: {
      id: "oz-account-erc7579",
      name: "OpenZeppelin AccountERC7579 (Modular7579Account)",
      encodings: ["erc7579_single", "erc7579_batch"],
      singleExecute: false,
    },
    codeIds: ["oz-account-erc7579"],
    via: ["erc1167"],
    // Modular7579Account overrides entryPoint() with v0.7 as a constant.
    entryPoint: ENTRY_POINT_V07,
    modular: true,
  },
];

export interface FactoryRule {
  codeId: string;
  kind: "simple" | "safe";
  /** simple: the account registry id its `accountImplementation` immutable must be, and how it deploys it. */
  implementationCodeId?: string;
  deploysVia?: "erc1967" | "erc1167";
}

/** createAccount(address owner, uint256 salt) */
export const CREATE_ACCOUNT_SELECTOR: Hex = "0x5fbfb9cf";

export const FACTORY_RULES: readonly FactoryRule[] = [
  {
    codeId: "simple-account-factory-v0.7",
    kind: "simple",
    implementationCodeId: "simple-account-v0.7",
    deploysVia: "erc1967",
  },
  {
    codeId: "simple-account-factory-v0.8",
    kind: "simple",
    implementationCodeId: "simple-account-v0.8",
    deploysVia: "erc1967",
  },
  {
    codeId: "oz-account-erc7579-factory",
    kind: "simple",
    implementationCodeId: "oz-account-erc7579",
    deploysVia: "erc1167",
  },
  { codeId: "safe-proxy-factory-1.4.1", kind: "safe" },
];

/**
 * ERC-7579 modules (validators, executors, fallback handlers, hooks) known to do nothing the
 * account's own encodings do not show. Empty: an account with any installed module is refused.
 */
export const KNOWN_ERC7579_MODULES: ReadonlySet<string> = new Set<string>();

export function ruleForCode(codeId: string): ImplementationRule | undefined {
  return IMPLEMENTATION_RULES.find((r) => r.codeIds.includes(codeId));
}

export function factoryRule(codeId: string): FactoryRule | undefined {
  return FACTORY_RULES.find((r) => r.codeId === codeId);
}

/** Identifies runtime code against the generated registry (see bytecode.ts). */
export function identify(code: Uint8Array, references: readonly CodeReference[] = KNOWN_CODE) {
  return matchCode(code, references);
}
