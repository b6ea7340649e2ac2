import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { RedisConfig } from "../config.ts";

/**
 * The one place a Redis connection is made: a single server, a Redis Cluster, or the master that
 * Sentinel names. The rest of the service sees `RedisClient` (eval and ping route the same way on
 * all three: a cluster sends a script to the master of its key's slot) and asks `redisHealthy`.
 *
 * Every topology fails fast instead of queueing while Redis is away: the limiter counts in memory
 * meanwhile (rate-limits/limiter.ts), so waiting would only add latency to authorize.
 */
export type RedisClient = Redis | Cluster;

/** Bound on one command on one node; past it the caller falls back. */
const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 2000;

export function connectRedis(config: RedisConfig): RedisClient {
  const client = config.mode === "cluster" ? connectCluster(config) : connectServer(config);
  // Errors surface through the commands that fail (and readiness); an 'error' event with no
  // listener would crash the process, and each reconnect attempt would log one more line.
  client.on("error", () => {});
  return client;
}

function connectServer(config: Exclude<RedisConfig, { mode: "cluster" }>): Redis {
  const common: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    lazyConnect: false,
  };
  if (config.mode === "standalone") return new Redis(config.url, common);
  return new Redis({
    ...common,
    ...credentialsOf(config.url),
    sentinels: config.sentinels,
    name: config.masterName,
    sentinelPassword: config.sentinelPassword ?? undefined,
    // The Sentinels announce a promotion (+switch-master) and the client reconnects to the new
    // master at once, instead of waiting for its socket to the old one to fail.
    failoverDetector: true,
    // A master demoted by a graceful failover stays up as a replica and refuses writes
    // (READONLY): reconnecting asks the Sentinels again and finds the new master.
    reconnectOnError: (err) => err.message.startsWith("READONLY"),
  });
}

function connectCluster(config: Extract<RedisConfig, { mode: "cluster" }>): Cluster {
  return new Cluster(config.nodes, {
    enableOfflineQueue: false,
    // While a master fails over, a command meets a closed connection, CLUSTERDOWN, TRYAGAIN or
    // MOVED; the client waits, refreshes the slot map and tries again. These bound that: at
    // most 6 tries, 150 ms apart, so a request waits under a second before the limiter counts
    // it in memory instead.
    maxRedirections: 6,
    retryDelayOnFailover: 150,
    retryDelayOnClusterDown: 150,
    retryDelayOnTryAgain: 150,
    // The slot map is re-read on every MOVED too; the interval catches a promotion that no
    // command has run into yet.
    slotsRefreshInterval: 2000,
    redisOptions: {
      ...credentialsOf(config.url),
      maxRetriesPerRequest: 1,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
    },
  });
}

/** User, password, TLS and database of REDIS_URL (its host is not used), for the nodes of a cluster or Sentinel. */
function credentialsOf(url: string | null): Pick<RedisOptions, "username" | "password" | "tls" | "db"> {
  if (!url) return {};
  const parsed = new URL(url);
  const db = parsed.pathname.replace(/^\//, "");
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === "rediss:" ? { tls: {} } : {}),
    ...(db !== "" ? { db: Number(db) } : {}),
  };
}

/**
 * Whether Redis can count right now. One server (or Sentinel's current master): it answers PING.
 * A cluster: every master in the client's slot map answers PING and the cluster reports
 * `cluster_state:ok` (all 16384 slots served), so a master lost before its replica took over
 * reads as degraded, not as healthy through the masters that remain.
 */
export async function redisHealthy(client: RedisClient): Promise<boolean> {
  try {
    if (client instanceof Cluster) {
      if (client.status !== "ready") return false;
      const masters = client.nodes("master");
      if (masters.length === 0) return false;
      const pongs = await Promise.all(masters.map((node) => bounded(node.ping())));
      if (!pongs.every((p) => p === "PONG")) return false;
      const info = await bounded(masters[0]!.cluster("INFO"));
      return /^cluster_state:ok\r?$/m.test(String(info));
    }
    return (await bounded(client.ping())) === "PONG";
  } catch {
    return false;
  }
}

/** A node's command bound by COMMAND_TIMEOUT_MS even when its connection is queueing. */
function bounded<T>(command: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("Redis did not answer in time")), COMMAND_TIMEOUT_MS);
  });
  return Promise.race([command, timeout]).finally(() => clearTimeout(timer));
}
