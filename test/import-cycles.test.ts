/**
 * No module of the service reaches itself through its imports: not through values, not through
 * types (a type-only cycle is still two modules that cannot be understood or moved apart), not
 * through a dynamic import(). Read from the source text, so it covers the dashboard's browser
 * modules too.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, it } from "node:test";

const SRC = resolve(import.meta.dirname, "../src");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** Relative specifiers of every import, export-from and import() in a module. */
function importsOf(text: string): string[] {
  const found: string[] = [];
  const patterns = [/\bfrom\s+"(\.{1,2}\/[^"]+)"/g, /\bimport\s*\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) found.push(m[1]!);
  return found;
}

/** Each cycle once, as the path of modules from its smallest member back to it. */
export function cyclesOf(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === "open") {
        const cycle = stack.slice(stack.indexOf(next));
        const start = cycle.indexOf([...cycle].sort()[0]!);
        const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
        const key = rotated.join(" → ");
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push([...rotated, rotated[0]!]);
        }
      } else if (!state.has(next)) {
        visit(next);
      }
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

describe("import graph", () => {
  it("finds a cycle when there is one (the checker itself)", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["a"]],
    ]);
    assert.deepEqual(cyclesOf(graph), [["a", "b", "c", "a"]]);
    assert.deepEqual(importsOf('import type { X } from "./x.ts";\nconst m = await import("../y.js");'), [
      "./x.ts",
      "../y.js",
    ]);
  });

  it("src/ has no import cycle, counting type-only and dynamic imports", () => {
    const graph = new Map<string, string[]>();
    for (const file of sources(SRC)) {
      const deps = importsOf(readFileSync(file, "utf8")).map((spec) =>
        relative(SRC, resolve(dirname(file), spec)),
      );
      graph.set(relative(SRC, file), deps);
    }
    assert.ok(graph.size > 100, `read ${graph.size} modules`);
    assert.deepEqual(
      cyclesOf(graph).map((c) => c.join(" → ")),
      [],
    );
  });
});
