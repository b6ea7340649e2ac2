import { readdirSync, readFileSync } from "node:fs";
import { applyEffects, reorgEpoch } from "../src/chains/applied-blocks.ts";
import { recordOperation } from "../src/settlement/store.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  paidOperation,
  startTestApp,
  TEST_PAYMASTER,
} from "../test/support/app.ts";

/**
 * `npm run bench:settle`: how fast the settlement path records paid operations. SETTLE_OPS
 * (1,000) authorizations through the service (in process, as the tests run it), then each of them
 * recorded as the settlement watcher records an operation (settlement/watcher.ts apply): its own
 * transaction through applyEffects, the watcher's epoch, recordOperation, the block remembered.
 * Fifty operations a block, as a busy chain's block might carry. No chain: the operations are
 * made up the way the tests make them (test/support/app.ts paidOperation).
 *
 * The watcher settles a chain's operations one after another, so its rate is what one chain can
 * settle. Printed: operations a second, wall time per operation, and the CPU per operation of
 * the whole machine, of the PostgreSQL processes and of this process (Linux /proc; the service
 * runs in this process). Store: DATABASE_URL (a schema of its own, dropped afterwards), else
 * PGlite. It measures; it asserts nothing.
 */

const ops = Number(process.env.SETTLE_OPS ?? 1_000);
const PER_BLOCK = 50;

/** CPU time of the whole machine (all cores), of PostgreSQL's processes, of this one; ms. */
function cpu() {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1).map(Number);
  // user, nice, system, irq, softirq, steal: USER_HZ (100) ticks.
  const machine = (fields[0]! + fields[1]! + fields[2]! + fields[5]! + fields[6]! + fields[7]!) * 10;
  let postgres = 0;
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (!stat.includes("(postgres)")) continue;
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      postgres += (Number(f[11]) + Number(f[12])) * 10;
    } catch {
      // Gone meanwhile.
    }
  }
  const own = process.cpuUsage();
  return { machine, postgres, own: (own.user + own.system) / 1000 };
}

const t = await startTestApp();
try {
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 20n);
  const authIds: string[] = [];
  for (let i = 0; i < ops; i++) {
    const res = await authorizeMint(t, p);
    if (res.statusCode !== 200) throw new Error(`authorize answered ${res.statusCode}: ${res.body}`);
    authIds.push((res.json() as { authorizationId: string }).authorizationId);
  }
  const scope = {
    chainId: 14601,
    watcher: "settlement" as const,
    epoch: await reorgEpoch(t.db, 14601, "settlement"),
  };
  const before = cpu();
  const started = performance.now();
  for (const [i, authId] of authIds.entries()) {
    const blockNumber = 10_000n + BigInt(Math.floor(i / PER_BLOCK));
    const op = {
      ...paidOperation(authId, { blockNumber, logIndex: i % PER_BLOCK }),
      blockHash: `0x${blockNumber.toString(16).padStart(64, "0")}` as const,
    };
    const recorded = await applyEffects(t.db, scope, [{ number: blockNumber, hash: op.blockHash }], (tx) =>
      recordOperation(tx, 14601, TEST_PAYMASTER, op),
    );
    if (recorded.billing?.kind !== "charged") throw new Error(`operation ${i} was not charged`);
  }
  const ms = performance.now() - started;
  const after = cpu();
  const per = (x: number) => ((x * 1000) / ops).toFixed(0);
  console.log(
    `bench:settle, ${t.db.kind === "postgres" ? "PostgreSQL" : "PGlite"}: ${ops.toLocaleString("en")} operations recorded in ${ms.toFixed(0)} ms, ` +
      `${((ops * 1000) / ms).toFixed(0)} a second, ${per(ms)} µs each; CPU per operation: machine ${per(after.machine - before.machine)} µs, ` +
      `PostgreSQL ${per(after.postgres - before.postgres)} µs, this process ${per(after.own - before.own)} µs`,
  );
} finally {
  await t.close();
}
