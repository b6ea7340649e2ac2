/**
 * Recognising runtime code, pure: no I/O, no clock.
 *
 * A release contract's runtime differs per deployment only in its immutables (SimpleAccount's
 * EntryPoint, a factory's account implementation), which solc writes as the 32-byte arguments of
 * PUSH32 instructions. A reference is therefore the runtime with those arguments zeroed (its
 * "masked" code), the offsets of the arguments by name, and the keccak of the masked code: a
 * candidate matches when it has the same length and the same keccak once the same windows are
 * zeroed, and what it holds in the windows is read back as its immutables.
 */
import { type Address, getAddress, type Hex, keccak256 } from "viem";

export type CodeRole =
  /** A smart account implementation, run directly, behind a proxy or as an EIP-7702 delegate. */
  | "account"
  /** OpenZeppelin's ERC1967Proxy, as SimpleAccountFactory deploys accounts. */
  | "erc1967-proxy"
  /** Safe's SafeProxy (the singleton in storage slot 0). */
  | "safe-proxy"
  | "safe-singleton"
  /** A Safe module or fallback handler (Safe4337Module). */
  | "safe-module"
  /** Contracts a Safe's setup may delegatecall: SafeModuleSetup, MultiSend. */
  | "safe-setup"
  | "factory";

export interface CodeReference {
  id: string;
  role: CodeRole;
  /** Where the reference runtime comes from: package, version, artifact. */
  source: string;
  lengthBytes: number;
  /** keccak256 of the runtime with every immutable's 32-byte window zeroed. */
  maskedKeccak: Hex;
  /** Byte offsets of each immutable's 32-byte windows in the runtime, by the immutable's name. */
  immutables: Readonly<Record<string, readonly number[]>>;
}

export interface CodeMatch {
  reference: CodeReference;
  /** Each immutable's value as the candidate holds it (the last 20 bytes when it is an address). */
  immutables: Record<string, Hex>;
}

const PUSH1 = 0x60;
const PUSH32 = 0x7f;

/**
 * Offsets of the arguments of every PUSH32 in `code` whose argument `pick` selects, walking the
 * instructions so that bytes inside other pushes' data are never read as opcodes.
 */
export function push32Arguments(code: Uint8Array, pick: (argument: Uint8Array) => boolean): number[] {
  const offsets: number[] = [];
  for (let pc = 0; pc < code.length; pc++) {
    const op = code[pc]!;
    if (op < PUSH1 || op > PUSH32) continue;
    const size = op - PUSH1 + 1;
    if (op === PUSH32 && pc + 33 <= code.length && pick(code.subarray(pc + 1, pc + 33))) {
      offsets.push(pc + 1);
    }
    pc += size;
  }
  return offsets;
}

/** The code with the given 32-byte windows zeroed (a copy). */
export function maskWindows(code: Uint8Array, offsets: Iterable<number>): Uint8Array {
  // A copy whatever the input: Buffer's slice() is a view, and masking it would zero the caller's code.
  const masked = new Uint8Array(code);
  for (const offset of offsets) masked.fill(0, offset, offset + 32);
  return masked;
}

/** The reference `code` matches, with its immutables read, or null. */
export function matchCode(code: Uint8Array, references: readonly CodeReference[]): CodeMatch | null {
  for (const reference of references) {
    if (reference.lengthBytes !== code.length) continue;
    const offsets = Object.values(reference.immutables).flat();
    if (keccak256(maskWindows(code, offsets)) !== reference.maskedKeccak) continue;
    return { reference, immutables: readImmutables(code, reference) };
  }
  return null;
}

function readImmutables(code: Uint8Array, reference: CodeReference): Record<string, Hex> {
  const values: Record<string, Hex> = {};
  for (const [name, offsets] of Object.entries(reference.immutables)) {
    const first = offsets[0];
    if (first === undefined) continue;
    values[name] = bytesToHex(code.subarray(first, first + 32));
  }
  return values;
}

/**
 * The address a 32-byte word holds, or null when its top 12 bytes are not zero (then it is not
 * an ABI-encoded address, and nothing should be read as one).
 */
export function wordToAddress(word: Hex): Address | null {
  if (!/^0x0{24}[0-9a-fA-F]{40}$/.test(word)) return null;
  return getAddress(`0x${word.slice(26)}`);
}

/** EIP-1167 minimal proxy runtime (45 bytes): the implementation sits at bytes 10..30. */
const ERC1167_PREFIX = "363d3d373d3d3d363d73";
const ERC1167_SUFFIX = "5af43d82803e903d91602b57fd5bf3";

/** The implementation of an EIP-1167 minimal proxy, or null when `code` is not one. */
export function erc1167Implementation(code: Hex): Address | null {
  const hex = code.slice(2).toLowerCase();
  if (hex.length !== 90 || !hex.startsWith(ERC1167_PREFIX) || !hex.endsWith(ERC1167_SUFFIX)) return null;
  return getAddress(`0x${hex.slice(20, 60)}`);
}

/** EIP-7702 delegation designator: 0xef0100 then the delegate's 20 bytes. */
export function eip7702Delegate(code: Hex): Address | null {
  const hex = code.slice(2).toLowerCase();
  if (hex.length !== 46 || !hex.startsWith("ef0100")) return null;
  return getAddress(`0x${hex.slice(6)}`);
}

export function delegationDesignator(delegate: Address): Hex {
  return `0xef0100${delegate.slice(2).toLowerCase()}`;
}

export function hexToBytes(hex: Hex): Uint8Array {
  return Buffer.from(hex.slice(2), "hex");
}

function bytesToHex(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes).toString("hex")}`;
}
