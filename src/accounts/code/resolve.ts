/**
 * What code an operation's sender will run, resolved before anything is signed (DESIGN.md §1b):
 * an account does what its code says, not what its callData's selector suggests, so calls are
 * decoded only with the encodings of a known implementation, and unknown code is refused with
 * `account_not_supported`.
 *
 * - Deployed sender: its code, through an ERC-1967 proxy (the implementation slot), an ERC-1167
 *   clone or a SafeProxy (singleton, modules, fallback handler and guard: safe.ts) to a known
 *   implementation; an ERC-7579 account also has no installed module (erc7579.ts).
 * - EIP-7702 sender: the delegate the operation's eip7702Auth installs, or else the one its
 *   designator names, must be a known 7702 implementation.
 * - Counterfactual sender: the factory must be known, its calldata its account-creation call,
 *   and the implementation it deploys known. An unknown factory is refused: its code runs in
 *   validation with the paymaster's money behind it.
 *
 * Every implementation's EntryPoint (a constant or an immutable in its code) must be the one
 * the operation is for. Code is matched by its masked keccak (bytecode.ts) against the registry
 * generated from the release packages (known-code.ts).
 */

import assert from "node:assert/strict";
import { type Address, type Hex, isAddress, isAddressEqual, keccak256, zeroHash } from "viem";
import { Lru } from "../../api-keys/lru.ts";
import { isEip7702InitCode } from "../../paymaster/digest.ts";
import { delegationDesignator, wordToAddress } from "./bytecode.ts";
import { checkModularAccount } from "./erc7579.ts";
import {
  CREATE_ACCOUNT_SELECTOR,
  factoryRule,
  type KnownImplementation,
  ruleForCode,
  type Via,
} from "./implementations.ts";
import { ChainUnavailable, CodeCache, type CodeIdentity, rpc, type SenderCodeClient } from "./reader.ts";
import { checkDeployedSafe, checkSafeCreation, type SafeContext } from "./safe.ts";

export type { KnownImplementation } from "./implementations.ts";
export type { SenderCodeClient } from "./reader.ts";

export interface SenderCodeQuery {
  chainId: number;
  /** The EntryPoint the operation is for. */
  entryPoint: Address;
  sender: Address;
  /** factory ‖ factoryData as the operation carries it, "0x" when none; may be the EIP-7702 marker. */
  initCode: Hex;
  /** EIP-7702 operations: the delegate the operation's eip7702Auth names (null if none). */
  eip7702Delegate: Address | null;
}

export type SenderCode =
  | {
      kind: "known";
      implementation: KnownImplementation;
      /**
       * What the paymaster checks against EXTCODEHASH(sender) during validation: the keccak256 of
       * the sender's runtime code when the operation validates (an EIP-7702 EOA:
       * keccak256(0xef0100 ‖ delegate)); zero for a counterfactual sender (its initCode is bound).
       */
      codeHash: Hex;
      via: Via;
    }
  | { kind: "refused"; code: "account_not_supported"; detail: string }
  /** A chain read failed: the caller answers 503. */
  | { kind: "unavailable"; detail: string };

export interface SenderCodeResolver {
  resolve(q: SenderCodeQuery): Promise<SenderCode>;
  /**
   * The cached verdict for a query while it is fresh, synchronously; undefined otherwise (then
   * call resolve). Authorize takes this path for every request after a sender's first.
   */
  peek?(q: SenderCodeQuery): SenderCode | undefined;
}

/**
 * How long a verdict is reused: the staleness window. A proxy's implementation, a 7702
 * delegation, a Safe's modules and handler, a 7579 account's modules and a sender's deployment
 * can all change on chain; for this long after a resolution the service may still act on what
 * it saw. The paymaster's on-chain EXTCODEHASH check bounds what a changed proxy can do.
 */
export const SENDER_CODE_TTL_MS = 60_000;
const DEFAULT_MAX_VERDICTS = 10_000;
const DEFAULT_MAX_CODES = 10_000;
/** Larger initCode is not a creation call of any known factory (a Safe's is about 600 bytes). */
const MAX_INIT_CODE_BYTES = 16 * 1024;
/** ERC-1967's implementation slot: keccak256("eip1967.proxy.implementation") − 1. */
const ERC1967_IMPLEMENTATION_SLOT: Hex = "0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc";
const HEX_BYTES = /^0x(?:[0-9a-fA-F]{2})*$/;

export interface ChainSenderCodeResolverOptions {
  /** The chain's JSON-RPC client (e.g. `createChainClient(chain.rpcUrl)`), or null for a chain not served. */
  client(chainId: number): SenderCodeClient | null;
  /** The clock, ms since the epoch; Date.now by default. */
  now?(): number;
  /** How long a verdict is reused; {@link SENDER_CODE_TTL_MS} by default. */
  ttlMs?: number;
  /** Bounds of the two caches (verdicts; code identities by address); 10,000 each by default. */
  maxVerdicts?: number;
  maxCodes?: number;
}

/**
 * Resolves over JSON-RPC. A verdict ("known" or "refused") is cached per (chain, EntryPoint,
 * sender, initCode, delegate) for ttlMs; "unavailable" never is. Concurrent resolutions of one
 * key share one promise, and a cached hit is a Map lookup.
 */
export function chainSenderCodeResolver(opts: ChainSenderCodeResolverOptions): SenderCodeResolver {
  const now = opts.now ?? Date.now;
  const ttlMs = opts.ttlMs ?? SENDER_CODE_TTL_MS;
  assert.ok(Number.isFinite(ttlMs) && ttlMs >= 0, "ttlMs must be a non-negative number");
  const verdicts = new Lru<string, { value: SenderCode; expiresAtMs: number }>(
    opts.maxVerdicts ?? DEFAULT_MAX_VERDICTS,
  );
  const codes = new CodeCache(opts.maxCodes ?? DEFAULT_MAX_CODES);
  const inflight = new Map<string, Promise<SenderCode>>();

  return {
    peek(q) {
      const key = verdictKey(q);
      const hit = key === null ? undefined : verdicts.get(key);
      return hit && hit.expiresAtMs > now() ? hit.value : undefined;
    },
    resolve(q) {
      // The hit path comes first and does no hashing or address parsing: it runs on every
      // authorization (measured: 14 µs per hit with validation and a keccak of the initCode
      // before the lookup, about 1 µs without). Only a valid query is ever cached, so an invalid
      // one cannot hit and is validated below.
      const key = verdictKey(q);
      const hit = key === null ? undefined : verdicts.get(key);
      if (hit && hit.expiresAtMs > now()) return Promise.resolve(hit.value);
      const invalid = invalidQuery(q);
      if (invalid || key === null)
        return Promise.resolve(refused(invalid ?? "the initCode is not hex bytes"));
      const pending = inflight.get(key);
      if (pending) return pending;
      const client = opts.client(q.chainId);
      if (client === null) return Promise.resolve(unavailable(`no RPC client for chain ${q.chainId}`));
      const run = resolveUncached({ client, codes, q })
        .then((value) => {
          if (value.kind !== "unavailable") verdicts.set(key, { value, expiresAtMs: now() + ttlMs });
          return value;
        })
        .finally(() => inflight.delete(key));
      inflight.set(key, run);
      return run;
    },
  };
}

interface Resolution {
  client: SenderCodeClient;
  codes: CodeCache;
  q: SenderCodeQuery;
}

async function resolveUncached(r: Resolution): Promise<SenderCode> {
  try {
    return await resolveSender(r);
  } catch (err) {
    if (err instanceof ChainUnavailable) return unavailable(err.message);
    // Not a chain failure: a bug. Answering 503 keeps a bug from turning into a signature.
    return unavailable(`sender code resolution failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function resolveSender(r: Resolution): Promise<SenderCode> {
  const { q } = r;
  const initCode = q.initCode.toLowerCase();
  // Both spellings EntryPoint v0.8 accepts: 0x7702 alone, or padded to 20 bytes (and more after).
  const marker = isEip7702InitCode(initCode as Hex);
  if (marker && initCode.length > 42) {
    return refused("the EIP-7702 initCode carries an initialization call, which no known account takes");
  }
  const sender = await codeOf(r, q.sender);
  if (q.eip7702Delegate !== null || marker || sender.kind === "designator") {
    if (!marker && initCode !== "0x")
      return refused("an EIP-7702 operation cannot also deploy through a factory");
    return resolveDelegated(r, sender);
  }
  if (sender.kind === "none") {
    if (initCode === "0x") return refused("the sender has no code and the operation deploys none");
    return resolveCounterfactual(r, initCode as Hex);
  }
  if (initCode !== "0x") return refused("the sender is already deployed, yet the operation carries initCode");
  return resolveDeployed(r, sender);
}

async function resolveDelegated(r: Resolution, sender: CodeIdentity): Promise<SenderCode> {
  if (sender.kind !== "none" && sender.kind !== "designator") {
    return refused("the sender is a contract, not an EOA that EIP-7702 can delegate");
  }
  const delegate = r.q.eip7702Delegate ?? (sender.kind === "designator" ? sender.delegate : null);
  if (delegate === null)
    return refused("the operation has the EIP-7702 marker but no delegation, on chain or in eip7702Auth");
  const code = await codeOf(r, delegate);
  if (code.kind !== "known")
    return refused(`the EIP-7702 delegate ${delegate} is not a known implementation (${describe(code)})`);
  const codeHash = keccak256(delegationDesignator(delegate));
  return acceptImplementation(r, code, "eip7702", codeHash);
}

async function resolveDeployed(
  r: Resolution,
  sender: Exclude<CodeIdentity, { kind: "none" }>,
): Promise<SenderCode> {
  const { q } = r;
  if (sender.kind === "erc1167") {
    const implementation = await codeOf(r, sender.implementation);
    if (implementation.kind !== "known") {
      return refused(
        `the clone's implementation ${sender.implementation} is not known (${describe(implementation)})`,
      );
    }
    return acceptImplementation(r, implementation, "erc1167", sender.codeHash);
  }
  if (sender.kind !== "known") return refused(`the sender's code is not known (${describe(sender)})`);
  const role = sender.match.reference.role;
  if (role === "erc1967-proxy") {
    const word = await rpc("eth_getStorageAt ERC-1967 implementation", () =>
      r.client.getStorageAt({ address: q.sender, slot: ERC1967_IMPLEMENTATION_SLOT }),
    );
    const address = wordToAddress(word ?? "0x");
    if (address === null) return refused("the ERC-1967 implementation slot does not hold an address");
    const implementation = await codeOf(r, address);
    if (implementation.kind !== "known") {
      return refused(`the proxy's implementation ${address} is not known (${describe(implementation)})`);
    }
    return acceptImplementation(r, implementation, "erc1967", sender.codeHash);
  }
  if (role === "safe-proxy") {
    const word = await rpc("eth_getStorageAt Safe singleton", () =>
      r.client.getStorageAt({ address: q.sender, slot: zeroHash }),
    );
    const address = wordToAddress(word ?? "0x");
    const singleton = address === null ? null : await codeOf(r, address);
    if (singleton?.kind !== "known") return refused(`the Safe's singleton ${address} is not known`);
    return acceptImplementation(r, singleton, "safe-proxy", sender.codeHash);
  }
  return acceptImplementation(r, sender, "deployed", sender.codeHash);
}

async function resolveCounterfactual(r: Resolution, initCode: Hex): Promise<SenderCode> {
  if (initCode.length < 42) return refused("the initCode is shorter than a factory address");
  const factory = `0x${initCode.slice(2, 42)}` as Address;
  const factoryData = `0x${initCode.slice(42)}` as Hex;
  const code = await codeOf(r, factory);
  const rule = code.kind === "known" ? factoryRule(code.match.reference.id) : undefined;
  if (code.kind !== "known" || rule === undefined) {
    return refused(`the factory ${factory} is not a known account factory (${describe(code)})`);
  }
  if (rule.kind === "safe") {
    const problem = await checkSafeCreation(safeContext(r), factoryData);
    if (problem) return refused(problem);
    return known("safe-1.4.1", "factory", zeroHash);
  }
  // createAccount(address owner, uint256 salt), exactly: selector, a clean address word, a salt.
  if (factoryData.length !== 2 + 2 * (4 + 64) || factoryData.slice(0, 10) !== CREATE_ACCOUNT_SELECTOR) {
    return refused(`the factory call is not ${rule.codeId}'s createAccount(address,uint256)`);
  }
  if (wordToAddress(`0x${factoryData.slice(10, 74)}`) === null)
    return refused("createAccount's owner is not an address");
  const implementationAddress = wordToAddress(code.match.immutables.accountImplementation ?? "0x");
  const implementation = implementationAddress === null ? null : await codeOf(r, implementationAddress);
  if (implementation?.kind !== "known" || implementation.match.reference.id !== rule.implementationCodeId) {
    return refused(
      `the factory's account implementation ${implementationAddress} is not ${rule.implementationCodeId}`,
    );
  }
  const accepted = await acceptImplementation(r, implementation, rule.deploysVia!, zeroHash, { fresh: true });
  return accepted.kind === "known" ? { ...accepted, via: "factory" } : accepted;
}

/**
 * The verdict on reaching a known implementation's code `via` a route: the route must be one
 * the implementation is used through, it must serve the operation's EntryPoint, and a Safe's or
 * a modular account's configuration must be known too. `fresh`: a counterfactual account, which
 * has no configuration yet beyond what its creation call (already checked) sets.
 */
async function acceptImplementation(
  r: Resolution,
  code: Extract<CodeIdentity, { kind: "known" }>,
  via: Exclude<Via, "factory">,
  codeHash: Hex,
  options: { fresh?: boolean } = {},
): Promise<SenderCode> {
  const id = code.match.reference.id;
  const rule = ruleForCode(id);
  if (rule === undefined) return refused(`${id} is not an account implementation`);
  const name = rule.implementation.name;
  if (!rule.via.includes(via)) return refused(`${name} is not supported behind ${via}`);
  if (rule.entryPoint === "safe4337-module") {
    if (!options.fresh) {
      const problem = await checkDeployedSafe(safeContext(r), r.q.sender);
      if (problem) return refused(problem);
    }
  } else {
    const served =
      rule.entryPoint === "immutable"
        ? wordToAddress(code.match.immutables.entryPoint ?? "0x")
        : rule.entryPoint;
    if (served === null || !isAddressEqual(served, r.q.entryPoint)) {
      return refused(`${name} serves EntryPoint ${served}, not ${r.q.entryPoint}`);
    }
  }
  if (rule.modular && !options.fresh) {
    const problem = await checkModularAccount(r.client, r.q.sender);
    if (problem) return refused(problem);
  }
  return { kind: "known", implementation: rule.implementation, codeHash, via };
}

function known(codeId: string, via: Via, codeHash: Hex): SenderCode {
  const rule = ruleForCode(codeId);
  assert.ok(rule, `no implementation rule for ${codeId}`);
  return { kind: "known", implementation: rule.implementation, codeHash, via };
}

function safeContext(r: Resolution): SafeContext {
  return { client: r.client, chainId: r.q.chainId, cache: r.codes, entryPoint: r.q.entryPoint };
}

function codeOf(r: Resolution, address: Address): Promise<CodeIdentity> {
  return r.codes.codeOf(r.client, r.q.chainId, address);
}

function describe(code: CodeIdentity): string {
  switch (code.kind) {
    case "none":
      return "no code";
    case "designator":
      return `an EIP-7702 delegation to ${code.delegate}`;
    case "erc1167":
      return `an ERC-1167 clone of ${code.implementation}`;
    case "known":
      return code.match.reference.id;
    case "unknown":
      return `${code.lengthBytes} bytes, keccak256 ${code.codeHash}`;
  }
}

/** Callers pass what a client sent: check the shape before any of it reaches a key or an RPC. */
/**
 * The cache key of a query: chain, EntryPoint, sender, initCode and delegate. An initCode up to
 * 128 bytes (a SimpleAccount factory call is 88) is its own key; a longer one is keyed by its
 * keccak256. Null for an initCode that cannot be keyed (not a string, or long and not hex bytes).
 */
function verdictKey(q: SenderCodeQuery): string | null {
  const initCode = q.initCode;
  if (typeof initCode !== "string") return null;
  if (initCode.length <= 2 + 2 * 128) {
    return `${q.chainId}:${q.entryPoint}:${q.sender}:${initCode}:${q.eip7702Delegate}`.toLowerCase();
  }
  if (initCode.length > 2 + 2 * MAX_INIT_CODE_BYTES || !HEX_BYTES.test(initCode)) return null;
  const initKey = keccak256(initCode as Hex);
  return `${q.chainId}:${q.entryPoint}:${q.sender}:${initKey}:${q.eip7702Delegate}`.toLowerCase();
}

function invalidQuery(q: SenderCodeQuery): string | null {
  if (!isAddress(q.sender, { strict: false })) return "the sender is not an address";
  if (!isAddress(q.entryPoint, { strict: false })) return "the EntryPoint is not an address";
  if (typeof q.initCode !== "string" || !HEX_BYTES.test(q.initCode)) return "the initCode is not hex bytes";
  if (q.initCode.length > 2 + 2 * MAX_INIT_CODE_BYTES)
    return `the initCode is over ${MAX_INIT_CODE_BYTES} bytes`;
  if (q.eip7702Delegate !== null && !isAddress(q.eip7702Delegate, { strict: false })) {
    return "the EIP-7702 delegate is not an address";
  }
  return null;
}

function refused(detail: string): SenderCode {
  return { kind: "refused", code: "account_not_supported", detail };
}

function unavailable(detail: string): SenderCode {
  return { kind: "unavailable", detail };
}
