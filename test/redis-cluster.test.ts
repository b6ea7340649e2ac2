import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Cluster } from "ioredis";
import { counterKey } from "../src/rate-limits/limiter.ts";
import { connectRedis, SLOTS_REFRESH_MS } from "../src/redis/client.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { burst, keyIdOf, startLoad, waitRedisReady } from "./support/redis-load.ts";
import { type RedisCluster, startRedisCluster, waitFor } from "./support/redis-servers.ts";

/**
 * The rate limits on a Redis Cluster of the test's own: 3 masters with one replica each (six
 * redis-server processes), shared by two service instances. Each counter is one hash-tagged key,
 * so each script runs on the one master of that key's slot; a master lost under load is replaced
 * by its replica while the instances keep answering (counting in memory meanwhile), and then
 * they count in the cluster again. Runs on both stores; the Redis is always this cluster.
 */
let cluster: RedisCluster;
let store: TestDb;
let a: TestApp;
let b: TestApp;
let prefix: string;

before(async () => {
  cluster = await startRedisCluster({ masters: 3, replicas: 1 });
  store = await openTestDb();
  prefix = `rl-cluster:${randomBytes(6).toString("hex")}`;
  // The exact counts below need every batch counted in the cluster: startTestApp bounds a command
  // at 5 s, past any event-loop stall of a busy CI host (test/support/app.ts).
  const env = { REDIS_URL: "", REDIS_CLUSTER_NODES: cluster.seeds };
  a = await startTestApp({ db: store, rateLimitPrefix: prefix, env });
  b = await startTestApp({ db: store, rateLimitPrefix: prefix, env });
  await waitRedisReady(a);
  await waitRedisReady(b);
  await warmEveryMaster();
});

/** A client of the test's cluster, made by the service's own factory. */
function clusterClient(): Cluster {
  return connectRedis({
    mode: "cluster",
    url: null,
    nodes: cluster.seeds.split(",").map((s) => ({ host: "127.0.0.1", port: Number(s.split(":")[1]) })),
  }) as Cluster;
}

/**
 * One counted request from each instance to every master, before anything is measured: a
 * client's first command to a node also opens its connection, which on a loaded machine can
 * outlast the 500 ms command bound and send that batch to memory (a CI run counted 40 of 60
 * instead of 20 so). Keys of throwaway projects are taken until every master holds one.
 */
async function warmEveryMaster() {
  const warmed = new Set<number>();
  for (let i = 0; i < 40 && warmed.size < 3; i++) {
    // A developer of its own: the tests below create organizations too, and one developer's are capped.
    const p = await seedProject(a, {
      rateLimit: 1_000_000,
      scopes: ["read"],
      email: `warm-${i}@example.com`,
    });
    const master = await cluster.masterOf(counterKey(prefix, await keyIdOf(store.db, p.projectId)));
    if (warmed.has(master.port)) continue;
    for (const app of [a, b]) {
      const res = await app.request({
        method: "GET",
        url: `/projects/${p.projectId}/balance`,
        token: p.apiKey,
      });
      assert.equal(res.statusCode, 200, res.body);
    }
    warmed.add(master.port);
  }
  assert.equal(warmed.size, 3, "every master holds a warmed key");
}
after(async () => {
  await b?.close();
  await a?.close();
  await store?.drop();
  await cluster?.stop();
});

describe("rate limits on a Redis Cluster (3 masters + 3 replicas, two instances)", () => {
  it("counts one budget exactly across two instances: N of 3N concurrent requests pass, counted in the cluster", async () => {
    const N = 20;
    const p = await seedProject(a, { rateLimit: N, scopes: ["read"] });
    const statuses = await burst([a, b], p, N);
    assert.equal(statuses.filter((s) => s === 200).length, N);
    assert.equal(statuses.filter((s) => s === 429).length, 2 * N);
    // Every request went through the cluster (none fell back to memory): the counter saw all 3N.
    const key = counterKey(prefix, await keyIdOf(store.db, p.projectId));
    assert.equal(await (await cluster.masterOf(key)).call("GET", key), String(3 * N));
  });

  it("opens a connection to every master as soon as the slot map names it, before any command", async () => {
    const client = clusterClient();
    try {
      await waitFor("every master connected without a command", async () => {
        const masters = client.nodes("master");
        return masters.length === 3 && masters.every((n) => n.status === "ready") ? true : undefined;
      });
    } finally {
      client.disconnect();
    }
  });

  it("re-reads the slot map on a timer that holds no process open and ends with the client", async () => {
    const client = clusterClient();
    const ended = once(client, "end");
    try {
      await once(client, "ready");
      // ioredis's own refresher, which a close during a refresh re-armed for ever, is off; ours runs.
      assert.equal(client.options.slotsRefreshInterval, 0);
      await once(client, "refresh");
      // Closed while a refresh is in flight (what left a test process alive for 34 minutes): no
      // refresh runs after the end.
      client.refreshSlotsCache();
      client.disconnect();
      await ended;
      let after = 0;
      client.on("refresh", () => after++);
      await sleep(2 * SLOTS_REFRESH_MS + 500);
      assert.equal(after, 0);
    } finally {
      client.disconnect();
    }
  });

  it("hash-tags each key's counter, so different API keys' counters spread over the masters", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) {
      const p = await seedProject(a, { rateLimit: 5, scopes: ["read"] });
      const res = await b.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey });
      assert.equal(res.statusCode, 200);
      ids.push(await keyIdOf(store.db, p.projectId));
    }
    // Where each counter actually is: read back from the master that holds its slot.
    const holders = new Map<number, number>();
    for (const id of ids) {
      const key = counterKey(prefix, id);
      assert.match(key, /^\{[^{}]+\}$/, "the whole name is the hash tag");
      const master = await cluster.masterOf(key);
      assert.equal(await master.call("GET", key), "1");
      holders.set(master.port, (holders.get(master.port) ?? 0) + 1);
    }
    assert.ok(holders.size > 1, `12 keys' counters on ${holders.size} master(s)`);
  });

  it("keeps answering through a master's loss under load (no 500), then counts exactly in the cluster again", async (t) => {
    const busy = await seedProject(a, { rateLimit: 1_000_000, scopes: ["read"] });
    const victim = await cluster.masterOf(counterKey(prefix, await keyIdOf(store.db, busy.projectId)));
    const load = startLoad([a, b], busy);
    await load.answered(40);
    // SIGKILL, as a crash: the replica takes the slots over after the node timeout (1 s).
    const killedAt = Date.now();
    await victim.kill();
    await cluster.waitHealthy(3);
    const promotedMs = Date.now() - killedAt;
    assert.ok(!(await cluster.masters()).includes(victim));
    await waitRedisReady(a);
    await waitRedisReady(b);
    const readyMs = Date.now() - killedAt;
    await load.answered(40);
    const statuses = await load.stop();
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
      `${statuses.length} requests under load, every one answered 200`,
    );
    t.diagnostic(
      `${statuses.length} requests under load, all 200 (slowest ${load.slowestMs()} ms); replica promoted after ${promotedMs} ms, both instances ready on the cluster after ${readyMs} ms`,
    );

    const N = 15;
    const p = await seedProject(a, { rateLimit: N, scopes: ["read"] });
    const again = await burst([a, b], p, N);
    assert.equal(again.filter((s) => s === 200).length, N);
    assert.equal(again.filter((s) => s === 429).length, 2 * N);
    const key = counterKey(prefix, await keyIdOf(store.db, p.projectId));
    assert.equal(await (await cluster.masterOf(key)).call("GET", key), String(3 * N));
  });

  it("follows a manual failover (CLUSTER FAILOVER: the old master answers MOVED) under load, no 500", async () => {
    // A master that still has a replica (the one promoted above has none left).
    const masters = await cluster.masters();
    const pairs = await Promise.all(
      masters.map(async (m) => {
        const info = String(await m.call("INFO", "replication"));
        const port = /^slave0:ip=[^,]+,port=(\d+)/m.exec(info)?.[1];
        return port ? { master: m, replica: cluster.nodes.find((n) => n.port === Number(port))! } : null;
      }),
    );
    const pair = pairs.find((x) => x !== null);
    assert.ok(pair, "a master with a replica");
    // A key whose counter that master holds, so that the load itself meets the redirect.
    let busy = await seedProject(a, { rateLimit: 1_000_000, scopes: ["read"] });
    let key = counterKey(prefix, await keyIdOf(store.db, busy.projectId));
    while ((await cluster.masterOf(key)) !== pair.master) {
      busy = await seedProject(a, { rateLimit: 1_000_000, scopes: ["read"] });
      key = counterKey(prefix, await keyIdOf(store.db, busy.projectId));
    }
    const load = startLoad([a, b], busy);
    await load.answered(40);
    assert.equal(await pair.replica.call("CLUSTER", "FAILOVER"), "OK");
    await waitFor("the replica is promoted", async () =>
      /^role:master\r?$/m.test(String(await pair.replica.call("INFO", "replication"))) ? true : undefined,
    );
    await cluster.waitHealthy(3);
    await waitRedisReady(a);
    await waitRedisReady(b);
    await load.answered(40);
    const statuses = await load.stop();
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
    );
    // The busy key is counted in the cluster again: its counter grows with each request.
    const before = Number(await (await cluster.masterOf(key)).call("GET", key));
    assert.equal(
      (await a.request({ method: "GET", url: `/projects/${busy.projectId}`, token: busy.apiKey })).statusCode,
      200,
    );
    assert.equal(
      (await b.request({ method: "GET", url: `/projects/${busy.projectId}`, token: busy.apiKey })).statusCode,
      200,
    );
    assert.equal(Number(await (await cluster.masterOf(key)).call("GET", key)), before + 2);
  });
});
