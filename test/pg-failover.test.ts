/**
 * A PostgreSQL failover under authorize load: a primary and a synchronous streaming replica of
 * this file's own, the service connected through a TCP proxy (test/support/tcp-proxy.ts) as it
 * would be through HAProxy, PgBouncer or a DNS name. The primary is killed mid-load, the replica
 * promoted, the proxy pointed at it; the service is not restarted or told.
 *
 * What must hold: no request is answered 500 (the gap is 503 with Retry-After); every
 * reservation the service acknowledged survives (synchronous replication: a commit is
 * acknowledged only once the replica has it); each clientNonce, retried after the failover,
 * gets the very answer it got before or, if it got none, one answer that its further retries
 * repeat; one reservation per nonce, no more; and the tank adds up (funds parity in sync).
 * With asynchronous replication the second point does not hold — README, "PostgreSQL failover".
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import {
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  type TestApp,
  type TestDb,
} from "./support/app.ts";
import { type PgCluster, type PgReplica, startPgCluster, startPgReplica } from "./support/pg-cluster.ts";
import { until as eventually } from "./support/poll.ts";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.ts";

const TANK_WEI = 10n ** 20n;
const WORKERS = 8;

let primary: PgCluster;
let replica: PgReplica;
let proxy: TcpProxy;
let store: TestDb;
let t: TestApp;
let project: Awaited<ReturnType<typeof fundedProject>>;

const body = (nonce: string) => ({
  projectId: project.projectId,
  user: `0x${nonce.replace(/\D/g, "").padStart(40, "7")}`,
  target: MINT_TARGET,
  selector: MINT_SELECTOR,
  estimatedGas: 150_000,
  chainId: 14601,
  clientNonce: nonce,
});

function authorize(nonce: string) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: project.apiKey,
    payload: body(nonce),
  });
}

before(async () => {
  primary = await startPgCluster();
  replica = await startPgReplica(primary);
  // Synchronous from here on (the base backup is taken, so the replica does not inherit it and
  // can commit on its own once promoted): a commit returns once the replica has flushed it.
  await primary.query("ALTER SYSTEM SET synchronous_standby_names = '*'");
  await primary.query("SELECT pg_reload_conf()");
  await eventually("the replica is synchronous", async () => {
    const rows = await primary.query<{ sync_state: string }>("SELECT sync_state FROM pg_stat_replication");
    return rows.some((r) => r.sync_state === "sync");
  });
  proxy = await startTcpProxy(primary.port);
  const url = `postgres://postgres@127.0.0.1:${proxy.port}/postgres`;
  const db = await openPostgres({ url, max: 10, connectTimeoutMs: 2000 });
  await migrate(db);
  store = { db, schema: null, drop: () => db.close() };
  t = await startTestApp({ db: store, env: { DATABASE_URL: url } });
  project = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, TANK_WEI);
});

after(async () => {
  await t?.close();
  await store?.drop();
  await proxy?.close();
  await replica?.destroy();
  await primary?.destroy();
});

describe("PostgreSQL failover under authorize load", () => {
  test("no 500, no acknowledged reservation lost, one reservation per clientNonce, every retry answered alike, parity in sync", async () => {
    const first = new Map<string, { status: number; body: string }>();
    let next = 0;
    let ok = 0;
    let stop = false;
    /** When the primary was killed and when the proxy was pointed at the promoted replica. */
    let killedAt = 0;
    let switchedAt = 0;
    let firstOkAfterKill = 0;
    const worker = async () => {
      while (!stop) {
        const nonce = `n${next++}`;
        const sent = performance.now();
        const res = await authorize(nonce);
        first.set(nonce, { status: res.statusCode, body: res.body });
        if (res.statusCode === 200) ok++;
        if (res.statusCode === 200 && killedAt > 0 && sent > killedAt && firstOkAfterKill === 0) {
          firstOkAfterKill = performance.now();
        } else if (res.statusCode === 503) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const load = Array.from({ length: WORKERS }, worker);

    await eventually("load on the primary", async () => ok >= 50);
    // The primary dies mid-load; its replica takes over behind the same address.
    killedAt = performance.now();
    await primary.stop("immediate");
    proxy.dropAll();
    const okAtFailure = ok;
    await replica.promote();
    proxy.retarget(replica.port);
    switchedAt = performance.now();
    await eventually("load on the promoted replica", async () => ok >= okAtFailure + 50);
    stop = true;
    await Promise.all(load);

    const statuses = new Map<number, number>();
    for (const { status } of first.values()) statuses.set(status, (statuses.get(status) ?? 0) + 1);
    console.log(
      `# failover: ${first.size} nonces, ${okAtFailure} answered 200 before the primary died; answers ${JSON.stringify(Object.fromEntries(statuses))}; ` +
        `first 200 ${Math.round(firstOkAfterKill - killedAt)} ms after the kill (promotion and proxy switch took ${Math.round(switchedAt - killedAt)} ms of it)`,
    );
    assert.deepEqual(
      [...statuses.keys()].filter((s) => s !== 200 && s !== 503),
      [],
      `answers during the failover: ${JSON.stringify([...statuses])}`,
    );
    for (const { status, body: b } of first.values()) {
      if (status === 503) assert.equal((JSON.parse(b) as { code: string }).code, "unavailable");
    }

    // Every nonce again, twice: an answered one gets its answer byte for byte; an unanswered one
    // gets one answer, the same both times.
    for (const [nonce, was] of first) {
      const again = await authorize(nonce);
      assert.equal(again.statusCode, 200, `${nonce}: ${again.body}`);
      if (was.status === 200)
        assert.equal(again.body, was.body, `${nonce}: the acknowledged answer survived`);
      assert.equal((await authorize(nonce)).body, again.body, `${nonce}: retries agree`);
    }

    const [counts] = await t.db.query<{ sponsorships: number; replays: number; nonces: number }>(
      `SELECT (SELECT count(*)::int FROM sponsorships WHERE project_id = $1) AS sponsorships,
         (SELECT count(*)::int FROM sponsorship_replays WHERE project_id = $1) AS replays,
         (SELECT count(DISTINCT auth_id)::int FROM sponsorship_replays WHERE project_id = $1) AS nonces`,
      [project.projectId],
    );
    assert.deepEqual(counts, { sponsorships: first.size, replays: first.size, nonces: first.size });
    const [money] = await t.db.query<{ balance: string; reserved: string }>(
      `SELECT p.gas_tank_balance::text AS balance,
         (SELECT COALESCE(sum(max_gas_cost), 0)::text FROM sponsorships WHERE project_id = p.id) AS reserved
       FROM projects p WHERE p.id = $1`,
      [project.projectId],
    );
    assert.equal(
      BigInt(money!.balance),
      TANK_WEI - BigInt(money!.reserved),
      "the tank holds what was not reserved",
    );
    const parity = await t.request({
      method: "GET",
      url: `/projects/${project.projectId}/funds/parity`,
      token: project.ownerToken,
    });
    assert.equal((parity.json() as { inSync: boolean }).inSync, true, parity.body);
    assert.ok((statuses.get(503) ?? 0) > 0 || first.size > okAtFailure, "the load ran across the failover");
  });
});
