import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import http from "node:http";
import { Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openDb } from "../src/db/index.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { type DevChain, startChain } from "./support/chain/anvil.ts";
import { processFixture } from "./support/process-fixture.ts";
import { apiCaller, type ServerProcess } from "./support/server-process.ts";

/**
 * Issue 10, the process: SIGTERM under load loses no accepted request. The compiled server
 * (dist/server.js) runs as a child process on the run's store: PGlite in the embedded pass,
 * PostgreSQL + Redis in the other (split from process.test.ts, whose start-up, DATA_DIR and
 * cluster tests choose their stores themselves and run once).
 */

const SIGNER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
const TARGET = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const SELECTOR = "0xa0712d68";
// The run's store: PostgreSQL + Redis when both are set, PGlite otherwise.
const PG_URL = process.env.DATABASE_URL || null;
const REDIS_URL = process.env.REDIS_URL || null;

const { startServer, dataDirWithDb, freshDatabase } = processFixture();

/** A funded project with an API key and an allowlisted (TARGET, SELECTOR), made through the API. */
async function seedProject(server: ServerProcess, dataDir: string) {
  const call = await apiCaller(server, dataDir, "process-test@example.com");
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
          `SELECT r.client_nonce, '0x' || encode(s.auth_id, 'hex') AS auth_id FROM sponsorships s
             LEFT JOIN sponsorship_replays r
               ON r.project_id = s.project_id AND r.auth_id = '0x' || encode(s.auth_id, 'hex')
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
