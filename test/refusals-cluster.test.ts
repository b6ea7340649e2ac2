/**
 * The refusal log in cluster mode (WORKERS=2, the compiled server as `npm start` runs it): each
 * worker buffers the refusals it answered and writes its own batches, so the counts add up
 * exactly across workers, and a project's detailed rows stay within the per-minute sample of each
 * worker. Cluster mode needs PostgreSQL and Redis, so this runs on the machine's own in both
 * passes (as the process tests do).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { seedProject, startTestApp } from "./support/app.ts";
import { freshDatabase } from "./support/fresh-database.ts";
import { ensureBuilt, startServer } from "./support/server-process.ts";

const SIGNER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const REDIS_URL = process.env.REDIS_URL || "redis://127.0.0.1:6379";
const DETAIL_PER_MINUTE = 3;
const REQUESTS = 60;

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

describe("refusals in cluster mode", () => {
  it("every worker writes its own refusals: counts exact, details within each worker's sample", async () => {
    ensureBuilt();
    const database = await freshDatabase("gss_refusals");
    cleanups.push(() => database.drop());
    // The project and its key are made in-process on the same database (migrated here first).
    const db = await openPostgres({ url: database.url });
    await migrate(db);
    const t = await startTestApp({ db: { db, schema: null, drop: async () => {} } });
    cleanups.push(async () => {
      await t.close();
      await db.close();
    });
    // No allowlist entry: every authorization the cluster answers is a refusal.
    const p = await seedProject(t);

    const dataDir = mkdtempSync(join(tmpdir(), "gss-refusals-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const primary = await startServer({
      DATA_DIR: dataDir,
      DATABASE_URL: database.url,
      REDIS_URL,
      WORKERS: "2",
      SIGNER_PRIVATE_KEY: SIGNER_KEY,
      REFUSAL_DETAIL_PER_MINUTE: String(DETAIL_PER_MINUTE),
    });
    cleanups.push(async () => void (await primary.stop()));
    await primary.waitReady();
    await primary.waitForLine((l) => l.msg === "all workers listening");

    const body = JSON.stringify({
      projectId: p.projectId,
      user: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
      target: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
      selector: "0xa0712d68",
      estimatedGas: 150_000,
      chainId: 14601,
    });
    const codes = new Map<string, number>();
    for (let i = 0; i < REQUESTS; i++) {
      // A connection each: the primary hands connections to the workers in turn.
      const res = await fetch(`${primary.baseUrl}/sponsor/authorize`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${p.apiKey}`,
          connection: "close",
        },
        body,
      });
      assert.ok(res.status >= 400, `refused: ${res.status}`);
      const code = ((await res.json()) as { code: string }).code;
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    // Each worker writes its log in blocks: the last requests' lines may be 100 ms behind.
    const servedBy = await primary.waitForServers(2, "/sponsor/authorize");
    assert.equal(servedBy.size, 2, "both workers answered refusals");
    // SIGTERM: each worker writes what it still holds before its database pool closes.
    assert.deepEqual(await primary.stop(), { code: 0, signal: null });

    const counted = await db.query<{ code: string; n: string }>(
      "SELECT code, sum(refused)::text AS n FROM refusal_days WHERE project_id = $1 GROUP BY code",
      [p.projectId],
    );
    assert.deepEqual(
      Object.fromEntries(counted.map((r) => [r.code, Number(r.n)])),
      Object.fromEntries(codes),
    );
    const perMinute = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM refusals WHERE project_id = $1
       GROUP BY date_trunc('minute', created_at)`,
      [p.projectId],
    );
    const rows = perMinute.reduce((sum, r) => sum + Number(r.n), 0);
    assert.ok(rows >= DETAIL_PER_MINUTE, `${rows} detailed rows`);
    for (const r of perMinute) assert.ok(Number(r.n) <= 2 * DETAIL_PER_MINUTE, `${r.n} rows in one minute`);
  });
});
