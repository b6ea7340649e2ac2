import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openDb } from "../src/db/index.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { freshDatabase } from "./support/fresh-database.ts";
import { startReceiver } from "./support/receiver.ts";
import { apiCaller, ensureBuilt, type ServerProcess, startServer } from "./support/server-process.ts";

/**
 * Issue 11: a service killed with SIGKILL in the middle of delivering webhooks loses no event.
 * The compiled server runs as a child process on PostgreSQL (the machine's server in both CI
 * passes, as in process.test.ts); the receiver holds the first deliveries open, the service is
 * killed while they are in flight, and once a new process is up every event arrives.
 */

let dataDir: string;
let database: { url: string; drop(): Promise<void> };

before(async () => {
  ensureBuilt();
  dataDir = mkdtempSync(join(tmpdir(), "gss-webhooks-"));
  database = await freshDatabase("gss_wh");
});
after(async () => {
  await database.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("webhook delivery across a SIGKILL", () => {
  it("loses no event: deliveries in flight when the process dies are delivered by the next one", async () => {
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      WEBHOOK_TIMEOUT_MS: "2000",
      WEBHOOK_RETRY_BASE_MS: "50",
      WEBHOOK_POLL_INTERVAL_MS: "50",
    };
    const receiver = await startReceiver({ hold: true });
    let server: ServerProcess | null = await startServer(env);
    try {
      await server.waitReady();
      const call = await apiCaller(server, dataDir, "webhooks-process@example.com");
      const slug = `whp-${randomBytes(3).toString("hex")}`;
      await call("/orgs", { name: slug, slug });
      const projectId = `whp-${randomBytes(4).toString("hex")}`;
      await call("/projects", { id: projectId, name: "Webhooks process test", owner: slug });
      await call(`/projects/${projectId}/webhooks`, { url: receiver.url, eventTypes: ["deposit.credited"] });

      const events = 12;
      const db = await openDb({ databaseUrl: database.url, dataDir });
      try {
        for (let i = 0; i < events; i++) {
          await creditDeposit(db, {
            projectId,
            reference: `14601:0xkill:${i}`,
            amountWei: 1000n + BigInt(i),
          });
        }
        // The first deliveries are in flight (held open by the receiver): kill the process now.
        await receiver.waitFor(1);
        server.kill("SIGKILL");
        assert.equal((await server.exited).signal, "SIGKILL");
        server = null;
        receiver.releaseHeld(null);
        const arrivedBeforeKill = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
        assert.ok(arrivedBeforeKill.size < events, "the kill came before every event was sent");

        receiver.fallback = { status: 200 };
        server = await startServer(env);
        await server.waitReady();
        const expected = await db.query<{ event_id: string }>(
          "SELECT event_id FROM event_outbox WHERE project_id = $1 ORDER BY id",
          [projectId],
        );
        assert.equal(expected.length, events);
        // Wait for the rest by counting deliveries, not by time.
        let succeeded = 0;
        for (let poll = 0; poll < 1200 && succeeded < events; poll++) {
          if (poll > 0) await new Promise((r) => setTimeout(r, 100));
          const [row] = await db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'succeeded'",
          );
          succeeded = row!.n;
        }
        assert.equal(succeeded, events, "every delivery succeeded after the restart");
        const ids = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
        assert.deepEqual([...ids].sort(), expected.map((e) => e.event_id).sort());
        const amounts = new Set(receiver.received.map((r) => JSON.parse(r.body).data.amount));
        assert.equal(amounts.size, events);
      } finally {
        await db.close();
      }
    } finally {
      await server?.stop(5000);
      await receiver.close();
    }
  });
});
