import { type AbiFunction, toFunctionSelector, toFunctionSignature } from "viem";

/**
 * The functions of an uploaded ABI, as naming needs them: selector and canonical signature
 * (`transfer(address,uint256)`, tuples expanded), computed with viem from each `function` entry.
 * Pure: no I/O. Entries of other types (events, errors, the constructor) are skipped. viem formats
 * whatever type string it is given (`uint257` included), so each parameter type is checked here
 * first: a typo is a refusal, not a name that matches no call.
 */
export interface NamedFunction {
  selector: string;
  signature: string;
}

export type ParsedAbi = { kind: "ok"; functions: NamedFunction[] } | { kind: "invalid"; detail: string };

/** The most functions one contract keeps (an ERC-20 has 9; large deployed ABIs, a few hundred). */
export const MAX_FUNCTIONS = 1000;

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const ARRAYS = /^((?:\[[1-9][0-9]{0,5}\]|\[\])*)$/;

export function functionsOf(abi: unknown[]): ParsedAbi {
  const out: NamedFunction[] = [];
  const seen = new Set<string>();
  for (const [i, entry] of abi.entries()) {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      return { kind: "invalid", detail: `entry ${i} is not an object` };
    }
    const item = entry as { type?: unknown; name?: unknown; inputs?: unknown };
    // ABIs from old compilers omit `type` on functions.
    if (item.type !== undefined && item.type !== "function") continue;
    if (typeof item.name !== "string" || !IDENTIFIER.test(item.name)) {
      return { kind: "invalid", detail: `entry ${i} has no valid function name` };
    }
    const inputs = item.inputs ?? [];
    const problem = Array.isArray(inputs)
      ? inputs.map(parameterProblem).find(Boolean)
      : "inputs is not an array";
    if (problem) return { kind: "invalid", detail: `function ${item.name} (entry ${i}): ${problem}` };
    const fn = { type: "function", name: item.name, inputs, outputs: [], stateMutability: "nonpayable" };
    const selector = toFunctionSelector(fn as unknown as AbiFunction);
    if (seen.has(selector)) continue;
    seen.add(selector);
    out.push({ selector, signature: toFunctionSignature(fn as unknown as AbiFunction) });
    if (out.length > MAX_FUNCTIONS)
      return { kind: "invalid", detail: `at most ${MAX_FUNCTIONS} functions per contract` };
  }
  if (out.length === 0) return { kind: "invalid", detail: "the ABI has no function" };
  return { kind: "ok", functions: out };
}

/** Why a parameter is not a valid ABI parameter, or undefined when it is. */
function parameterProblem(p: unknown, depth = 0): string | undefined {
  if (depth > 8) return "tuples nested too deep";
  if (typeof p !== "object" || p === null) return "a parameter is not an object";
  const { type, components } = p as { type?: unknown; components?: unknown };
  if (typeof type !== "string") return "a parameter has no type";
  if (type.startsWith("tuple")) {
    if (!ARRAYS.test(type.slice(5))) return `'${type.slice(0, 40)}' is not an ABI type`;
    if (!Array.isArray(components)) return "a tuple has no components";
    return components.map((c) => parameterProblem(c, depth + 1)).find(Boolean);
  }
  const base = /^([a-z]+)([0-9]*)(.*)$/.exec(type);
  if (!base || !ARRAYS.test(base[3]!) || !elementary(base[1]!, base[2]!)) {
    return `'${type.slice(0, 40)}' is not an ABI type`;
  }
  return undefined;
}

function elementary(name: string, size: string): boolean {
  const n = size === "" ? null : Number(size);
  if (size.startsWith("0")) return false;
  switch (name) {
    case "address":
    case "bool":
    case "string":
    case "function":
      return n === null;
    case "bytes":
      return n === null || (n >= 1 && n <= 32);
    case "uint":
    case "int":
      return n === null || (n >= 8 && n <= 256 && n % 8 === 0);
    default:
      return false;
  }
}
