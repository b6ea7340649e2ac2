/**
 * The chain reads sender-code resolution makes, with the code of contracts cached by address.
 *
 * A contract's runtime code never changes once deployed (SELFDESTRUCT only clears code created
 * in the same transaction since Cancun, EIP-6780), so what it was identified as is kept for
 * good, in a bounded LRU. Two kinds of code are never kept: none (an address may be deployed
 * later) and an EIP-7702 delegation designator (the EOA may delegate elsewhere at any time).
 */
import { type Address, type Hex, keccak256 } from "viem";
import { Lru } from "../../api-keys/lru.ts";
import { type CodeMatch, eip7702Delegate, erc1167Implementation, hexToBytes } from "./bytecode.ts";
import { identify } from "./implementations.ts";

/**
 * What resolution needs from a chain client: a subset of viem's PublicClient, so
 * `createChainClient` (src/chains/rpc.ts) and a test's client both fit.
 */
export interface SenderCodeClient {
  getCode(args: { address: Address }): Promise<Hex | undefined>;
  getStorageAt(args: { address: Address; slot: Hex }): Promise<Hex | undefined>;
  call(args: { to: Address; data: Hex }): Promise<{ data?: Hex | undefined }>;
  getLogs(args: {
    address: Address;
    fromBlock: "earliest";
    toBlock: "latest";
  }): Promise<readonly { topics: readonly Hex[]; data: Hex }[]>;
}

export type CodeIdentity =
  | { kind: "none" }
  | { kind: "designator"; delegate: Address; codeHash: Hex }
  | { kind: "erc1167"; implementation: Address; codeHash: Hex }
  | { kind: "known"; match: CodeMatch; codeHash: Hex }
  | { kind: "unknown"; lengthBytes: number; codeHash: Hex };

/** A chain read failed: resolution answers "unavailable", never a verdict. */
export class ChainUnavailable extends Error {}

export async function rpc<T>(what: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw new ChainUnavailable(`${what}: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  }
}

export function classify(code: Hex | undefined): CodeIdentity {
  if (code === undefined || code === "0x") return { kind: "none" };
  const codeHash = keccak256(code);
  const delegate = eip7702Delegate(code);
  if (delegate) return { kind: "designator", delegate, codeHash };
  const implementation = erc1167Implementation(code);
  if (implementation) return { kind: "erc1167", implementation, codeHash };
  const bytes = hexToBytes(code);
  const match = identify(bytes);
  return match
    ? { kind: "known", match, codeHash }
    : { kind: "unknown", lengthBytes: bytes.length, codeHash };
}

export class CodeCache {
  readonly #identities: Lru<string, CodeIdentity>;

  constructor(capacity: number) {
    this.#identities = new Lru(capacity);
  }

  async codeOf(client: SenderCodeClient, chainId: number, address: Address): Promise<CodeIdentity> {
    const key = `${chainId}:${address.toLowerCase()}`;
    const cached = this.#identities.get(key);
    if (cached) return cached;
    const identity = classify(await rpc(`eth_getCode ${address}`, () => client.getCode({ address })));
    if (identity.kind !== "none" && identity.kind !== "designator") this.#identities.set(key, identity);
    return identity;
  }
}
