import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Cluster, Redis } from "ioredis";
import { loadConfig } from "../config.ts";
import { connectRedis, redisHealthy } from "./client.ts";

// Nothing listens on port 1: these clients never connect, which is all the options need.
const closed = (env: Record<string, string>) => {
  const config = loadConfig(env).redis;
  assert.ok(config);
  return connectRedis(config);
};

describe("connectRedis", () => {
  it("carries REDIS_URL's user, password, TLS and database to the master found through Sentinel", async () => {
    const client = closed({
      REDIS_URL: "rediss://gss:p%40ss@ignored/2",
      REDIS_SENTINELS: "127.0.0.1:1",
      REDIS_SENTINEL_NAME: "gss",
      REDIS_SENTINEL_PASSWORD: "sentinel-secret",
    });
    try {
      assert.ok(client instanceof Redis);
      const o = client.options;
      assert.deepEqual(
        [o.username, o.password, o.db, o.name, o.sentinelPassword, o.enableTLSForSentinelMode],
        ["gss", "p@ss", 2, "gss", "sentinel-secret", true],
      );
      assert.deepEqual([o.tls, o.sentinelTLS, o.sentinels], [{}, {}, [{ host: "127.0.0.1", port: 1 }]]);
      assert.equal(await redisHealthy(client), false);
    } finally {
      client.disconnect();
    }
  });

  it("speaks the cluster protocol to the seeds, each node with REDIS_URL's credentials", async () => {
    const client = closed({
      REDIS_URL: "redis://:s3cret@ignored",
      REDIS_CLUSTER_NODES: "127.0.0.1:1,127.0.0.1:2",
    });
    try {
      assert.ok(client instanceof Cluster);
      assert.equal(client.options.redisOptions?.password, "s3cret");
      assert.equal(client.options.redisOptions?.tls, undefined);
      assert.equal(client.options.enableOfflineQueue, false);
      assert.equal(await redisHealthy(client), false);
    } finally {
      client.disconnect();
    }
  });
});
