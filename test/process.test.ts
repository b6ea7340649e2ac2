// test-scope: store-free — every server it starts is given its store explicitly (the run's DATABASE_URL and REDIS_URL are kept from them); the cluster test uses the machine's PostgreSQL and Redis in either pass
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { SHARED_PG_URL } from "./support/fresh-database.ts";
import { processFixture } from "./support/process-fixture.ts";
import {
  freePort,
  type LogLine,
  runToExit,
  STACK_LINE,
  startServer as startServerProcess,
} from "./support/server-process.ts";

/**
 * Issue 10, the process: the compiled server (dist/server.js) as a child process. Start-up
 * failures are one log line and a non-zero exit; production refuses generated secrets and the
 * embedded store; one process per embedded DATA_DIR; cluster mode, on the machine's PostgreSQL
 * and Redis. Every server here is given its store explicitly, so the file runs the same in both
 * CI passes and only in the embedded one; SIGTERM under load, which runs on the run's store, is
 * in process-sigterm.test.ts.
 */

const SIGNER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const _PAYMASTER = "0x00000000000000000000000000000000000000aa";
const _TARGET = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const _SELECTOR = "0xa0712d68";
const OIDC = {
  OIDC_ISSUER: "https://issuer.invalid",
  OIDC_AUDIENCE: "gas-sponsorship",
  OIDC_JWKS_URL: "https://issuer.invalid/jwks.json",
};
// Tests of PostgreSQL-only behaviour use the machine's PostgreSQL and Redis explicitly (a skipped
// test is a failed test).
const SHARED_REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379";

const { tempDir, startServer, dataDirWithDb, freshDatabase } = processFixture();

/** The run ended with exactly one fatal line matching `pattern`, the exit code, and no stack trace anywhere. */
function assertOneFailure(result: Awaited<ReturnType<typeof runToExit>>, code: number, pattern: RegExp) {
  const text = `${result.lines.map((l) => l.raw ?? JSON.stringify(l)).join("\n")}\n${result.stderr}`;
  assert.ok(!result.timedOut, `the server was still running when the test gave up on it:\n${text}`);
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

// The cases run three at a time (each start-up is a second or two of one process's CPU): none
// shares a port, a directory or a server with another, and none registers in `started`, which
// afterEach empties after every test. All ten at once, beside CI's other test processes, starved
// each other past runToExit's bound.
describe("start-up failures: one log line, a non-zero exit, no stack trace", { concurrency: 3 }, () => {
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
      // Lines come out in order, in blocks: once the ready line is here, the warnings before it are.
      await server.waitForLine((l) => l.msg === "gas sponsorship service ready");
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
      let healthRequests = 1; // waitReady's
      for (let i = 0; i < 40 && primary.servedBy().size < 2; i++) {
        healthRequests++;
        const res = await fetch(`${primary.baseUrl}/health`, { headers: { connection: "close" } });
        await res.arrayBuffer();
        assert.equal(res.status, 200);
      }
      // A worker writes its log lines in blocks, at most LOG_FLUSH_MS (100 ms) late: the lines of
      // the last requests may still be on their way.
      const served = await primary.waitForServers(2);
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
