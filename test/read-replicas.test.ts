/**
 * Read replicas (DATABASE_READ_URL), against a real streaming replica: a PostgreSQL cluster of
 * this file's own on another port, and a hot standby made from it with pg_basebackup. The
 * shared server on 5432 is never involved, so the file runs the same under both stores.
 *
 * What it shows: lag-tolerant reads (events, analytics, deposits, funds parity) are served by
 * the replica while it keeps up; a replica whose replay is paused is used only while its lag
 * stays under DATABASE_READ_MAX_LAG_MS, and past that its reads go to the primary; what the
 * dashboard writes reads back at once however far the replica is behind; a replica that stops,
 * or is promoted, costs no request an error, and one that comes back is used again.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import type { ReadRouter } from "../src/db/replicas.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  type TestApp,
  type TestDb,
} from "./support/app.ts";
import { type PgCluster, type PgReplica, startPgCluster, startPgReplica } from "./support/pg-cluster.ts";
import { until as eventually } from "./support/poll.ts";
import { parseExposition } from "./support/prometheus.ts";

let primary: PgCluster;
let replica: PgReplica;
let store: TestDb;
/** Uses the replica while it lags up to a minute: what it serves shows where a read went. */
let patient: TestApp;
/** Moves reads to the primary once the replica lags 300 ms. */
let strict: TestApp;
let project: Awaited<ReturnType<typeof fundedProject>>;

const router = (t: TestApp) => t.services.reads as ReadRouter;

const usable = async (t: TestApp) => {
  await router(t).check();
  const [s] = router(t).states();
  return s!.up && s!.detail === undefined;
};

async function eventCount(t: TestApp): Promise<number> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${project.projectId}/analytics/events?limit=100`,
    // Each instance signs its own tokens; the project's owner, signed in to this one.
    token: await t.token("owner@example.com"),
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { events: unknown[] }).events.length;
}

async function readsServed(t: TestApp, target: "replica" | "primary"): Promise<number> {
  const m = parseExposition((await t.request({ method: "GET", url: "/metrics" })).body);
  return m.samples.find((s) => s.name === "gss_db_reads_total" && s.labels.target === target)?.value ?? 0;
}

before(async () => {
  primary = await startPgCluster();
  replica = await startPgReplica(primary);
  const db = await openPostgres({ url: primary.url, max: 10 });
  await migrate(db);
  store = { db, schema: null, drop: () => db.close() };
  const env = (maxLagMs: number) => ({
    DATABASE_URL: primary.url,
    DATABASE_READ_URL: replica.url,
    DATABASE_READ_MAX_LAG_MS: String(maxLagMs),
  });
  patient = await startTestApp({ db: store, env: env(60_000) });
  strict = await startTestApp({ db: store, env: env(300) });
  project = await fundedProject(patient, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 18n);
});

after(async () => {
  await patient?.close();
  await strict?.close();
  await store?.drop();
  await replica?.destroy();
  await primary?.destroy();
});

describe("read replicas", () => {
  test("a replica that keeps up serves the events, analytics, deposits and funds parity", async () => {
    assert.equal((await authorizeMint(patient, project)).statusCode, 200);
    await eventually("the replica is in use", () => usable(patient));
    await eventually("the replica has the authorization", async () => (await eventCount(patient)) === 1);
    const before = await readsServed(patient, "replica");
    for (const url of [
      `/projects/${project.projectId}/analytics/overview`,
      `/projects/${project.projectId}/analytics/money`,
      `/projects/${project.projectId}/deposits`,
      `/projects/${project.projectId}/funds/parity`,
    ]) {
      const res = await patient.request({ method: "GET", url, token: project.ownerToken });
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
    }
    const parity = await patient.request({
      method: "GET",
      url: `/projects/${project.projectId}/funds/parity`,
      token: project.ownerToken,
    });
    assert.equal((parity.json() as { inSync: boolean }).inSync, true, "one snapshot: the ledger adds up");
    assert.ok((await readsServed(patient, "replica")) > before, "the replica served them");
    const ready = await patient.request({ method: "GET", url: "/health/ready" });
    assert.equal(
      (ready.json() as { checks: Record<string, { status: string }> }).checks["replica:0"]?.status,
      "ok",
    );
  });

  test("the primary's and the replica's sessions run without JIT compilation", async () => {
    // A short read the planner misjudged as long compiled hundreds of functions before running
    // (db/postgres.ts): the service's sessions turn it off, on every server they read.
    await eventually("the replica is in use", () => usable(patient));
    const before = await readsServed(patient, "replica");
    const [onReplica] = await router(patient).query<{ jit: string }>("SHOW jit");
    assert.ok((await readsServed(patient, "replica")) > before, "the replica answered");
    const [onPrimary] = await patient.services.db.query<{ jit: string }>("SHOW jit");
    const [server] = await replica.query<{ jit: string }>("SHOW jit");
    assert.deepEqual([onPrimary?.jit, onReplica?.jit, server?.jit], ["off", "off", "on"]);
  });

  test("a replica paused past the bound hands its reads to the primary; under the bound it is still used", async () => {
    await replica.query("SELECT pg_wal_replay_pause()");
    try {
      assert.equal((await authorizeMint(patient, project)).statusCode, 200);
      // The patient instance still reads the paused replica: it does not have the second one.
      assert.equal(await eventCount(patient), 1, "served by the replica, which is behind");
      // The strict one notices the lag pass 300 ms and reads the primary.
      await eventually("the strict instance leaves the replica", async () => !(await usable(strict)));
      assert.equal(await eventCount(strict), 2, "served by the primary");
      const ready = await strict.request({ method: "GET", url: "/health/ready" });
      const check = (ready.json() as { checks: Record<string, { status: string; detail?: string }> }).checks[
        "replica:0"
      ];
      assert.equal(check?.status, "degraded");
      assert.match(check?.detail ?? "", /DATABASE_READ_MAX_LAG_MS/);
      assert.equal(ready.statusCode, 200, "a lagging replica does not take the instance out");

      // What the dashboard writes reads back at once, although the replica is behind.
      const patch = await patient.request({
        method: "PATCH",
        url: `/projects/${project.projectId}`,
        token: project.ownerToken,
        payload: { dailyCap: "900000000000000001" },
      });
      assert.equal(patch.statusCode, 200, patch.body);
      const read = await patient.request({
        method: "GET",
        url: `/projects/${project.projectId}`,
        token: project.ownerToken,
      });
      assert.equal((read.json() as { daily_cap: string }).daily_cap, "900000000000000001");
    } finally {
      await replica.query("SELECT pg_wal_replay_resume()");
    }
    await eventually("the replica catches up", async () => (await eventCount(patient)) === 2);
    await eventually("the strict instance uses the replica again", () => usable(strict));
  });

  test("a replica that stops costs no request an error, is used again when it returns, and not once promoted", async () => {
    await replica.stop("immediate");
    for (let i = 0; i < 10; i++)
      assert.equal(await eventCount(patient), 2, "each read answered by the primary");
    const ready = await patient.request({ method: "GET", url: "/health/ready" });
    assert.equal(ready.statusCode, 200);
    assert.equal(
      (ready.json() as { checks: Record<string, { status: string }> }).checks["replica:0"]?.status,
      "degraded",
    );
    const parity = await patient.request({
      method: "GET",
      url: `/projects/${project.projectId}/funds/parity`,
      token: project.ownerToken,
    });
    assert.equal(parity.statusCode, 200, parity.body);

    await replica.start();
    await eventually("the replica is used again", () => usable(patient));
    const before = await readsServed(patient, "replica");
    assert.equal(await eventCount(patient), 2);
    assert.ok((await readsServed(patient, "replica")) > before, "the replica served it");

    // Promoted, it no longer follows this primary: whatever it holds, it is not read.
    await replica.promote();
    await eventually("a promoted replica is left alone", async () => !(await usable(patient)));
    assert.match(router(patient).states()[0]!.detail ?? "", /not in recovery/);
    assert.equal((await authorizeMint(patient, project)).statusCode, 200);
    assert.equal(await eventCount(patient), 3, "the primary's answer");
  });
});
