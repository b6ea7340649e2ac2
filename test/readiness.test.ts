/**
 * Readiness means "can serve authorize" (issue 10): only a database that is down answers 503; a
 * chain's RPC or Redis that is down is a 200 `degraded` naming the reason; and each check's
 * transitions are logged once, not on every probe. Every dependency here is a real server of this
 * file's own that it stops and starts again: a PostgreSQL cluster (test/support/pg-cluster.ts), a
 * redis-server child and an anvil child, in both passes; the shared servers are never touched.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { privateKeyToAccount } from "viem/accounts";
import { type ChainWatchers, createChainWatchers } from "../src/chains/watchers.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp, type TestDb } from "./support/app.ts";
import { type DevChain, startChain } from "./support/chain/anvil.ts";
import { type DevnetStack, deployStack } from "./support/chain/devnet.ts";
import { sponsorUnknownAccounts } from "./support/chain-service.ts";
import { freePort, type PgCluster, startPgCluster } from "./support/pg-cluster.ts";
import { type RedisServer, startRedisServer } from "./support/redis-server.ts";

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const MINT = "0xa0712d68";
const USER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const SIGNER = privateKeyToAccount(TEST_SIGNER_KEY).address;

let cluster: PgCluster;
let redis: RedisServer;
let chain: DevChain;
let chainPort: number;
let stack: DevnetStack;
let store: TestDb;
let t: TestApp;
let watchers: ChainWatchers;
let project: Awaited<ReturnType<typeof seedProject>>;

before(async () => {
  cluster = await startPgCluster();
  redis = await startRedisServer();
  chainPort = await freePort();
  chain = await startChain({ port: chainPort });
  stack = await deployStack(chain, { signer: SIGNER });
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const db = await openPostgres({ url: cluster.url, schema });
  await migrate(db);
  store = { db, schema, drop: () => db.close() };
  t = await startTestApp({
    db: store,
    env: {
      REDIS_URL: redis.url,
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
      CHAIN_14601_PAYMASTER_V08_ADDRESS: stack.v08.paymaster,
      CHAIN_14601_CONFIRMATIONS: "0",
      CHAIN_14601_FEE_REFRESH_MS: "200",
      CHAIN_14601_FEE_MAX_AGE_MS: "1000",
      // The background evaluation notices a change even when nobody asks /health/ready.
      READINESS_INTERVAL_MS: "100",
    },
    feeOracle: "chain",
  });
  // The chain's probes, as server.ts wires them; the watchers are ticked by hand, never started.
  watchers = createChainWatchers(t.config, t.db, { metrics: t.services.metrics });
  t.services.readiness.push(...watchers.probes);
  await watchers.chains[0]!.deposits.tick();
  for (const s of watchers.chains[0]!.settlements) await s.watcher.tick();
  project = await seedProject(t);
  // USER has no code on the test chain: the project sponsors it on caps alone.
  await sponsorUnknownAccounts(t, project);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${project.projectId}/allowlist`,
    token: project.ownerToken,
    payload: { targetContract: GAME, functionSelector: MINT },
  });
  assert.equal(allow.statusCode, 201, allow.body);
  await creditDeposit(t.db, {
    projectId: project.projectId,
    reference: "fund:readiness",
    amountWei: 10n ** 17n,
  });
});

after(async () => {
  await t?.close();
  await store?.drop();
  await chain?.stop();
  await redis?.stop();
  await cluster?.destroy();
});

interface Ready {
  statusCode: number;
  status: string;
  checks: Record<string, { status: string; detail?: string }>;
}

async function ready(): Promise<Ready> {
  const res = await t.request({ method: "GET", url: "/health/ready" });
  return { statusCode: res.statusCode, ...res.json() };
}

/** Asks /health/ready until `until` holds (a generous deadline, no timing claim). */
async function readyWhen(what: string, until: (r: Ready) => boolean, deadlineMs = 60_000): Promise<Ready> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const r = await ready();
    if (until(r)) return r;
    assert.ok(Date.now() < end, `${what}: still ${JSON.stringify(r)}`);
    await sleep(100);
  }
}

/** Where the current step's log lines begin. */
let mark = 0;

/** The transitions of one check logged since `mark`: [level, from, to]. */
function transitions(check: string): [number, string, string][] {
  return t.logs
    .slice(mark)
    .map((line) => JSON.parse(line))
    .filter((l) => l.msg === "readiness changed" && l.check === check)
    .map((l) => [l.level, l.from, l.to]);
}

async function waitForLog(check: string, count: number): Promise<void> {
  const end = Date.now() + 60_000;
  while (transitions(check).length < count) {
    assert.ok(
      Date.now() < end,
      `no transition ${count} logged for ${check}: ${JSON.stringify(transitions(check))}`,
    );
    await sleep(50);
  }
}

const authorize = () =>
  t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: project.apiKey,
    payload: {
      projectId: project.projectId,
      user: USER,
      target: GAME,
      selector: MINT,
      estimatedGas: 150_000,
      chainId: 14601,
    },
  });

const WARN = 40;
const INFO = 30;

describe("readiness against real servers that go away and come back", () => {
  it("everything up: 200 ok, every check ok", { timeout: 60_000 }, async () => {
    const r = await readyWhen("all ok", (x) => x.status === "ok");
    assert.equal(r.statusCode, 200);
    const notOk = Object.entries(r.checks).filter(([, c]) => c.status !== "ok");
    assert.deepEqual(notOk, []);
    for (const name of [
      "database",
      "redis",
      "chain:14601",
      "chain:14601:paymaster-deposit",
      "chain:14601:settlement",
    ])
      assert.ok(r.checks[name], `no ${name} check`);
  });

  it("Redis down: 200 degraded naming it, logged once (even with nobody asking); authorize still serves; back: ok, logged once", {
    timeout: 120_000,
  }, async () => {
    mark = t.logs.length;
    await redis.stop();
    // The background evaluation logs the loss before anyone asks /health/ready.
    await waitForLog("redis", 1);
    for (let i = 0; i < 4; i++) {
      const r = await ready();
      assert.equal(r.statusCode, 200);
      assert.equal(r.status, "degraded");
      assert.equal(r.checks.redis!.status, "degraded");
      assert.match(
        r.checks.redis!.detail!,
        /Redis unreachable: rate limits are counted per instance, in memory/,
      );
      assert.equal(r.checks.database!.status, "ok");
    }
    const res = await authorize();
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(transitions("redis"), [[WARN, "ok", "degraded"]]);

    await redis.start();
    const back = await readyWhen("Redis back", (x) => x.checks.redis?.status === "ok");
    assert.equal(back.statusCode, 200);
    await ready();
    assert.deepEqual(transitions("redis"), [
      [WARN, "ok", "degraded"],
      [INFO, "degraded", "ok"],
    ]);
  });

  it("the chain's RPC down: 200 degraded with 'RPC unreachable' (not 503), logged once; a new node on the same URL: ok", {
    timeout: 180_000,
  }, async () => {
    mark = t.logs.length;
    await chain.stop();
    const r = await readyWhen("RPC seen down", (x) => x.checks["chain:14601"]?.status !== "ok");
    assert.equal(r.statusCode, 200);
    assert.equal(r.status, "degraded");
    assert.deepEqual(r.checks["chain:14601"], { status: "degraded", detail: "RPC unreachable" });
    assert.equal(r.checks.database!.status, "ok");
    for (let i = 0; i < 3; i++) assert.equal((await ready()).statusCode, 200);
    // The deposit can no longer be read either: degraded, with its own single line.
    await readyWhen(
      "deposit unknown",
      (x) => x.checks["chain:14601:paymaster-deposit"]?.status === "degraded",
    );
    assert.deepEqual(transitions("chain:14601"), [[WARN, "ok", "degraded"]]);
    assert.deepEqual(transitions("chain:14601:paymaster-deposit"), [[WARN, "ok", "degraded"]]);

    // The same chain again where the service expects it: a fresh anvil with the same deployment.
    chain = await startChain({ port: chainPort });
    const again = await deployStack(chain, { signer: SIGNER });
    assert.equal(again.paymaster, stack.paymaster);
    assert.equal(again.v08.paymaster, stack.v08.paymaster);
    const back = await readyWhen("chain back", (x) => x.status === "ok");
    assert.equal(back.statusCode, 200);
    assert.deepEqual(transitions("chain:14601"), [
      [WARN, "ok", "degraded"],
      [INFO, "degraded", "ok"],
    ]);
    assert.deepEqual(transitions("chain:14601:paymaster-deposit"), [
      [WARN, "ok", "degraded"],
      [INFO, "degraded", "ok"],
    ]);
  });

  it("PostgreSQL down: 503 unavailable with the database down, logged once; restarted: 200 ok, logged once", {
    timeout: 180_000,
  }, async () => {
    mark = t.logs.length;
    await cluster.stop("fast");
    const r = await readyWhen("database seen down", (x) => x.checks.database?.status === "down");
    assert.equal(r.statusCode, 503);
    assert.equal(r.status, "unavailable");
    assert.match(r.checks.database!.detail!, /not answering/);
    for (let i = 0; i < 3; i++) assert.equal((await ready()).statusCode, 503);
    assert.deepEqual(transitions("database"), [[WARN, "ok", "down"]]);

    await cluster.start();
    const back = await readyWhen("database back", (x) => x.status === "ok");
    assert.equal(back.statusCode, 200);
    assert.deepEqual(transitions("database"), [
      [WARN, "ok", "down"],
      [INFO, "down", "ok"],
    ]);
    const res = await authorize();
    assert.equal(res.statusCode, 200, res.body);
  });

  it("the readiness metric follows the checks", async () => {
    const res = await t.request({ method: "GET", url: "/metrics" });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /^gss_readiness_check_status\{check="database"\} 0$/m);
    assert.match(res.body, /^gss_readiness_check_status\{check="chain:14601"\} 0$/m);
  });
});
