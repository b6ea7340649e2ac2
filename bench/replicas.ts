import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey } from "viem/accounts";
import { localIssuer } from "../src/identity/tokens.ts";
import { startChain } from "../test/support/chain/anvil.ts";
import { startPgCluster, startPgReplica } from "../test/support/pg-cluster.ts";
import { type LoadResult, runLoad } from "./load.ts";
import { type Child, processCpuMs, REPO_ROOT, startChild, treeOf } from "./processes.ts";
import { fundProject, seedProject } from "./seed.ts";

/**
 * `npm run bench:replicas`: authorize under load while a dashboard reads analytics at the same
 * time, once with every read on the primary and once with DATABASE_READ_URL pointing at a
 * streaming replica, to show what moving the reads buys authorize. It starts a PostgreSQL
 * primary and a hot standby of its own (test/support/pg-cluster.ts, ports of its own), an anvil
 * for the fee oracle, and the compiled service twice on the same database; Redis when REDIS_URL
 * is set. Before measuring it writes some history (a warm-up of authorizations) so that the
 * reads have rows to read. It measures; it asserts nothing. On one machine the replica takes its
 * CPU from the same cores, which the CPU columns show.
 *   BENCH_DURATION_SEC (10), BENCH_CONNECTIONS (50: authorize), BENCH_READ_CONNECTIONS (16),
 *   BENCH_HISTORY_SEC (10: authorize load before measuring).
 */

const durationSec = Number(process.env.BENCH_DURATION_SEC ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50);
const readConnections = Number(process.env.BENCH_READ_CONNECTIONS ?? 16);
const historySec = Number(process.env.BENCH_HISTORY_SEC ?? 10);
const PAYMASTER = "0x00000000000000000000000000000000000000aa";

interface Row {
  name: string;
  authorize: LoadResult;
  reads: LoadResult;
  serviceMs: number;
  primaryMs: number;
  replicaMs: number;
}

async function main() {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString("hex")}`;
  const dataDir = mkdtempSync(join(tmpdir(), "gss-bench-replicas-"));
  const chain = await startChain();
  const primary = await startPgCluster();
  const replica = await startPgReplica(primary);
  const [load1] = loadavg();
  console.log(
    `bench:replicas ${runId}: primary :${primary.port}, replica :${replica.port}, ${durationSec} s per run, ` +
      `${connections} authorize + ${readConnections} read connections, ${cpus().length} cores, load average ${load1!.toFixed(2)}`,
  );
  const build = spawnSync(process.execPath, ["scripts/build.mjs", "--if-stale"], {
    cwd: REPO_ROOT,
    stdio: "inherit",
  });
  if (build.status !== 0) throw new Error("the build failed");
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    NODE_ENV: "development",
    DATA_DIR: dataDir,
    SIGNER_PRIVATE_KEY: generatePrivateKey(),
    CHAIN_14601_PAYMASTER_ADDRESS: PAYMASTER,
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    LOG_LEVEL: "info",
    DATABASE_URL: primary.url,
    // The dashboard's reads come from one developer here; their budget must not be the limit.
    DEVELOPER_RATE_LIMIT: "1000000",
  };
  delete env.DATABASE_READ_URL;
  const children: Child[] = [];
  const start = async (name: string, extra: Record<string, string>) => {
    const child = await startChild({
      name,
      entry: "dist/server.js",
      loader: "none",
      env: { ...env, ...extra },
      logPath: join(dataDir, `${name}.log`),
      readyPath: "/health",
    });
    children.push(child);
    return child;
  };
  try {
    const plain = await start("primary-only", {});
    const seeded = await seedProject(plain.baseUrl, dataDir, runId);
    await fundProject({ databaseUrl: primary.url, dataDir }, seeded.projectId, runId);
    const bodies = Array.from({ length: 1000 }, (_, i) =>
      JSON.stringify({
        projectId: seeded.projectId,
        user: `0x${createHash("sha256").update(`${runId}:${i}`).digest("hex").slice(0, 40)}`,
        target: seeded.target,
        selector: seeded.selector,
        estimatedGas: 150_000,
        chainId: 14601,
      }),
    );
    const token = await (await localIssuer(dataDir)).issue(`bench-${runId}@example.com`, 3600);
    const p = `/projects/${seeded.projectId}`;
    const readPaths = [
      `${p}/analytics/events?limit=50`,
      `${p}/analytics/overview`,
      `${p}/analytics/daily`,
      `${p}/analytics/money`,
      `${p}/analytics/events?limit=50&status=pending`,
      `${p}/funds/parity`,
    ];
    const authorizeLoad = (child: Child, seconds: number, conns: number) =>
      runLoad({
        url: child.baseUrl,
        path: "/sponsor/authorize",
        apiKey: seeded.apiKey,
        bodies,
        connections: conns,
        durationSec: seconds,
      });
    // History for the reads to read, and a warm service.
    await authorizeLoad(plain, historySec, connections);
    const routed = await start("replica-reads", {
      DATABASE_READ_URL: replica.url,
      DATABASE_READ_MAX_LAG_MS: "2000",
    });
    const rows: Row[] = [];
    for (const [name, child] of [
      ["reads on the primary", plain],
      ["reads on the replica", routed],
      ["reads on the primary (again)", plain],
      ["reads on the replica (again)", routed],
    ] as const) {
      await new Promise((r) => setTimeout(r, 1000));
      const serviceBefore = child.cpuMs();
      const primaryBefore = clusterCpu(primary.dataDir);
      const replicaBefore = clusterCpu(replica.dataDir);
      const [authorize, reads] = await Promise.all([
        authorizeLoad(child, durationSec, connections),
        runLoad({
          url: child.baseUrl,
          path: "",
          apiKey: token,
          bodies: [],
          getPaths: readPaths,
          connections: readConnections,
          durationSec,
        }),
      ]);
      rows.push({
        name,
        authorize,
        reads,
        serviceMs: child.cpuMs() - serviceBefore,
        primaryMs: clusterCpu(primary.dataDir) - primaryBefore,
        replicaMs: clusterCpu(replica.dataDir) - replicaBefore,
      });
      const r = rows.at(-1)!;
      console.log(
        `  ${name}: authorize ${r.authorize.requestsPerSec.toFixed(0)}/s, reads ${r.reads.requestsPerSec.toFixed(0)}/s`,
      );
    }
    report(rows);
  } finally {
    for (const child of children) await child.stop();
    await replica.destroy();
    await primary.destroy();
    await chain.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * CPU used so far by a PostgreSQL cluster, in ms: the postmaster with the children it has
 * reaped (cutime + cstime: backends that ended), plus every process under it still running.
 */
function clusterCpu(dataDir: string): number {
  const pid = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const live = treeOf(pid).reduce((sum, p) => sum + (processCpuMs(p) || 0), 0);
  return live + reapedChildrenCpuMs(pid);
}

function reapedChildrenCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // cutime and cstime are the 16th and 17th fields of /proc/<pid>/stat, in clock ticks (100/s).
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
}

function report(rows: Row[]) {
  const head = [
    "run",
    "authorize/s",
    "auth p99 ms",
    "auth non-200",
    "reads/s",
    "reads p99 ms",
    "reads non-200",
    "service CPU s",
    "primary CPU s",
    "replica CPU s",
  ];
  console.log(`\n| ${head.join(" | ")} |`);
  console.log(`|${head.map((_, i) => (i === 0 ? "---" : "--:")).join("|")}|`);
  for (const r of rows) {
    console.log(
      `| ${[
        r.name,
        r.authorize.requestsPerSec.toFixed(0),
        r.authorize.p99Ms.toFixed(1),
        `${(r.authorize.non200Share * 100).toFixed(2)}%`,
        r.reads.requestsPerSec.toFixed(0),
        r.reads.p99Ms.toFixed(1),
        `${(r.reads.non200Share * 100).toFixed(2)}%`,
        (r.serviceMs / 1000).toFixed(1),
        (r.primaryMs / 1000).toFixed(1),
        (r.replicaMs / 1000).toFixed(1),
      ].join(" | ")} |`,
    );
  }
  console.log(
    "\nCPU columns: seconds of CPU over the run (all cores) of the service process, the primary's and the replica's PostgreSQL processes.",
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
