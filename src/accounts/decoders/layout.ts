/**
 * A walk over the offsets and lengths of an ABI encoding, checking that they are the ones a
 * canonical encoder writes: every dynamic value's offset points exactly where the previous one
 * ended, and the last one ends where the data does. It reads words, never copies data.
 *
 * Why before viem: viem follows offsets wherever they point, so offsets that all point at the
 * same large `bytes` make it decode that value again and again (it caps the total at 32 times
 * the input). A 128 KiB user operation built that way cost 300 ms of CPU to refuse, against
 * 5 ms for a legitimate one of the same size. With offsets in canonical order each byte is
 * decoded once, and the walk itself visits each head word once.
 */
import assert from "node:assert/strict";
import type { AbiParameter, Hex } from "viem";

/** True when `args` is laid out exactly as a canonical encoding of `params`, with nothing after. */
export function hasCanonicalLayout(params: readonly AbiParameter[], args: Hex): boolean {
  return layoutEnd(params.length, (i) => params[i]!, args, 0) === byteLength(args);
}

/**
 * Lays out `count` values (the components of a tuple or the elements of an array) from byte
 * `start` and returns where the last tail ends, or undefined when an offset or length is not
 * the canonical one or runs past the data.
 */
function layoutEnd(
  count: number,
  paramAt: (index: number) => AbiParameter,
  args: Hex,
  start: number,
): number | undefined {
  let headSize = 0;
  for (let i = 0; i < count; i++) headSize += inlineSize(paramAt(i));
  let head = start;
  let tail = start + headSize;
  if (tail > byteLength(args)) return undefined;
  for (let i = 0; i < count; i++) {
    const param = paramAt(i);
    if (!isDynamic(param)) {
      head += inlineSize(param);
      continue;
    }
    if (wordAt(args, head) !== BigInt(tail - start)) return undefined;
    const end = dynamicEnd(param, args, tail);
    if (end === undefined) return undefined;
    head += 32;
    tail = end;
  }
  return tail;
}

function dynamicEnd(param: AbiParameter, args: Hex, at: number): number | undefined {
  const remaining = byteLength(args) - at;
  if (param.type === "tuple") {
    const { components } = param as { components: readonly AbiParameter[] };
    return layoutEnd(components.length, (i) => components[i]!, args, at);
  }
  const length = wordAt(args, at);
  if (length === undefined) return undefined;
  if (param.type === "bytes" || param.type === "string") {
    const padded = ((length + 31n) / 32n) * 32n;
    return padded <= BigInt(remaining - 32) ? at + 32 + Number(padded) : undefined;
  }
  const element = arrayElement(param);
  assert.ok(element, `unsupported ABI type ${param.type}`);
  // Each element takes at least one word of head, so a length the data cannot hold is refused
  // before the loop runs.
  if (length * BigInt(inlineSize(element)) > BigInt(remaining - 32)) return undefined;
  return layoutEnd(Number(length), () => element, args, at + 32);
}

/** The element type of a dynamic array `T[]`; fixed-size arrays are not used by any account here. */
function arrayElement(param: AbiParameter): AbiParameter | undefined {
  if (!param.type.endsWith("[]")) return undefined;
  return { ...param, type: param.type.slice(0, -2) } as AbiParameter;
}

function isDynamic(param: AbiParameter): boolean {
  assert.ok(!/\[\d+\]$/.test(param.type), `fixed-size arrays are not supported: ${param.type}`);
  if (param.type === "bytes" || param.type === "string" || param.type.endsWith("[]")) return true;
  if (param.type !== "tuple") return false;
  return (param as { components: readonly AbiParameter[] }).components.some(isDynamic);
}

/** Bytes a value takes in its enclosing head: one offset word if dynamic, else its encoding. */
function inlineSize(param: AbiParameter): number {
  if (isDynamic(param)) return 32;
  if (param.type !== "tuple") return 32;
  return (param as { components: readonly AbiParameter[] }).components.reduce((n, c) => n + inlineSize(c), 0);
}

/** The big-endian 32-byte word at byte `offset` of `hex`, if it is all there. */
export function wordAt(hex: Hex, offset: number): bigint | undefined {
  const start = 2 + 2 * offset;
  if (start + 64 > hex.length) return undefined;
  return BigInt(`0x${hex.slice(start, start + 64)}`);
}

export function byteLength(hex: Hex): number {
  return (hex.length - 2) / 2;
}
