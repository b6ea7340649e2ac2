import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * `npm run -s bench:wasm-profile -- <file>.cpuprofile [rows] [within]`: a V8 CPU profile's
 * busiest functions, with PGlite's WebAssembly frames named. V8 names a WebAssembly frame by its
 * index alone (`wasm-function[2977]`); PGlite's module carries no name section, but it exports
 * most of PostgreSQL's functions (extensions link against them), and the export section maps
 * those indexes to their names. Unexported frames stay numbered, and so do the frames of the side
 * modules PGlite loads beside it (plpgsql's among them: its functions have indexes of their own).
 *
 * Prints the top `rows` (40) by self time, then the top named PostgreSQL functions by inclusive
 * time (each sample counted once per function on its stack), as shares of the profile's busy
 * time (idle left out). With `within` (a function's name, e.g. ExecutorFinish), only the samples
 * with that function on their stack count. BENCH_SKIP_SEC leaves out the first seconds of the
 * profile (a process's start and set-up).
 */

const [file, rowsText, within] = process.argv.slice(2);
if (!file) {
  console.error("usage: npm run -s bench:wasm-profile -- <file>.cpuprofile [rows] [within]");
  process.exit(2);
}
const rows = Number(rowsText ?? 40);
const skipUs = Number(process.env.BENCH_SKIP_SEC ?? 0) * 1e6;

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
const profile = JSON.parse(readFileSync(file, "utf8")) as {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
};

/** Function index → exported name, read from the export section (id 7) of PGlite's module. */
function exportedNames(): Map<number, string> {
  const require = createRequire(import.meta.url);
  const entry = require.resolve("@electric-sql/pglite");
  const bytes = readFileSync(join(dirname(entry), "pglite.wasm"));
  const names = new Map<number, string>();
  let at = 8; // the magic number and the version
  const leb = () => {
    let value = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = bytes[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  while (at < bytes.length) {
    const id = bytes[at++]!;
    const size = leb();
    const end = at + size;
    if (id === 7) {
      for (let n = leb(); n > 0; n--) {
        const length = leb();
        const name = bytes.subarray(at, at + length).toString("utf8");
        at += length;
        const kind = bytes[at++]!;
        const index = leb();
        if (kind === 0) names.set(index, name);
      }
    }
    at = end;
  }
  return names;
}

const names = exportedNames();
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// PGlite loads side modules too (plpgsql among them), each with its own function indexes: only
// the frames of the main module, the one with the most nodes, are named from its exports.
const moduleNodes = new Map<string, number>();
for (const n of profile.nodes) {
  const { url } = n.callFrame;
  if (url.startsWith("wasm://")) moduleNodes.set(url, (moduleNodes.get(url) ?? 0) + 1);
}
const mainModule = [...moduleNodes.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];

const label = (n: Node): string => {
  const { functionName, url } = n.callFrame;
  const wasm = /\[(\d+)\]$/.exec(functionName);
  if (wasm && url.startsWith("wasm://")) {
    const name = url === mainModule ? names.get(Number(wasm[1])) : undefined;
    if (name) return `pg ${name}`;
    return url === mainModule ? `wasm #${wasm[1]}` : `wasm ${url.slice(12)} #${wasm[1]}`;
  }
  return `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}`.trim();
};

const stacks = new Map<number, Set<string>>();
const stackOf = (id: number): Set<string> => {
  let s = stacks.get(id);
  if (!s) {
    s = new Set();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) s.add(label(byId.get(at)!));
    stacks.set(id, s);
  }
  return s;
};

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
let busy = 0;
let clock = 0;
for (const [i, id] of profile.samples.entries()) {
  const dt = profile.timeDeltas[i] ?? 0;
  clock += dt;
  if (clock < skipUs) continue;
  const node = byId.get(id)!;
  if (node.callFrame.functionName === "(idle)") continue;
  const stack = stackOf(id);
  if (within && !stack.has(`pg ${within}`)) continue;
  busy += dt;
  const own = label(node);
  self.set(own, (self.get(own) ?? 0) + dt);
  for (const l of stack) inclusive.set(l, (inclusive.get(l) ?? 0) + dt);
}

const top = (m: Map<string, number>, keep: (k: string) => boolean) =>
  [...m.entries()]
    .filter(([k]) => keep(k))
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows)
    .map(([k, v]) => `${((100 * v) / busy).toFixed(1).padStart(6)} %  ${k}`)
    .join("\n");
console.log(
  `${(busy / 1e6).toFixed(2)} s busy${within ? ` with ${within} on the stack` : ""}; ${names.size} of PGlite's functions named by its exports`,
);
console.log(`\nself time\n${top(self, () => true)}`);
console.log(`\ninclusive time, PostgreSQL's named functions\n${top(inclusive, (k) => k.startsWith("pg "))}`);
