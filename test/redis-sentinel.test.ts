import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { counterKey } from "../src/rate-limits/limiter.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { burst, keyIdOf, startLoad, waitRedisReady } from "./support/redis-load.ts";
import { type RedisNode, type RedisSentinel, startRedisSentinel, waitFor } from "./support/redis-servers.ts";

/**
 * The rate limits through Sentinel: a master, its replica and one Sentinel (quorum 1) of the
 * test's own, shared by two service instances that know only the Sentinel and the master's name.
 * The master is killed under load; the Sentinel promotes the replica, the instances follow it
 * without a 500 (counting in memory meanwhile) and then count one budget exactly again on the
 * new master. Runs on both stores; the Redis is always this one.
 */
let sentinel: RedisSentinel;
let store: TestDb;
let a: TestApp;
let b: TestApp;
let prefix: string;

before(async () => {
  sentinel = await startRedisSentinel({ sentinels: 1 });
  store = await openTestDb();
  prefix = `rl-sentinel:${randomBytes(6).toString("hex")}`;
  // The exact counts below need every batch counted in Redis: startTestApp bounds a command at 5 s
  // (test/support/app.ts).
  const env = { REDIS_URL: "", REDIS_SENTINELS: sentinel.addresses, REDIS_SENTINEL_NAME: sentinel.name };
  a = await startTestApp({ db: store, rateLimitPrefix: prefix, env });
  b = await startTestApp({ db: store, rateLimitPrefix: prefix, env });
  await waitRedisReady(a);
  await waitRedisReady(b);
});
after(async () => {
  await b?.close();
  await a?.close();
  await store?.drop();
  await sentinel?.stop();
});

/** N of 3N concurrent requests pass across both instances, and `master` counted all 3N. */
async function assertExactOn(master: RedisNode, N: number) {
  const p = await seedProject(a, { rateLimit: N, scopes: ["read"] });
  const statuses = await burst([a, b], p, N);
  assert.equal(statuses.filter((s) => s === 200).length, N);
  assert.equal(statuses.filter((s) => s === 429).length, 2 * N);
  assert.equal(
    await master.call("GET", counterKey(prefix, await keyIdOf(store.db, p.projectId))),
    String(3 * N),
  );
}

describe("rate limits through Redis Sentinel (master, replica, one Sentinel; two instances)", () => {
  it("finds the master through the Sentinel and counts one budget exactly across two instances", async () => {
    assert.equal(await sentinel.currentMasterPort(), sentinel.master.port);
    await assertExactOn(sentinel.master, 20);
  });

  it("follows a manual failover (SENTINEL FAILOVER: the old master stays up, as a replica) under load, no 500", async (t) => {
    const [before, other] = [sentinel.master, sentinel.replica];
    t.diagnostic(
      await failOverUnderLoad(before, other, async () => {
        assert.equal(await sentinel.sentinels[0]!.call("SENTINEL", "FAILOVER", sentinel.name), "OK");
      }),
    );
    // The demoted master follows the new one, ready to be promoted back by the next test.
    await waitFor("the old master replicates the new one", async () =>
      /master_link_status:up/.test(String(await before.call("INFO", "replication"))) ? true : undefined,
    );
    await waitFor("the Sentinel knows the old master as a replica", async () => {
      const replicas = (await sentinel.sentinels[0]!.call(
        "SENTINEL",
        "REPLICAS",
        sentinel.name,
      )) as string[][];
      // Each replica is a flat list of field, value; its flags say whether Sentinel sees it down.
      const field = (r: string[], name: string) => r[r.indexOf(name) + 1];
      const known = replicas.some(
        (r) =>
          field(r, "port") === String(before.port) && !/s_down|disconnected/.test(field(r, "flags") ?? ""),
      );
      return known ? true : undefined;
    });
  });

  it("follows the Sentinel to the promoted replica when the master dies under load (no 500), then counts exactly there", async (t) => {
    // The roles as the previous test left them: the first master is the replica now.
    const [dying, next] = [sentinel.replica, sentinel.master];
    t.diagnostic(await failOverUnderLoad(dying, next, () => dying.kill()));
  });
});

/**
 * Runs load through both instances, calls `failOver` (master `from`), waits until the Sentinel
 * names `to` and it serves as master, then checks every request under load was answered 200 and
 * both instances count one budget exactly on `to`. Returns what was seen, for the test's log.
 */
async function failOverUnderLoad(
  from: RedisNode,
  to: RedisNode,
  failOver: () => Promise<void>,
): Promise<string> {
  assert.equal(await sentinel.currentMasterPort(), from.port);
  const busy = await seedProject(a, { rateLimit: 1_000_000, scopes: ["read"] });
  const probe = await seedProject(a, { rateLimit: 1_000_000, scopes: ["read"] });
  const probeKey = counterKey(prefix, await keyIdOf(store.db, probe.projectId));
  const load = startLoad([a, b], busy);
  await load.answered(40);
  const startedMs = Date.now();
  await failOver();
  await waitFor("the Sentinel names the new master", async () =>
    (await sentinel.currentMasterPort()) === to.port ? true : undefined,
  );
  await waitFor("the new master serves as master", async () =>
    /^role:master\r?$/m.test(String(await to.call("INFO", "replication"))) ? true : undefined,
  );
  const promotedMs = Date.now() - startedMs;
  // Each instance counts on the new master: a request moves the probe key's counter there. (A
  // surviving old master answers as a master until Sentinel demotes it, seconds later; an
  // instance still connected to it would count there, and those counts would be lost.)
  for (const app of [a, b]) {
    await waitFor("the instance counts on the new master", async () => {
      const before = Number(await to.call("GET", probeKey));
      const res = await app.request({
        method: "GET",
        url: `/projects/${probe.projectId}`,
        token: probe.apiKey,
      });
      assert.equal(res.statusCode, 200);
      return Number(await to.call("GET", probeKey)) === before + 1 ? true : undefined;
    });
  }
  const readyMs = Date.now() - startedMs;
  await waitRedisReady(a);
  await waitRedisReady(b);
  await load.answered(40);
  const statuses = await load.stop();
  assert.deepEqual(
    statuses.filter((s) => s !== 200),
    [],
    `${statuses.length} requests under load, every one answered 200`,
  );
  await assertExactOn(to, 15);
  return `${statuses.length} requests under load, all 200 (slowest ${load.slowestMs()} ms); promoted after ${promotedMs} ms, both instances counting on it after ${readyMs} ms`;
}
