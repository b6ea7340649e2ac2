import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { createServer, Socket } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openDb } from "../src/db/index.ts";
import { migrate } from "../src/db/migrate.ts";
import { localIssuer } from "../src/identity/tokens.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { type DevChain, startChain } from "./support/chain/anvil.ts";
import { freshDatabase as freshDatabaseOn, SHARED_PG_URL } from "./support/fresh-database.ts";
import {
  ensureBuilt,
  freePort,
  type LogLine,
  runToExit,
  type ServerProcess,
  STACK_LINE,
  startServer as startServerProcess,
} from "./support/server-process.ts";

/**
 * Issue 10, the process: the compiled server (dist/server.js) as a child process. Start-up
 * failures are one log line and a non-zero exit; production refuses generated secrets and the
 * embedded store; one process per embedded DATA_DIR; SIGTERM under load loses no accepted
 * request; cluster mode (with PostgreSQL + Redis: DATABASE_URL and REDIS_URL set for the run).
 */

const SIGNER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
const TARGET = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const SELECTOR = "0xa0712d68";
const OIDC = {
  OIDC_ISSUER: "https://issuer.invalid",
  OIDC_AUDIENCE: "gas-sponsorship",
  OIDC_JWKS_URL: "https://issuer.invalid/jwks.json",
};
const PG_URL = process.env.DATABASE_URL || null;
// Tests of PostgreSQL-only behaviour run in both CI passes: in the embedded pass they use the
// machine's PostgreSQL and Redis explicitly (a skipped test is a failed test).
const REDIS_URL = process.env.REDIS_URL || null;
const SHARED_REDIS_URL = REDIS_URL ?? "redis://127.0.0.1:6379";

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gss-process-"));
  dirs.push(dir);
  return dir;
}

const freshDatabase = () => freshDatabaseOn("gss_proc");

/** Servers a test started: whatever a failed test left running is stopped after it. */
const started: ServerProcess[] = [];
async function startServer(env: Record<string, string | undefined>): Promise<ServerProcess> {
  const server = await startServerProcess(env);
  started.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop(5_000)));
});

/**
 * A migrated embedded database, made once and copied for every test that starts a server on
 * PGlite: creating one from nothing takes PGlite 5 to 20 s (initdb in WebAssembly).
 */
let template: string;
function dataDirWithDb(): string {
  const dir = tempDir();
  cpSync(template, dir, { recursive: true });
  return dir;
}

before(async () => {
  ensureBuilt();
  template = tempDir();
  const db = await openDb({ databaseUrl: null, dataDir: template });
  await migrate(db);
  await db.close();
});
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The run ended with exactly one fatal line matching `pattern`, the exit code, and no stack trace anywhere. */
function assertOneFailure(result: Awaited<ReturnType<typeof runToExit>>, code: number, pattern: RegExp) {
  const text = `${result.lines.map((l) => l.raw ?? JSON.stringify(l)).join("\n")}\n${result.stderr}`;
  assert.equal(result.code, code, text);
  const fatal = result.lines.filter((l) => l.level === 60);
  assert.equal(fatal.length, 1, `one fatal line:\n${text}`);
  assert.match(String(fatal[0]!.msg), pattern, text);
  assert.ok(!STACK_LINE.test(text), `no stack trace:\n${text}`);
  assert.ok(
    result.lines.every((l) => l.raw === undefined),
    `every stdout line is a JSON log line:\n${text}`,
  );
  return fatal[0]!;
}

// The cases run side by side (each start-up is a second or two of one process's CPU): none shares
// a port, a directory or a server with another, and none registers in `started`, which afterEach
// empties after every test.
describe("start-up failures: one log line, a non-zero exit, no stack trace", { concurrency: true }, () => {
  it("a bad setting exits 2 naming the variable", async () => {
    const result = await runToExit({ DATA_DIR: tempDir(), PORT: "70000" });
    const line = assertOneFailure(result, 2, /^invalid configuration: PORT: must be between 0 and 65535$/);
    assert.deepEqual(line.problems, ["PORT: must be between 0 and 65535"]);
  });

  it("an all-zero signer key is refused without echoing it", async () => {
    const zero = `0x${"0".repeat(64)}`;
    const result = await runToExit({ DATA_DIR: tempDir(), SIGNER_PRIVATE_KEY: zero });
    assertOneFailure(result, 2, /SIGNER_PRIVATE_KEY: is not a valid secp256k1 private key/);
    assert.ok(!JSON.stringify(result.lines).includes("0".repeat(64)));
    // Above the curve order is as invalid as zero.
    const high = await runToExit({ DATA_DIR: tempDir(), SIGNER_PRIVATE_KEY: `0x${"f".repeat(64)}` });
    assertOneFailure(high, 2, /SIGNER_PRIVATE_KEY: is not a valid secp256k1 private key/);
  });

  it("a generated signer key that is corrupt is one line", async () => {
    const dataDir = dataDirWithDb();
    writeFileSync(join(dataDir, "signer.key"), `0x${"0".repeat(64)}\n`);
    const result = await runToExit({ DATA_DIR: dataDir });
    assertOneFailure(result, 1, /^start-up failed: /);
    assert.ok(!existsSync(join(dataDir, "service.lock")), "the data directory lock is released");
  });

  it("an unreachable database is retried with backoff, then one line and exit 1", async () => {
    const closed = await freePort();
    const started = Date.now();
    const result = await runToExit({
      DATA_DIR: tempDir(),
      DATABASE_URL: `postgres://gss:secret-password@127.0.0.1:${closed}/nowhere`,
      DB_CONNECT_TIMEOUT_SEC: "2",
    });
    const elapsed = Date.now() - started;
    const line = assertOneFailure(
      result,
      1,
      new RegExp(
        `^database postgres://gss@127\\.0\\.0\\.1:${closed}/nowhere unreachable after \\d+ attempts over 2 s \\(DB_CONNECT_TIMEOUT_SEC\\): .*ECONNREFUSED`,
      ),
    );
    const retries = result.lines.filter((l) => l.msg === "database unreachable, retrying");
    assert.ok(retries.length >= 2, `retried: ${retries.length}`);
    // 250 ms, 500 ms, 1 s: the delays double.
    assert.deepEqual(
      retries.slice(0, 3).map((l) => l.retryInMs),
      [250, 500, 1000].slice(0, Math.min(3, retries.length)),
    );
    assert.equal(line.attempts, retries.length + 1);
    assert.ok(elapsed >= 1500, `waited ${elapsed} ms`);
    assert.ok(!JSON.stringify(result.lines).includes("secret-password"), "the password is never logged");
  });

  it("a database that refuses the service fails at once, without retrying", async () => {
    const url = new URL(SHARED_PG_URL);
    url.pathname = `/gss_missing_${randomBytes(4).toString("hex")}`;
    const result = await runToExit({
      DATA_DIR: tempDir(),
      DATABASE_URL: url.toString(),
      DB_CONNECT_TIMEOUT_SEC: "30",
    });
    assertOneFailure(result, 1, /refused the service: database "gss_missing_[0-9a-f]+" does not exist/);
    assert.equal(result.lines.filter((l) => l.msg === "database unreachable, retrying").length, 0);
  });

  it("a port in use exits 1 naming the port", async () => {
    const blocker = createServer();
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, "127.0.0.1", () => resolve((blocker.address() as { port: number }).port)),
    );
    try {
      const dataDir = dataDirWithDb();
      const result = await runToExit({ DATA_DIR: dataDir, PORT: String(port) });
      assertOneFailure(result, 1, new RegExp(`^port ${port} is already in use on 127\\.0\\.0\\.1`));
      assert.ok(!existsSync(join(dataDir, "service.lock")), "the data directory lock is released");
    } finally {
      blocker.close();
    }
  });

  it("production refuses a generated signer key, a generated deposit seed, the embedded store and a generated secrets key, generating nothing", async () => {
    const dataDir = tempDir();
    const result = await runToExit({ NODE_ENV: "production", DATA_DIR: dataDir, ...OIDC });
    const line = assertOneFailure(result, 2, /^refusing to start: /);
    const refusals = line.refusals as string[];
    assert.equal(refusals.length, 4, refusals.join("\n"));
    assert.match(refusals[0]!, /^SIGNER_PRIVATE_KEY is not set/);
    assert.match(refusals[1]!, /^DEPOSIT_XPUB is not set: .*does not generate a seed/);
    assert.match(refusals[2]!, /^DATABASE_URL is not set/);
    assert.match(refusals[3]!, /^SECRETS_ENCRYPTION_KEY is not set/);
    for (const r of refusals) assert.match(r, /ALLOW_INSECURE_DEFAULTS=true/);
    assert.deepEqual(readdirSync(dataDir), [], "no key, seed or database was created");
  });

  it("production without OIDC refuses the local token issuer whatever else is set", async () => {
    const result = await runToExit({
      NODE_ENV: "production",
      DATA_DIR: tempDir(),
      ALLOW_INSECURE_DEFAULTS: "true",
    });
    const line = assertOneFailure(
      result,
      2,
      /^refusing to start: the local token issuer is refused in production/,
    );
    assert.equal((line.refusals as string[]).length, 1);
  });

  it("ALLOW_INSECURE_DEFAULTS=true runs production on the defaults, with one warning each", async () => {
    const server = await startServerProcess({
      NODE_ENV: "production",
      DATA_DIR: dataDirWithDb(),
      ALLOW_INSECURE_DEFAULTS: "true",
      ...OIDC,
    });
    try {
      await server.waitReady();
      const warnings = server.lines.filter(
        (l) => l.level === 40 && String(l.msg).startsWith("ALLOW_INSECURE_DEFAULTS"),
      );
      assert.deepEqual(
        warnings.map((l) => l.setting),
        ["SIGNER_PRIVATE_KEY", "DEPOSIT_XPUB", "DATABASE_URL", "SECRETS_ENCRYPTION_KEY"],
      );
    } finally {
      assert.deepEqual(await server.stop(), { code: 0, signal: null });
    }
  });

  it("cluster mode needs PostgreSQL and Redis", async () => {
    const result = await runToExit({ DATA_DIR: tempDir(), WORKERS: "2" });
    const line = assertOneFailure(result, 2, /^refusing to start: /);
    const refusals = line.refusals as string[];
    assert.match(refusals[0]!, /^WORKERS=2 needs DATABASE_URL: the embedded PGlite store/);
    assert.match(refusals[1]!, /^WORKERS=2 needs REDIS_URL: in-memory rate limits/);
  });
});

describe("one process per embedded DATA_DIR", () => {
  it("a second process refuses to start, naming the holder; the lock goes with the holder", async () => {
    const dataDir = dataDirWithDb();
    const first = await startServer({ DATA_DIR: dataDir });
    await first.waitReady();
    const lock = JSON.parse(readFileSync(join(dataDir, "service.lock"), "utf8"));
    assert.equal(lock.pid, first.pid);
    assert.equal(lock.host, hostname());

    const second = await runToExit({ DATA_DIR: dataDir });
    const line = assertOneFailure(
      second,
      1,
      new RegExp(
        `^cannot use DATA_DIR .*: the data directory is in use by process ${first.pid} on ${hostname()} \\(started ${lock.startedAt}\\)`,
      ),
    );
    assert.equal((line.holder as { pid: number }).pid, first.pid);
    // The first one never noticed, and still serves.
    assert.equal((await fetch(`${first.baseUrl}/health`)).status, 200);

    assert.deepEqual(await first.stop(), { code: 0, signal: null });
    assert.ok(!existsSync(join(dataDir, "service.lock")), "released on exit");
    const third = await startServer({ DATA_DIR: dataDir });
    await third.waitReady();
    assert.deepEqual(await third.stop(), { code: 0, signal: null });
  });

  it("a holder that died without letting go is recognised as gone", async () => {
    const dataDir = dataDirWithDb();
    const first = await startServer({ DATA_DIR: dataDir });
    await first.waitReady();
    first.kill("SIGKILL");
    await first.exited;
    assert.ok(existsSync(join(dataDir, "service.lock")), "SIGKILL leaves the lock behind");
    const second = await startServer({ DATA_DIR: dataDir });
    await second.waitReady();
    const lock = JSON.parse(readFileSync(join(dataDir, "service.lock"), "utf8"));
    assert.equal(lock.pid, second.pid);
    assert.deepEqual(await second.stop(), { code: 0, signal: null });
  });
});

/** A funded project with an API key and an allowlisted (TARGET, SELECTOR), made through the API. */
async function seedProject(server: ServerProcess, dataDir: string) {
  const token = await (await localIssuer(dataDir)).issue("process-test@example.com");
  const call = async (path: string, body: unknown, method = "POST") => {
    const res = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    assert.ok(res.ok, `${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const slug = `proc-${randomBytes(3).toString("hex")}`;
  await call("/orgs", { name: slug, slug });
  const projectId = `proc-${randomBytes(4).toString("hex")}`;
  await call("/projects", { id: projectId, name: "Process test", owner: slug });
  // The test's senders have no code: the project sponsors them on caps alone.
  await call(`/projects/${projectId}`, { unknownAccounts: "caps_only" }, "PATCH");
  const key = await call(`/projects/${projectId}/apikeys`, { rateLimit: 1_000_000 });
  await call(`/projects/${projectId}/allowlist`, { targetContract: TARGET, functionSelector: SELECTOR });
  return { projectId, apiKey: String(key.apiKey) };
}

interface Outcome {
  nonce: string;
  /** Null: no response at all (the connection was refused or closed before one began). */
  status: number | null;
  /** A response whose body arrived whole and parses (and, for a 200, is an authorization). */
  complete: boolean;
  error?: string;
  authorizationId?: string;
  sentAfterSigterm: boolean;
}

function authorizeBody(projectId: string, nonce: string) {
  return JSON.stringify({
    projectId,
    user: `0x${randomBytes(20).toString("hex")}`,
    target: TARGET,
    selector: SELECTOR,
    estimatedGas: 150_000,
    chainId: 14601,
    clientNonce: nonce,
  });
}

function judge(status: number, text: string): Pick<Outcome, "complete" | "authorizationId"> {
  try {
    const json = JSON.parse(text) as { authorizationId?: string; paymasterAndData?: string };
    if (status !== 200) return { complete: true };
    const ok = typeof json.authorizationId === "string" && typeof json.paymasterAndData === "string";
    return { complete: ok, authorizationId: json.authorizationId };
  } catch {
    return { complete: false };
  }
}

/** One authorize request over a keep-alive agent. */
function request(
  agent: http.Agent,
  port: number,
  apiKey: string,
  body: string,
  nonce: string,
  afterSigterm: () => boolean,
) {
  return new Promise<Outcome>((resolve) => {
    const sentAfterSigterm = afterSigterm();
    const req = http.request(
      {
        agent,
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/sponsor/authorize",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () =>
          resolve({ nonce, status: res.statusCode!, ...judge(res.statusCode!, text), sentAfterSigterm }),
        );
        res.on("aborted", () =>
          resolve({ nonce, status: res.statusCode!, complete: false, error: "aborted", sentAfterSigterm }),
        );
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) =>
      resolve({ nonce, status: null, complete: false, error: err.code ?? err.message, sentAfterSigterm }),
    );
    req.end(body);
  });
}

/**
 * A request whose headers and half its body are sent now: the server has received and routed it
 * (it is in flight) but cannot answer until `finish()` sends the rest.
 */
async function slowRequest(server: ServerProcess, apiKey: string, body: string) {
  const socket = new Socket();
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.connect(server.port, "127.0.0.1", () => resolve());
  });
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  socket.write(
    `POST /sponsor/authorize HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${apiKey}\r\n` +
      `content-type: application/json\r\ncontent-length: ${bytes.length}\r\n\r\n`,
  );
  socket.write(bytes.subarray(0, half));
  let received = "";
  socket.setEncoding("utf8").on("data", (c: string) => {
    received += c;
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.on("error", () => {});
  // Received means logged: "incoming request" (at debug) carries the client's port once routed.
  await server.waitForLine(
    (l) => (l.req as { remotePort?: number } | undefined)?.remotePort === socket.localPort,
    15_000,
  );
  return {
    async finish(): Promise<{ status: number; text: string; connection: string | undefined }> {
      socket.write(bytes.subarray(half));
      await closed;
      const [head = "", text = ""] = received.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      return { status, text, connection: /\r\nconnection: ([^\r]+)/i.exec(head)?.[1] };
    },
  };
}

describe(`SIGTERM under load (${PG_URL && REDIS_URL ? "PostgreSQL + Redis" : "embedded"})`, () => {
  let chain: DevChain;
  before(async () => {
    chain = await startChain();
  });
  after(async () => {
    await chain?.stop();
  });

  it("answers every request it accepted, whole; requests in flight at SIGTERM get their 200; exit 0", async () => {
    const dataDir = dataDirWithDb();
    const database = PG_URL && REDIS_URL ? await freshDatabase() : null;
    const env = {
      DATA_DIR: dataDir,
      SIGNER_PRIVATE_KEY: SIGNER_KEY,
      CHAIN_14601_PAYMASTER_ADDRESS: PAYMASTER,
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      SHUTDOWN_TIMEOUT_MS: "15000",
      // The "incoming request" line (debug) tells when a request has been received.
      LOG_LEVEL: "debug",
      ...(database ? { DATABASE_URL: database.url, REDIS_URL: REDIS_URL! } : {}),
    };
    const store = { databaseUrl: database?.url ?? null, dataDir };
    try {
      let server = await startServer(env);
      await server.waitReady();
      const seeded = await seedProject(server, dataDir);
      if (!database) {
        // PGlite is one process: the server lets go of the data directory while the tank is credited.
        assert.deepEqual(await server.stop(), { code: 0, signal: null });
      }
      const db = await openDb(store);
      await creditDeposit(db, {
        projectId: seeded.projectId,
        reference: "process-test",
        amountWei: 10n ** 30n,
      });
      await db.close();
      if (!database) {
        server = await startServer(env);
        await server.waitReady();
      }
      const first = await fetch(`${server.baseUrl}/sponsor/authorize`, {
        method: "POST",
        headers: { authorization: `Bearer ${seeded.apiKey}`, "content-type": "application/json" },
        body: authorizeBody(seeded.projectId, "warm-up"),
      });
      assert.equal(first.status, 200, await first.text());

      let sigtermAt = 0;
      let exited = false;
      void server.exited.then(() => {
        exited = true;
      });
      const outcomes: Outcome[] = [];
      const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
      let n = 0;
      const loop = async () => {
        while (!exited) {
          const nonce = `load-${n++}`;
          const outcome = await request(
            agent,
            server.port,
            seeded.apiKey,
            authorizeBody(seeded.projectId, nonce),
            nonce,
            () => sigtermAt > 0,
          );
          outcomes.push(outcome);
          if (outcome.status === null) await sleep(5);
        }
      };
      const loops = Array.from({ length: 32 }, loop);
      await sleep(1500);
      const slow = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          slowRequest(server, seeded.apiKey, authorizeBody(seeded.projectId, `in-flight-${i}`)),
        ),
      );
      const before = outcomes.length;
      sigtermAt = Date.now();
      server.kill("SIGTERM");
      await server.waitForLine((l) => l.msg === "shutting down");
      // Draining: the in-flight requests' bodies arrive only now.
      await sleep(300);
      const inFlight = await Promise.all(slow.map((s) => s.finish()));
      const { code, signal } = await server.exited;
      const shutdownMs = Date.now() - sigtermAt;
      await Promise.all(loops);
      agent.destroy();

      assert.deepEqual({ code, signal }, { code: 0, signal: null }, server.stderr());
      assert.ok(shutdownMs < 15_000, `stopped in ${shutdownMs} ms`);
      assert.ok(before > 20, `load before SIGTERM: ${before} responses`);
      for (const r of inFlight) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.connection, "close", "answered, then the connection closes");
        assert.ok(judge(200, r.text).complete, r.text);
      }
      // Every response that began arrived whole: a 200 authorization or a 503 refusal.
      const answered = outcomes.filter((o) => o.status !== null);
      const broken = answered.filter((o) => !o.complete || (o.status !== 200 && o.status !== 503));
      assert.deepEqual(broken, [], "every response is whole");
      // No response: only connection errors, never a response cut short.
      const errors = new Set(outcomes.filter((o) => o.status === null).map((o) => o.error));
      for (const e of errors) assert.ok(["ECONNREFUSED", "ECONNRESET", "EPIPE"].includes(e!), `error ${e}`);
      const refusedAfter = answered.filter((o) => o.status === 503);
      for (const o of refusedAfter) assert.ok(o.sentAfterSigterm, "503s only once draining");

      // The ledger's view: every reservation made was answered with its 200. A request the server
      // accepted and then lost would be a reservation here with no response to match.
      const check = await openDb(store);
      try {
        // Every request here carried a nonce, so each reservation has its replay (migration 020).
        const rows = await check.query<{ client_nonce: string | null; auth_id: string }>(
          `SELECT r.client_nonce, s.auth_id FROM sponsorships s
             LEFT JOIN sponsorship_replays r ON r.project_id = s.project_id AND r.auth_id = s.auth_id
           WHERE s.project_id = $1`,
          [seeded.projectId],
        );
        const delivered = new Map(
          [
            ...answered.filter((o) => o.status === 200).map((o) => [o.nonce, o.authorizationId] as const),
            ...inFlight.map((r, i) => [`in-flight-${i}`, judge(200, r.text).authorizationId] as const),
            ["warm-up", undefined] as const,
          ].map(([nonce, id]) => [nonce, id]),
        );
        const lost = rows.filter((r) => r.client_nonce === null || !delivered.has(r.client_nonce));
        assert.deepEqual(lost, [], "a reservation whose response was never delivered");
        for (const r of rows) {
          const id = delivered.get(r.client_nonce!);
          if (id !== undefined) assert.equal(r.auth_id, id);
        }
        assert.equal(rows.length, delivered.size);
        console.log(
          `    ${answered.length} responses (${answered.length - refusedAfter.length} × 200, ${refusedAfter.length} × 503 while draining), ` +
            `${outcomes.length - answered.length} refused connections, ${inFlight.length} in flight at SIGTERM: 200; stopped in ${shutdownMs} ms`,
        );
      } finally {
        await check.close();
      }
    } finally {
      await database?.drop();
    }
  });
});

// Cluster mode needs PostgreSQL and Redis; in the embedded pass it uses the machine's own.
describe("cluster mode (WORKERS=2)", () => {
  it("forks workers that share the port, replaces one that dies, and drains all on SIGTERM", async () => {
    const database = await freshDatabase();
    try {
      const primary = await startServer({
        DATA_DIR: tempDir(),
        DATABASE_URL: database.url,
        REDIS_URL: SHARED_REDIS_URL,
        WORKERS: "2",
        SIGNER_PRIVATE_KEY: SIGNER_KEY,
      });
      await primary.waitReady();
      await primary.waitForLine((l) => l.msg === "all workers listening");
      const ready = (worker: number) => (l: LogLine) =>
        l.msg === "gas sponsorship service ready" && l.worker === worker;
      const w1 = await primary.waitForLine(ready(1));
      const w2 = await primary.waitForLine(ready(2));
      assert.notEqual(w1.pid, primary.pid);
      assert.notEqual(w2.pid, primary.pid);
      // Only worker 1 runs the chain watchers.
      assert.equal(w1.watchers, true);
      assert.equal(w2.watchers, false);

      // Both workers answer on the one port.
      const served = new Set<unknown>();
      let healthRequests = 1; // waitReady's
      for (let i = 0; i < 40 && served.size < 2; i++) {
        healthRequests++;
        const res = await fetch(`${primary.baseUrl}/health`, { headers: { connection: "close" } });
        await res.arrayBuffer();
        assert.equal(res.status, 200);
        for (const l of primary.lines) if (l.msg === "request completed") served.add(l.pid);
      }
      assert.deepEqual([...served].sort(), [w1.pid, w2.pid].sort());

      // /metrics answers for the whole cluster, whichever worker the scrape reaches: the /health
      // requests both workers served are added up (each worker alone counted only its share).
      for (let i = 0; i < 2; i++) {
        const scrape = await fetch(`${primary.baseUrl}/metrics`, { headers: { connection: "close" } });
        assert.equal(scrape.status, 200);
        const text = await scrape.text();
        const counted = [
          ...text.matchAll(
            /^gss_http_requests_total\{[^}]*route="\/health"[^}]*status_code="200"[^}]*\} (\d+)$/gm,
          ),
        ].reduce((sum, m) => sum + Number(m[1]), 0);
        // At least: a health poll of waitReady that timed out may still have been answered.
        assert.ok(counted >= healthRequests, `${counted} /health requests counted, ${healthRequests} made`);
        assert.doesNotMatch(text, /primary did not answer/);
      }

      // A worker that dies is replaced, under the same index.
      process.kill(w2.pid as number, "SIGKILL");
      await primary.waitForLine((l) => l.msg === "worker 2 died (signal SIGKILL): restarting it");
      const w2b = await primary.waitForLine((l) => ready(2)(l) && l.pid !== w2.pid);
      assert.equal(w2b.watchers, false);
      assert.equal((await fetch(`${primary.baseUrl}/health`)).status, 200);

      assert.deepEqual(await primary.stop(), { code: 0, signal: null });
      const stopped = primary.lines.filter((l) => l.msg === "worker stopped");
      assert.deepEqual(
        stopped.map((l) => l.code),
        [0, 0],
      );
      for (const pid of [w1.pid, w2b.pid]) {
        assert.throws(() => process.kill(pid as number, 0), /ESRCH/, `worker ${pid} is gone`);
      }
    } finally {
      await database.drop();
    }
  });
});
