import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DISTURBED_OTHER_US, REPO_ROOT } from "./processes.ts";
import { median } from "./stats.ts";

/**
 * `npm run bench:ab -- <revision> [runs]`: `npm run bench` on a revision and on the working tree,
 * alternated (base, this, base, this, ...; `runs` each, 2 by default), and the median of each
 * side per scenario. On this machine one run's figures move by 10-25 % from one run to the next,
 * more than most changes do: a change is measured against its base in the same minutes, in both
 * orders, and read from the medians. The revision runs from a git worktree in a temporary folder
 * with this checkout's node_modules; every BENCH_* setting (and DATABASE_URL, REDIS_URL) applies
 * to both sides. It measures; it asserts nothing.
 */

interface Row {
  scenario: string;
  connections: number;
  result: { requestsPerSec: number; p99Ms: number };
  cpuUs: { target: number; stores: number; other: number };
}

const [revision, runsText] = process.argv.slice(2);
if (!revision) {
  console.error("usage: npm run bench:ab -- <revision> [runs]");
  process.exit(2);
}
const runs = Number(runsText ?? 2);
if (!Number.isInteger(runs) || runs < 1 || runs > 10) {
  console.error("runs: a whole number from 1 to 10");
  process.exit(2);
}

function git(args: string[]): string {
  const r = spawnSync("git", args, { cwd: REPO_ROOT, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

const base = git(["rev-parse", "--verify", `${revision}^{commit}`]);
const scratch = mkdtempSync(join(tmpdir(), "gss-bench-ab-"));
const worktree = join(scratch, "base");
git(["worktree", "add", "--detach", worktree, base]);
symlinkSync(join(REPO_ROOT, "node_modules"), join(worktree, "node_modules"));

const sides = { base: [] as Row[][], this: [] as Row[][] };
try {
  for (let i = 0; i < runs; i++) {
    // Both orders: base first in even rounds, this tree first in odd ones.
    const order: (keyof typeof sides)[] = i % 2 === 0 ? ["base", "this"] : ["this", "base"];
    for (const side of order) {
      const out = join(scratch, `${side}-${i}.json`);
      const started = new Date().toISOString().slice(11, 19);
      console.log(
        `run ${i + 1}/${runs}, ${side === "base" ? base.slice(0, 8) : "working tree"}, ${started} UTC`,
      );
      const r = spawnSync("npm", ["run", "-s", "bench"], {
        cwd: side === "base" ? worktree : REPO_ROOT,
        env: { ...process.env, BENCH_JSON: out },
        stdio: ["ignore", "inherit", "inherit"],
      });
      if (r.status !== 0) throw new Error(`the bench failed (${side}, run ${i + 1})`);
      sides[side].push((JSON.parse(readFileSync(out, "utf8")) as { rows: Row[] }).rows);
    }
  }
} finally {
  git(["worktree", "remove", "--force", worktree]);
  rmSync(scratch, { recursive: true, force: true });
}

const key = (r: Row) => `${r.scenario} @${r.connections}`;
const of = (side: Row[][], k: string, f: (r: Row) => number) =>
  median(side.flatMap((rows) => rows.filter((r) => key(r) === k).map(f)));
/** The lowest and highest of a side's runs: on a machine whose speed moves from second to second, the spread says what a median can resolve. */
const rangeOf = (side: Row[][], k: string, f: (r: Row) => number) => {
  const values = side.flatMap((rows) => rows.filter((r) => key(r) === k).map(f));
  // A scenario one side does not have (added by the change): "-".
  if (values.length === 0) return "-";
  return `${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)}`;
};
/** A side's median, or "-" for a scenario that side does not have. */
const shown = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "-");
const floorOf = (side: Row[][], connections: number) =>
  median(
    side
      .flatMap((rows) => rows.filter((r) => r.scenario.startsWith("floor") && r.connections === connections))
      .map((r) => r.result.requestsPerSec),
  );

console.log(`\nmedians of ${runs} run(s) each: ${base.slice(0, 8)} → working tree`);
console.log(
  "| scenario | req/s | ÷ floor | p99 ms | service µs/req | pg+redis µs/req | req/s, lowest–highest run |",
);
console.log("|---|--:|--:|--:|--:|--:|--:|");
for (const k of [...new Set(sides.this[0]!.map(key))]) {
  const pair = (f: (r: Row) => number, digits = 0) =>
    `${shown(of(sides.base, k, f), digits)} → ${shown(of(sides.this, k, f), digits)}`;
  const connections = Number(k.split("@")[1]);
  // No floor measured (BENCH_SKIP_FLOOR): no ratio.
  const ratio = (side: Row[][]) => {
    const r = of(side, k, (row) => row.result.requestsPerSec) / floorOf(side, connections);
    return Number.isFinite(r) ? r.toFixed(2) : "-";
  };
  const spread = (f: (r: Row) => number) => `${rangeOf(sides.base, k, f)} → ${rangeOf(sides.this, k, f)}`;
  console.log(
    `| ${k} | ${pair((r) => r.result.requestsPerSec)} | ${ratio(sides.base)} → ${ratio(sides.this)} | ${pair((r) => r.result.p99Ms, 1)} | ${pair((r) => r.cpuUs.target)} | ${pair((r) => r.cpuUs.stores)} | ${spread((r) => r.result.requestsPerSec)} |`,
  );
}
// A floor that met other work on the machine flatters the ratios computed against it (processes.ts).
const disturbed = (side: Row[][]) =>
  side.filter((rows) =>
    rows.some((r) => r.scenario.startsWith("floor") && r.cpuUs.other > DISTURBED_OTHER_US),
  ).length;
const [b, t] = [disturbed(sides.base), disturbed(sides.this)];
if (b + t > 0) {
  console.log(
    `note: runs whose floor met more than ${DISTURBED_OTHER_US} µs of other work per request: ` +
      `${b} of ${runs} (${base.slice(0, 8)}), ${t} of ${runs} (working tree); their ratios are flattered`,
  );
}
