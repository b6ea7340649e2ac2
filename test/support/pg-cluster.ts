import { execFile, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";
import { freePort } from "./ports.ts";

export { freePort };

/**
 * A PostgreSQL server of a test's own (initdb + pg_ctl into a temporary directory, trust
 * authentication, 127.0.0.1 only, no Unix socket), for tests that stop, kill and restart the
 * database under a live service. Never the shared server on 5432.
 *
 * The binaries come from PG_BIN_DIR, else the newest /usr/lib/postgresql/<version>/bin, else
 * the PATH. initdb refuses to run as root, so as root every command runs as the `postgres`
 * user (runuser, else su) in a directory that user owns.
 */
export interface PgCluster {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** Whether the server was started and not stopped since (as far as this helper knows). */
  readonly running: boolean;
  /** Starts the server (again) on its port; resolves once it accepts connections. */
  start(): Promise<void>;
  /**
   * Stops the server: "immediate" kills it without a checkpoint (a crash, as far as clients can
   * tell), "fast" ends sessions with 57P01 and shuts down cleanly.
   */
  stop(mode?: "immediate" | "fast" | "smart"): Promise<void>;
  restart(mode?: "immediate" | "fast"): Promise<void>;
  /** Stops the server (immediately) if it runs and removes its directory. */
  destroy(): Promise<void>;
  /** The server's log, for a failing test's message. */
  log(): string;
  /** Runs one statement on a connection of its own (opened and closed for it), as superuser. */
  query<T = Record<string, unknown>>(sql: string): Promise<T[]>;
}

/** Creates a cluster in a fresh temporary directory and starts it on `port` (a free one by default). */
export async function startPgCluster(port?: number): Promise<PgCluster> {
  const bin = findBinDir();
  const runAs = runner();
  const root = ownedTempDir(runAs);
  const dataDir = join(root, "data");
  await run(runAs, join(bin, "initdb"), [
    "-D",
    dataDir,
    "-U",
    "postgres",
    "-A",
    "trust",
    "-E",
    "UTF8",
    "--locale=C",
    "--no-sync",
  ]);
  const cluster = clusterIn(root, port ?? (await freePort()), bin, runAs);
  await cluster.start();
  return cluster;
}

/**
 * A streaming replica of `primary`, on a port of its own: a base backup (pg_basebackup -R, which
 * writes the connection to the primary and standby.signal) started as a hot standby. initdb's
 * trust rules already let 127.0.0.1 connect for replication, and PostgreSQL's defaults
 * (wal_level replica, 10 WAL senders) are enough.
 */
export async function startPgReplica(primary: PgCluster, port?: number): Promise<PgReplica> {
  const bin = findBinDir();
  const runAs = runner();
  const root = ownedTempDir(runAs);
  const dataDir = join(root, "data");
  await run(runAs, join(bin, "pg_basebackup"), [
    "-h",
    "127.0.0.1",
    "-p",
    String(primary.port),
    "-U",
    "postgres",
    "-D",
    dataDir,
    "-R",
    "-X",
    "stream",
    "-c",
    "fast",
    "--no-sync",
  ]);
  const cluster = clusterIn(root, port ?? (await freePort()), bin, runAs);
  await cluster.start();
  return {
    ...cluster,
    get running() {
      return cluster.running;
    },
    async promote() {
      await run(runAs, join(bin, "pg_ctl"), ["promote", "-D", dataDir, "-w", "-t", "60"]);
    },
  };
}

export interface PgReplica extends PgCluster {
  /** Ends recovery: the replica becomes a primary of its own (pg_ctl promote). */
  promote(): Promise<void>;
}

function ownedTempDir(runAs: Runner): string {
  const root = mkdtempSync(join(tmpdir(), "gss-pg-"));
  if (runAs.uid !== null) chownSync(root, runAs.uid, runAs.gid!);
  return root;
}

/** The server of the data directory under `root`, not yet started. */
function clusterIn(root: string, port: number, bin: string, runAs: Runner): PgCluster {
  const dataDir = join(root, "data");
  const logFile = join(root, "server.log");
  // fsync off: a killed server loses nothing the operating system already has, and the tests
  // stop the server, never the machine.
  const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -k '' -c fsync=off -c max_connections=100`;
  let running = false;
  // Synchronous, so that it also runs from an 'exit' handler when a test file dies midway.
  const cleanup = () => {
    if (!running) return;
    const [c, a] = runAs.wrap(join(bin, "pg_ctl"), ["stop", "-D", dataDir, "-m", "immediate", "-w"]);
    spawnSync(c, a, { stdio: "ignore", cwd: tmpdir() });
  };
  process.once("exit", cleanup);

  const cluster: PgCluster = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    get running() {
      return running;
    },
    async start() {
      await run(runAs, join(bin, "pg_ctl"), [
        "start",
        "-D",
        dataDir,
        "-l",
        logFile,
        "-w",
        "-t",
        "60",
        "-o",
        serverOptions,
      ]);
      running = true;
    },
    async stop(mode = "fast") {
      await run(runAs, join(bin, "pg_ctl"), ["stop", "-D", dataDir, "-m", mode, "-w", "-t", "60"]);
      running = false;
    },
    async restart(mode = "fast") {
      await cluster.stop(mode);
      await cluster.start();
    },
    async destroy() {
      cleanup();
      running = false;
      process.removeListener("exit", cleanup);
      rmSync(root, { recursive: true, force: true });
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : ""),
    async query<T>(sql: string) {
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      try {
        return (await client.query(sql)).rows as T[];
      } finally {
        await client.end();
      }
    },
  };
  return cluster;
}

function findBinDir(): string {
  const candidates: string[] = [];
  if (process.env.PG_BIN_DIR) candidates.push(process.env.PG_BIN_DIR);
  const lib = "/usr/lib/postgresql";
  if (existsSync(lib)) {
    const versions = readdirSync(lib)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(lib, v, "bin")));
  }
  for (const dir of candidates)
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) return dir;
  const onPath = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim();
  if (onPath && existsSync(join(dirname(onPath), "pg_ctl"))) return dirname(onPath);
  throw new Error(
    "pg-cluster: initdb and pg_ctl were not found (set PG_BIN_DIR, or install PostgreSQL's server " +
      `binaries, e.g. /usr/lib/postgresql/<version>/bin); looked in ${candidates.join(", ") || "nothing"} and the PATH`,
  );
}

interface Runner {
  /** null: run as the current user. */
  uid: number | null;
  gid: number | null;
  wrap(command: string, args: string[]): [string, string[]];
}

function runner(): Runner {
  if (process.getuid?.() !== 0) return { uid: null, gid: null, wrap: (c, a) => [c, a] };
  const ids = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" });
  const gids = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" });
  if (ids.status !== 0) {
    throw new Error("pg-cluster: running as root, and initdb refuses root; no `postgres` user to run it as");
  }
  const uid = Number(ids.stdout.trim());
  const gid = Number(gids.stdout.trim());
  const hasRunuser = spawnSync("sh", ["-c", "command -v runuser"]).status === 0;
  if (hasRunuser) return { uid, gid, wrap: (c, a) => ["runuser", ["-u", "postgres", "--", c, ...a]] };
  return {
    uid,
    gid,
    wrap: (c, a) => ["su", ["postgres", "-s", "/bin/sh", "-c", [c, ...a].map(shellQuote).join(" ")]],
  };
}

/** Runs a command (as the cluster's user) without blocking the event loop: load goes on meanwhile. */
function run(runAs: Runner, command: string, args: string[]): Promise<void> {
  const [c, a] = runAs.wrap(command, args);
  return new Promise((resolve, reject) => {
    execFile(c, a, { cwd: tmpdir() }, (err, stdout, stderr) => {
      if (!err) return resolve();
      reject(new Error(`pg-cluster: ${[c, ...a].join(" ")} failed: ${stderr || stdout || err.message}`));
    });
  });
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}
