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

/**
 * Bound on one command on one node; past it the caller falls back (REDIS_COMMAND_TIMEOUT_MS).
 * The timer runs on the event loop, so a process whose loop is stalled for longer than this
 * (a CPU-starved host) sees a timeout even when Redis answered at once: a busy host may want more.
 */
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
    commandTimeout: config.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    lazyConnect: false,
  };
  if (config.mode === "standalone") return new Redis(config.url, common);
  const tls = credentialsOf(config.url).tls !== undefined;
  const client = new Redis({
    ...common,
    ...credentialsOf(config.url),
    sentinels: config.sentinels,
    name: config.masterName,
    sentinelPassword: config.sentinelPassword ?? undefined,
    // rediss: means TLS to the Sentinels and to the master alike (ioredis applies `tls` to the
    // master through Sentinel only with enableTLSForSentinelMode).
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
    // Should a connection to a demoted master survive, it refuses writes (READONLY):
    // reconnecting asks the Sentinels again and finds the new master.
    reconnectOnError: (err) => err.message.startsWith("READONLY"),
  });
  followSwitches(client, config);
  return client;
}

/**
 * Reconnects `client` (asking the Sentinels for the master again) as soon as a Sentinel announces
 * `+switch-master` for its master. A master that dies closes the client's socket anyway, but after
 * a graceful failover (SENTINEL FAILOVER) the old master stays up and keeps accepting writes until
 * Sentinel demotes it (and kills its clients) about 10 s later: counts made there meanwhile are
 * split from the other instances' and then lost. In test/redis-sentinel.test.ts both instances
 * counted on the new master 11.5 s after the failover without this, 1.4–2.1 s with it.
 *
 * ioredis's own `failoverDetector` does this too, but its disconnect while the client is still
 * connecting ends the client for good (status "end", never reconnecting; seen in 1 of 2 runs of
 * the Sentinel test with ioredis 6.0.0), so here only a ready client is told to reconnect (one
 * still connecting is already asking the Sentinels).
 */
function followSwitches(client: Redis, config: Extract<RedisConfig, { mode: "sentinel" }>): void {
  const listeners = config.sentinels.map(
    ({ host, port }) =>
      new Redis({
        host,
        port,
        password: config.sentinelPassword ?? undefined,
        ...(credentialsOf(config.url).tls ? { tls: {} } : {}),
        connectTimeout: CONNECT_TIMEOUT_MS,
        // Subscribing is all it does; a Sentinel that comes back is subscribed to again.
        autoResubscribe: true,
        lazyConnect: false,
      }),
  );
  for (const listener of listeners) {
    listener.on("error", () => {});
    listener.subscribe("+switch-master").catch(() => {});
    listener.on("message", (_channel: string, message: string) => {
      // "<master name> <old ip> <old port> <new ip> <new port>"
      if (message.split(" ")[0] === config.masterName && client.status === "ready") client.disconnect(true);
    });
  }
  client.once("end", () => {
    for (const listener of listeners) listener.disconnect();
  });
}

/** How often a cluster client re-reads the slot map without being told to (MOVED). */
export const SLOTS_REFRESH_MS = 2000;

function connectCluster(config: Extract<RedisConfig, { mode: "cluster" }>): Cluster {
  const cluster = new Cluster(config.nodes, {
    enableOfflineQueue: false,
    // While a master fails over, a command meets a closed connection, CLUSTERDOWN, TRYAGAIN or
    // MOVED; the client waits, refreshes the slot map and tries again. These bound that: at
    // most 6 tries, 150 ms apart, so a request waits under a second before the limiter counts
    // it in memory instead.
    maxRedirections: 6,
    retryDelayOnFailover: 150,
    retryDelayOnClusterDown: 150,
    retryDelayOnTryAgain: 150,
    // ioredis's own periodic refresh is off: a client closed while one of its refreshes is in
    // flight arms the next round when that refresh answers, and from then on refreshes every
    // interval, for ever, and keeps its process alive (a test process outlived its files by 34
    // minutes on 2026-11-29; the service's shutdown ends in process.exit, so it still exited). The
    // refresh below replaces it.
    slotsRefreshInterval: 0,
    redisOptions: {
      ...credentialsOf(config.url),
      maxRetriesPerRequest: 1,
      commandTimeout: config.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
      connectTimeout: CONNECT_TIMEOUT_MS,
    },
  });
  // ioredis opens a node's connection at its first command (its pool makes them lazy), and a
  // connection opened under load can outlast COMMAND_TIMEOUT_MS, sending that batch to memory
  // (a CI run counted 40 of 60 requests against a budget of 20 so). Each master is connected as
  // soon as the slot map names it instead; replicas only serve a failover, which opens them then.
  cluster.on("+node", (node: Redis) => {
    if (!node.options.readOnly && node.status === "wait") node.connect().catch(() => {});
  });
  // The slot map is re-read on every MOVED too; this catches a promotion that no command has run
  // into yet. The timer never holds the process open, and stops when the client ends.
  const refresh = setInterval(() => {
    if (cluster.status === "ready") cluster.refreshSlotsCache(() => {});
  }, SLOTS_REFRESH_MS);
  refresh.unref();
  cluster.once("end", () => clearInterval(refresh));
  return cluster;
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
 * Whether Redis can count right now. One server: it answers PING. Through Sentinel: the server
 * the client is connected to is a master (ROLE).
 * A cluster: every master in the client's slot map answers PING and the cluster reports
 * `cluster_state:ok` (all 16384 slots served), so a master lost before its replica took over
 * reads as degraded, not as healthy through the masters that remain. A connected client that
 * misses the bound once is asked again before it counts as unreachable.
 */
export async function redisHealthy(client: RedisClient): Promise<boolean> {
  // A connection that is not up fails at once; one that is up gets a second look before it is
  // called unreachable, so that one answer slower than the bound (a busy event loop on either
  // side) does not flip readiness.
  if (await answers(client)) return true;
  return client.status === "ready" && (await answers(client));
}

async function answers(client: RedisClient): Promise<boolean> {
  const ms =
    (client instanceof Cluster
      ? client.options.redisOptions?.commandTimeout
      : client.options.commandTimeout) ?? COMMAND_TIMEOUT_MS;
  const bounded = <T>(command: Promise<T>) => within(command, ms);
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
    if (client.options.sentinels) {
      // A PING would also pass on a master that Sentinel has just demoted, or on one that it is
      // about to demote (writes there are lost when it resyncs): only a master counts.
      const role = (await bounded(client.call("ROLE"))) as unknown[];
      return role[0] === "master";
    }
    return (await bounded(client.ping())) === "PONG";
  } catch {
    return false;
  }
}

/** A node's command bound by the client's command timeout even when its connection is queueing. */
function within<T>(command: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("Redis did not answer in time")), ms);
  });
  return Promise.race([command, timeout]).finally(() => clearTimeout(timer));
}
