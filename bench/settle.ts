import { reorgEpoch } from "../src/chains/applied-blocks.ts";
import { release } from "../src/ledger/ledger.ts";
import { APPLY_CONCURRENCY } from "../src/settlement/watcher.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  paidBlock,
  settlementWatcherOffChain,
  startTestApp,
} from "../test/support/app.ts";
import { machineCpu, storeCpuSince, storeCpuSnapshot } from "./processes.ts";

/**
 * `npm run bench:settle`: how fast the settlement watcher records paid operations. SETTLE_OPS
 * (1,000) authorizations through the service (in process, as the tests run it), spread over
 * SETTLE_PROJECTS projects (1), then recorded by the watcher's own `apply` (settlement/watcher.ts),
 * a range of fifty operations at a time, each operation in its transaction, SETTLE_CONCURRENCY at
 * once (the watcher's default, APPLY_CONCURRENCY). Fifty operations a block, as a busy chain's
 * block might carry. No chain: the operations are made up the way the tests make them
 * (test/support/app.ts paidBlock), and the watcher's RPC client is never called.
 *
 * SETTLE_WHAT=release releases the reservations instead, one after another, as the watcher
 * releases those whose window ended unused (settlement/watcher.ts releaseExpired).
 *
 * A chain has one settlement watcher, so its rate is what one chain can settle. Printed:
 * operations a second, wall time per operation, and the CPU per operation of the whole machine, of
 * the local PostgreSQL and Redis processes and of this process (Linux /proc, bench/processes.ts;
 * the service runs in this process). Store: DATABASE_URL (a schema of its own, dropped afterwards), else
 * PGlite. It measures; it asserts nothing.
 */

const ops = Number(process.env.SETTLE_OPS ?? 1_000);
const projects = Number(process.env.SETTLE_PROJECTS ?? 1);
const concurrency = Number(process.env.SETTLE_CONCURRENCY ?? APPLY_CONCURRENCY);
const what = process.env.SETTLE_WHAT ?? "record";
if (what !== "record" && what !== "release") throw new Error("SETTLE_WHAT is record or release");
const PER_BLOCK = 50;

/** This process's CPU time so far, in ms (the service runs in it). */
function ownCpuMs(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1000;
}

const t = await startTestApp();
try {
  const funded = [];
  for (let k = 0; k < projects; k++) {
    funded.push(await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 20n));
  }
  const authIds: string[] = [];
  for (let i = 0; i < ops; i++) {
    const res = await authorizeMint(t, funded[i % projects]!);
    if (res.statusCode !== 200) throw new Error(`authorize answered ${res.statusCode}: ${res.body}`);
    authIds.push((res.json() as { authorizationId: string }).authorizationId);
  }
  const watcher = settlementWatcherOffChain(t, { applyConcurrency: concurrency });
  const epoch = await reorgEpoch(t.db, 14601, "settlement");
  const machineBefore = machineCpu().busyMs;
  const storesBefore = storeCpuSnapshot();
  const ownBefore = ownCpuMs();
  const started = performance.now();
  if (what === "release") {
    for (const authId of authIds)
      if (!(await release(t.db, authId))) throw new Error(`${authId} was not released`);
  } else {
    for (let from = 0; from < ops; from += PER_BLOCK) {
      const block = 10_000n + BigInt(from / PER_BLOCK);
      const recorded = await watcher.apply(paidBlock(authIds.slice(from, from + PER_BLOCK), block, epoch));
      if (recorded.some((r) => r.billing?.kind !== "charged"))
        throw new Error("an operation was not charged");
    }
  }
  const ms = performance.now() - started;
  const machineMs = machineCpu().busyMs - machineBefore;
  const storesMs = storeCpuSince(storesBefore);
  const ownMs = ownCpuMs() - ownBefore;
  const per = (x: number) => ((x * 1000) / ops).toFixed(0);
  console.log(
    `bench:settle, ${t.db.kind === "postgres" ? "PostgreSQL" : "PGlite"}, ${projects} project${projects > 1 ? "s" : ""}, ${what === "release" ? `releases one at a time: ${ops.toLocaleString("en")} reservations released in` : `${concurrency} at once: ${ops.toLocaleString("en")} operations recorded in`} ${ms.toFixed(0)} ms, ` +
      `${((ops * 1000) / ms).toFixed(0)} a second, ${per(ms)} µs each; CPU per operation: machine ${per(machineMs)} µs, ` +
      `PostgreSQL + Redis ${per(storesMs)} µs, this process ${per(ownMs)} µs`,
  );
} finally {
  await t.close();
}
