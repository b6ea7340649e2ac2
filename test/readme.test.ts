/**
 * The README as a reader meets it: every table renders (GitHub drops a table whose delimiter row
 * has another column count than its header, and cuts a cell at an unescaped `|`, even inside
 * backticks), every relative link stays in the repository and names a file that exists, and
 * every setting the configuration reads is in the Settings table.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { relative, resolve } from "node:path";
import { describe, it } from "node:test";

const ROOT = resolve(import.meta.dirname, "..");
const README = readFileSync(resolve(ROOT, "README.md"), "utf8");
const lines = README.split("\n");

/** A table row's cell count, as GitHub splits it (an escaped `\|` does not split). */
const cells = (row: string) =>
  row
    .trim()
    .replace(/\\\|/g, "")
    .replace(/^\||\|$/g, "")
    .split("|").length;

describe("README", () => {
  it("every table's rows and delimiter have its header's column count", () => {
    const broken: string[] = [];
    for (let i = 0; i + 1 < lines.length; i++) {
      if (!lines[i]!.startsWith("|") || !/^\|[-:| ]+\|$/.test(lines[i + 1]!.trim())) continue;
      const width = cells(lines[i]!);
      for (let j = i + 1; j < lines.length && lines[j]!.startsWith("|"); j++) {
        if (cells(lines[j]!) !== width)
          broken.push(`line ${j + 1}: ${cells(lines[j]!)} cells, header ${width}`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it("relative links stay in the repository and point at files that exist", () => {
    const bad: string[] = [];
    for (const [, target] of README.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^(https?:|mailto:|#)/.test(target!)) continue;
      const path = resolve(ROOT, target!.replace(/#.*$/, ""));
      const inside = !relative(ROOT, path).startsWith("..");
      if (!inside || !existsSync(path)) bad.push(target!);
    }
    assert.deepEqual(bad, []);
  });

  it("every CHAIN_14601_* and top-level setting read by src/config.ts is in the Settings table", () => {
    const config = readFileSync(resolve(ROOT, "src/config.ts"), "utf8");
    const names = new Set<string>();
    for (const [, name] of config.matchAll(/read\(\s*"([A-Z][A-Z0-9_]+)"/g)) names.add(name!);
    for (const [, suffix] of config.matchAll(/read\(\s*`\$\{p\}([A-Z0-9_]+)`/g))
      names.add(`CHAIN_14601_${suffix}`);
    assert.ok(names.size > 20, `found ${names.size} settings`);
    // A row may name several settings: | `PORT`, `HOST` | …
    const firstCells = [...README.matchAll(/^\| ([^|]+) \|/gm)].map((m) => m[1]!);
    const table = new Set(
      firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)),
    );
    const missing = [...names].filter((n) => !table.has(n)).sort();
    assert.deepEqual(missing, []);
  });
});
