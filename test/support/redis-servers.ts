/**
 * Redis topologies of a test's own, made of redis-server child processes (Debian's binary) on
 * ports from ports.ts, each in a temporary directory, without persistence (`--save ""
 * --appendonly no`): a Redis Cluster (masters, each with replicas) and a Sentinel-managed
 * master with one replica. Every process is killed when the test calls stop() or, failing that,
 * when the test process exits. The shared server on 6379 is never touched.
 */
import assert from "node:assert/strict";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { waitFor } from "./poll.ts";
import { canConnect, freePort } from "./ports.ts";

export { waitFor };

const run = promisify(execFile);

/** One redis-server process. */
export interface RedisNode {
  port: number;
  /** A short-lived admin connection's answer to one command (ioredis `call`). */
  call(...args: (string | number)[]): Promise<unknown>;
  /** Kills it (SIGKILL: as a crash would) and waits for it to exit. */
  kill(): Promise<void>;
  readonly alive: boolean;
}

const everyChild = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of everyChild) child.kill("SIGKILL");
});

/** Starts redis-server with `args` after the common ones, and waits until it accepts connections. */
async function startNode(dir: string, port: number, args: string[], configFile?: string): Promise<RedisNode> {
  const common = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    "no",
  ];
  const child = spawn("redis-server", [...(configFile ? [configFile] : []), ...common, ...args], {
    stdio: "ignore",
  });
  everyChild.add(child);
  child.once("exit", () => everyChild.delete(child));
  const failed = new Promise<boolean>((resolve) => child.once("error", () => resolve(false)));
  const end = Date.now() + 20_000;
  while (!(await Promise.race([canConnect(port), failed]))) {
    assert.ok(
      Date.now() < end && child.exitCode === null,
      `redis-server on ${port} did not listen within 20 s`,
    );
    await sleep(50);
  }
  return {
    port,
    get alive() {
      return child.exitCode === null && child.signalCode === null;
    },
    async call(...command) {
      const admin = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
      admin.on("error", () => {});
      try {
        await admin.connect();
        return await admin.call(String(command[0]), ...command.slice(1));
      } finally {
        admin.disconnect();
      }
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}

export interface RedisCluster {
  nodes: RedisNode[];
  /** REDIS_CLUSTER_NODES for the service: every node, `127.0.0.1:port,…`. */
  seeds: string;
  /** The nodes that are masters now, as the living nodes see it (CLUSTER NODES of one of them). */
  masters(): Promise<RedisNode[]>;
  /** The master serving `key`'s slot now. */
  masterOf(key: string): Promise<RedisNode>;
  /** Waits until every living node reports cluster_state:ok and agrees on `masters` masters. */
  waitHealthy(masters: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of `masters` masters with `replicas` replicas each, created with
 * `redis-cli --cluster create`. Node timeout 1 s, so that a killed master is replaced within a
 * few seconds. Each node takes two ports from ports.ts: its own and its cluster bus port
 * (`cluster-port`; the default, port + 10000, could land in another process's range).
 */
export async function startRedisCluster(
  options: { masters?: number; replicas?: number } = {},
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const count = masters * (1 + (options.replicas ?? 1));
  const dir = mkdtempSync(join(tmpdir(), "gss-redis-cluster-"));
  const nodes: RedisNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      const busPort = await freePort();
      const args = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        `nodes-${port}.conf`,
        "--cluster-node-timeout",
        "1000",
        "--cluster-port",
        String(busPort),
        // A replica of a lost master is promoted however long it has been cut off.
        "--cluster-replica-validity-factor",
        "0",
      ];
      nodes.push(await startNode(dir, port, args));
    }
    await run(
      "redis-cli",
      [
        "--cluster",
        "create",
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        "--cluster-replicas",
        String(options.replicas ?? 1),
        "--cluster-yes",
      ],
      { timeout: 60_000 },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const byPort = (port: number) => nodes.find((n) => n.port === port)!;
  const topology = async () => {
    const living = nodes.filter((n) => n.alive);
    const text = String(await living[0]!.call("CLUSTER", "NODES"));
    return text
      .trim()
      .split("\n")
      .map((line) => {
        const [, address, flags] = line.split(" ");
        return { port: Number(address!.split(":")[1]!.split("@")[0]), flags: flags!.split(",") };
      });
  };
  const cluster: RedisCluster = {
    nodes,
    seeds: nodes.map((n) => `127.0.0.1:${n.port}`).join(","),
    async masters() {
      return (await topology())
        .filter((n) => n.flags.includes("master") && !n.flags.includes("fail"))
        .map((n) => byPort(n.port))
        .filter((n) => n.alive);
    },
    async masterOf(key) {
      const living = nodes.find((n) => n.alive)!;
      const slot = Number(await living.call("CLUSTER", "KEYSLOT", key));
      const shards = (await living.call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
      const shard = shards.find(([from, to]) => slot >= from && slot <= to);
      assert.ok(shard, `slot ${slot} is served`);
      return byPort(shard[2][1]);
    },
    async waitHealthy(expected) {
      await waitFor(`the cluster reports ok with ${expected} masters`, async () => {
        for (const node of nodes.filter((n) => n.alive)) {
          const info = String(await node.call("CLUSTER", "INFO"));
          if (!/^cluster_state:ok\r?$/m.test(info)) return undefined;
        }
        return (await cluster.masters()).length === expected ? true : undefined;
      });
    },
    stop,
  };
  try {
    await cluster.waitHealthy(masters);
  } catch (err) {
    await stop();
    throw err;
  }
  return cluster;
}

export interface RedisSentinel {
  master: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  /** REDIS_SENTINELS for the service. */
  addresses: string;
  name: string;
  /** The port Sentinel names as the master now. */
  currentMasterPort(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * One master, one replica and `sentinels` Sentinels (quorum 1) watching it as `name`; a master
 * that stops answering for 1 s is failed over.
 */
export async function startRedisSentinel(options: { sentinels?: number } = {}): Promise<RedisSentinel> {
  const name = "gss-test";
  const dir = mkdtempSync(join(tmpdir(), "gss-redis-sentinel-"));
  const started: RedisNode[] = [];
  const stop = async () => {
    await Promise.all(started.map((n) => n.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const master = await startNode(dir, await freePort(), []);
    started.push(master);
    const replica = await startNode(dir, await freePort(), ["--replicaof", "127.0.0.1", String(master.port)]);
    started.push(replica);
    await waitFor("the replica is in sync", async () => {
      const info = String(await replica.call("INFO", "replication"));
      return /master_link_status:up/.test(info) ? true : undefined;
    });
    const sentinels: RedisNode[] = [];
    for (let i = 0; i < (options.sentinels ?? 1); i++) {
      const port = await freePort();
      // Sentinel rewrites its configuration file as it learns, so each has a file of its own.
      const file = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 10000`,
          `sentinel parallel-syncs ${name} 1`,
          "",
        ].join("\n"),
      );
      const node = await startNode(dir, port, ["--sentinel"], file);
      started.push(node);
      sentinels.push(node);
    }
    const sentinel: RedisSentinel = {
      master,
      replica,
      sentinels,
      addresses: sentinels.map((s) => `127.0.0.1:${s.port}`).join(","),
      name,
      async currentMasterPort() {
        const living = sentinels.find((s) => s.alive)!;
        const [, port] = (await living.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)) as [string, string];
        return Number(port);
      },
      stop,
    };
    // Each Sentinel has found the replica before the test may fail the master over.
    await waitFor("the Sentinels know the replica", async () => {
      for (const s of sentinels) {
        const replicas = (await s.call("SENTINEL", "REPLICAS", name)) as unknown[];
        if (replicas.length < 1) return undefined;
      }
      return true;
    });
    return sentinel;
  } catch (err) {
    await stop();
    throw err;
  }
}
