/**
 * One watcher per chain across instances (issue 10): the instance holding a PostgreSQL advisory
 * lock runs the chain's watchers, the others stand by, and one of them takes over when the
 * leader's session dies. This is PostgreSQL behaviour, so the file uses PostgreSQL in both test
 * passes: the shared server (DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test in the
 * embedded pass), in a database of its own that it drops afterwards.
 *
 * The service instances are real `src/server.ts` processes, each reading the chain through a
 * proxy that counts its JSON-RPC calls: the calls only a watcher makes (eth_getLogs for
 * settlement, debug_traceBlockByNumber for deposits) show which instance watches.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { parseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { advisoryLockLeadership, watcherLockKey } from "../../src/chains/leadership.ts";
import type { WatcherLog } from "../../src/chains/poll-loop.ts";
import { localIssuer } from "../../src/identity/tokens.ts";
import { TEST_SIGNER_KEY } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack } from "../support/chain/devnet.ts";
import { freePort } from "../support/pg-cluster.ts";
import { CHILD_NODE_FLAGS, ensureBuilt, SERVER_JS } from "../support/server-process.ts";

const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const REPO = new URL("../../", import.meta.url).pathname;
/** The JSON-RPC methods only the chain watchers call. */
const WATCHER_METHODS = ["eth_getLogs", "debug_traceBlockByNumber"];

/** Polls until `check` returns a value; a generous deadline, no timing claim. */
async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  deadlineMs = 60_000,
): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    assert.ok(Date.now() < end, `gave up waiting for ${what}`);
    await sleep(100);
  }
}

function recordingLog(lines: { level: string; msg: string }[]): WatcherLog {
  const at = (level: string) => (_o: object, msg?: string) => lines.push({ level, msg: msg ?? "" });
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

describe("advisory-lock leadership (in process)", () => {
  it("one of two leads; when its session is terminated it steps down and the other takes over", {
    timeout: 120_000,
  }, async () => {
    const key = watcherLockKey(`leader-test-${randomBytes(4).toString("hex")}`, 14601);
    const make = () =>
      advisoryLockLeadership({
        url: ADMIN_URL,
        key: async () => key,
        retryMs: 100,
        context: { chainId: 14601 },
      });
    const first = make();
    const second = make();
    const states = { first: [] as boolean[], second: [] as boolean[] };
    const logs = {
      first: [] as { level: string; msg: string }[],
      second: [] as { level: string; msg: string }[],
    };
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    try {
      first.start((leading) => void states.first.push(leading), recordingLog(logs.first));
      await until("the first to lead", () => (first.leading() ? true : undefined));
      second.start((leading) => void states.second.push(leading), recordingLog(logs.second));
      await until("the second to stand by", () =>
        logs.second.some((l) => l.msg.includes("standing by")) ? true : undefined,
      );
      assert.equal(second.leading(), false);

      // The leader's session dies (as when its process is killed): the server releases the lock.
      const holder = await heldBy(admin, key);
      assert.ok(holder !== null, "the lock is held");
      await admin.query("SELECT pg_terminate_backend($1)", [holder]);
      await until("the second to lead", () => (second.leading() ? true : undefined));
      await until("the first to step down", () => (first.leading() ? undefined : true));
      assert.deepEqual(states.second, [true]);
      assert.deepEqual(states.first.slice(0, 2), [true, false]);
      assert.ok(logs.first.some((l) => l.level === "warn" && l.msg === "stopped leading the chain watchers"));
      // Never both at once, as far as the lock goes: the second holds it now.
      assert.notEqual(await heldBy(admin, key), holder);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
      await admin.end();
    }
  });
});

/** The backend pid holding the advisory lock `key`, or null. */
async function heldBy(client: pg.Client, key: bigint): Promise<number | null> {
  const unsigned = BigInt.asUintN(64, key);
  const rows = await client.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
       AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1`,
    [(unsigned >> 32n).toString(), (unsigned & 0xffffffffn).toString()],
  );
  return rows.rows[0]?.pid ?? null;
}

describe("two service processes on one database", () => {
  let chain: DevChain;
  let stack: DevnetStack;
  let dbName: string;
  let dbUrl: string;
  let dataDir: string;
  const instances: Instance[] = [];

  before(async () => {
    ensureBuilt();
    chain = await startChain();
    stack = await deployStack(chain, { signer: privateKeyToAccount(TEST_SIGNER_KEY).address });
    dbName = `gss_leader_${randomBytes(4).toString("hex")}`;
    await adminQuery(`CREATE DATABASE ${dbName}`);
    const url = new URL(ADMIN_URL);
    url.pathname = `/${dbName}`;
    dbUrl = url.toString();
    dataDir = mkdtempSync(join(tmpdir(), "gss-leader-"));
  });

  after(async () => {
    for (const i of instances) await i.kill("SIGKILL");
    await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
    await chain?.stop();
  });

  const env = () => ({
    DATABASE_URL: dbUrl,
    DATA_DIR: dataDir,
    SIGNER_PRIVATE_KEY: TEST_SIGNER_KEY,
    CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
    CHAIN_14601_PAYMASTER_V08_ADDRESS: stack.v08.paymaster,
    CHAIN_14601_CONFIRMATIONS: "1",
    CHAIN_14601_POLL_INTERVAL_MS: "200",
    CHAIN_14601_START_BLOCK: "0",
    WATCHER_LEADER_RETRY_MS: "250",
  });

  it("only the leader watches; killed with SIGKILL, the other takes over and a deposit sent after is credited once", {
    timeout: 900_000,
  }, async () => {
    const a = await startInstance("a", chain.rpcUrl, env());
    instances.push(a);
    await until("a to lead", async () => ((await a.leaderGauge()) === 1 ? true : undefined));
    const b = await startInstance("b", chain.rpcUrl, env());
    instances.push(b);
    await until("b to stand by", () =>
      b.logged("another instance leads the chain watchers; standing by") ? true : undefined,
    );
    assert.equal(await b.leaderGauge(), 0);

    // A project, through b's API: the instances share the database.
    const issuer = await localIssuer(dataDir);
    const token = await issuer.issue("leader@example.com");
    const slug = `org-${randomBytes(3).toString("hex")}`;
    assert.equal((await b.api("POST", "/orgs", token, { name: slug, slug })).status, 201);
    const projectId = `p-${randomBytes(4).toString("hex")}`;
    const created = await b.api("POST", "/projects", token, { id: projectId, name: "Leader", owner: slug });
    assert.equal(created.status, 201);
    const depositAddress = (created.body as { deposit_address: `0x${string}` }).deposit_address;
    const balance = async () =>
      BigInt(
        ((await b.api("GET", `/projects/${projectId}/balance`, token)).body as { balance: string }).balance,
      );

    const first = await sendDeposit(chain, depositAddress, parseEther("1"));
    await until("the first deposit credited (by a)", async () =>
      (await balance()) === parseEther("1") ? true : undefined,
    );
    const aCalls = a.proxy.watcherCalls();
    assert.ok(aCalls > 0, "a, the leader, read the chain for its watchers");
    assert.equal(
      b.proxy.watcherCalls(),
      0,
      `b made watcher calls while a led: ${JSON.stringify(b.proxy.counts)}`,
    );
    assert.ok(b.proxy.total() > 0, "b is alive and reads the chain for readiness and fees");

    await a.kill("SIGKILL");
    await until("b to take over", async () => ((await b.leaderGauge()) === 1 ? true : undefined));
    // Log lines reach stdout within 100 ms of being logged (process/log.ts), not at once.
    await until("b to log that it leads", () => (b.logged("leading the chain watchers") ? true : undefined));

    const second = await sendDeposit(chain, depositAddress, parseEther("2"));
    await until("the second deposit credited (by b)", async () =>
      (await balance()) === parseEther("3") ? true : undefined,
    );
    assert.ok(b.proxy.watcherCalls() > 0, "b now reads the chain for its watchers");
    // A few more blocks read past it: nothing is credited twice.
    await chain.testClient.mine({ blocks: 3 });
    const head = await chain.publicClient.getBlockNumber();
    await until("b's deposit watcher past the head", async () => {
      const rows = await dbQuery<{ next_block: string }>(
        dbUrl,
        "SELECT next_block::text FROM chain_cursors WHERE chain_id = 14601 AND watcher = 'deposits'",
      );
      return rows[0] && BigInt(rows[0].next_block) >= head ? true : undefined;
    });
    const entries = await dbQuery<{ reference: string; amount: string }>(
      dbUrl,
      "SELECT reference, amount::text FROM ledger_entries WHERE project_id = $1 AND kind = 'deposit' ORDER BY id",
      [projectId],
    );
    assert.deepEqual(
      entries.map((e) => [e.reference.split(":")[1], e.amount]),
      [
        [first, parseEther("1").toString()],
        [second, parseEther("2").toString()],
      ],
    );
    assert.equal(await balance(), parseEther("3"));

    // A graceful stop releases the lock at once (the session ends).
    await b.kill("SIGTERM");
    assert.equal(b.exitCode(), 0, b.output());
  });
});

async function sendDeposit(chain: DevChain, to: `0x${string}`, value: bigint): Promise<string> {
  const hash = await chain.wallets[2]!.sendTransaction({ to, value });
  await chain.publicClient.waitForTransactionReceipt({ hash });
  // One block on top: the service's confirmation depth here.
  await chain.testClient.mine({ blocks: 1 });
  return hash;
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function dbQuery<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

interface CountingProxy {
  url: string;
  counts: Record<string, number>;
  watcherCalls(): number;
  total(): number;
  close(): Promise<void>;
}

/** An HTTP proxy to the chain's RPC that counts the JSON-RPC methods it forwards. */
async function countingProxy(target: string): Promise<CountingProxy> {
  const counts: Record<string, number> = {};
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    try {
      const parsed = JSON.parse(body) as { method?: string } | { method?: string }[];
      for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
        const method = call.method ?? "?";
        counts[method] = (counts[method] ?? 0) + 1;
      }
      const upstream = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      res.writeHead(upstream.status, { "content-type": "application/json" });
      res.end(await upstream.text());
    } catch {
      res.writeHead(502).end();
    }
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    watcherCalls: () => WATCHER_METHODS.reduce((n, m) => n + (counts[m] ?? 0), 0),
    total: () => Object.values(counts).reduce((n, c) => n + c, 0),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Instance {
  proxy: CountingProxy;
  api(
    method: string,
    path: string,
    token?: string,
    body?: unknown,
  ): Promise<{ status: number; body: unknown }>;
  /** This instance's gss_watcher_leader for chain 14601, or null before it is set. */
  leaderGauge(): Promise<number | null>;
  logged(msg: string): boolean;
  output(): string;
  exitCode(): number | null;
  kill(signal: "SIGKILL" | "SIGTERM"): Promise<void>;
}

/**
 * The compiled server as a child process (dist/server.js, what `npm start` runs once the build is
 * up to date), reading the chain through a counting proxy. It ran src/server.ts through tsx's
 * loader until 2026-11-30: about 3 s more CPU per instance, spent compiling the sources.
 */
async function startInstance(name: string, rpcUrl: string, env: Record<string, string>): Promise<Instance> {
  const proxy = await countingProxy(rpcUrl);
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [...CHILD_NODE_FLAGS, SERVER_JS], {
    cwd: REPO,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: "development",
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      CHAIN_14601_RPC_URL: proxy.url,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  let out = "";
  child.stdout?.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const base = `http://127.0.0.1:${port}`;
  const instance: Instance = {
    proxy,
    async api(method, path, token, body) {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    },
    async leaderGauge() {
      const text = await (await fetch(`${base}/metrics`)).text();
      const match = /^gss_watcher_leader\{chain_id="14601"\} (\d+)$/m.exec(text);
      return match ? Number(match[1]) : null;
    },
    logged: (msg) =>
      out.split("\n").some((line) => {
        try {
          return (JSON.parse(line) as { msg?: string }).msg === msg;
        } catch {
          return false;
        }
      }),
    output: () => out.slice(-4000),
    exitCode: () => child.exitCode,
    async kill(signal) {
      process.removeListener("exit", killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        await exited;
      }
      await proxy.close();
    },
  };
  // Booting (tsx compiling the service, migrations) takes a while on a busy machine.
  await until(
    `${name} to listen`,
    async () => {
      assert.equal(child.exitCode, null, `${name} exited: ${out.slice(-2000)}`);
      const res = await fetch(`${base}/health`).catch(() => null);
      return res?.ok ? true : undefined;
    },
    240_000,
  );
  return instance;
}
