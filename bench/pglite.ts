import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dumpPglite, openPglite } from "../src/db/pglite.ts";
import { reserveMany } from "../src/ledger/ledger.ts";
import { fundedProject, MINT_SELECTOR, MINT_TARGET, startTestApp } from "../test/support/app.ts";
import { mintReservation } from "../test/support/money.ts";
import { median } from "./stats.ts";

/**
 * `npm run bench:pglite`: what the embedded store's reservation costs, without HTTP, signing or a
 * second thread. One funded project is seeded through the test app, its database is copied into a
 * PGlite on disk (PGlite's default settings, as the server opens it), and `reserveMany` is called
 * there in batches of each size, on distinct senders, for several rounds. For each size it prints
 * the CPU per authorization of this process (PGlite and its JavaScript together) as the median and
 * the lowest of the rounds, then fits cpu(batch) = fixed ÷ batch + per item over the sizes: what
 * a batch costs whatever it holds, and what each authorization adds. The first round of each size
 * is a warm-up and not counted.
 *
 * One thread and no load generator, but its rounds still move by 5-15 %: alternate a change with
 * its base and compare medians. Its use is the profile: `node --cpu-prof --import tsx
 * bench/pglite.ts`, and read the profile with PostgreSQL's function names with
 * `npm run -s bench:wasm-profile -- <file>.cpuprofile`.
 *
 * Knobs: BENCH_BATCHES ("1,5,25,50"), BENCH_ROUNDS (5, after the warm-up), BENCH_AUTHS (per round,
 * 5,000), BENCH_SENDERS (1,000).
 */

const batches = (process.env.BENCH_BATCHES ?? "1,5,25,50").split(",").map(Number);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const authsPerRound = Number(process.env.BENCH_AUTHS ?? 5_000);
const senderCount = Number(process.env.BENCH_SENDERS ?? 1_000);
for (const n of [...batches, rounds, authsPerRound, senderCount]) {
  if (!Number.isInteger(n) || n < 1) throw new Error("BENCH_* settings are positive whole numbers");
}

const t = await startTestApp({ logLevel: "warn" });
const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 30n);
const copy = await dumpPglite(t.db);
await t.close();
const dir = mkdtempSync(join(tmpdir(), "gss-bench-pglite-"));
const db = await openPglite(join(dir, "data"), { loadDataDir: copy });

const senders = Array.from({ length: senderCount }, () => `0x${randomBytes(20).toString("hex")}`);
let made = 0;
const reservation = () => mintReservation(p.projectId, 10n ** 12n, senders[made++ % senderCount]!);

/** CPU µs per authorization of one round: `authsPerRound` reservations in batches of `size`. */
async function round(size: number): Promise<number> {
  const calls = Math.max(1, Math.round(authsPerRound / size));
  // The items are made before the clock starts: only the call and what it runs are timed.
  const work = Array.from({ length: calls }, () => Array.from({ length: size }, reservation));
  const before = process.cpuUsage();
  for (const items of work) {
    const outcomes = await reserveMany(db, p.projectId, items);
    if (outcomes.some((o) => o.kind !== "reserved"))
      throw new Error(`not reserved: ${JSON.stringify(outcomes[0])}`);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / (calls * size);
}

const results: { size: number; median: number; lowest: number }[] = [];
console.log(
  `PGlite reservation, file-backed, ${rounds} rounds of ${authsPerRound} authorizations per batch size`,
);
console.log("| batch | CPU µs per authorization, median | lowest | rounds |");
console.log("|--:|--:|--:|---|");
try {
  for (const size of batches) {
    await round(size);
    const cpu: number[] = [];
    for (let i = 0; i < rounds; i++) cpu.push(await round(size));
    const row = { size, median: median(cpu), lowest: Math.min(...cpu) };
    results.push(row);
    console.log(
      `| ${size} | ${row.median.toFixed(1)} | ${row.lowest.toFixed(1)} | ${cpu.map((c) => c.toFixed(0)).join(" ")} |`,
    );
  }
  if (results.length >= 2) {
    // Least squares of median = fixed * (1 / batch) + perItem.
    const xs = results.map((r) => 1 / r.size);
    const ys = results.map((r) => r.median);
    const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
    const my = ys.reduce((a, b) => a + b, 0) / ys.length;
    const fixed =
      xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0) / xs.reduce((a, x) => a + (x - mx) ** 2, 0);
    console.log(
      `fit over the medians: ${fixed.toFixed(0)} µs a batch whatever it holds, ${(my - fixed * mx).toFixed(1)} µs each authorization adds`,
    );
  }
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
