import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../config.ts";
import { processPolicy } from "./policy.ts";

describe("processPolicy: cluster mode's shared rate limits", () => {
  const withWorkers = (env: Record<string, string>) =>
    processPolicy(loadConfig({ WORKERS: "2", DATABASE_URL: "postgres://db/gss", ...env })).refusals;

  it("refuses WORKERS > 1 without Redis in any shape", () => {
    assert.equal(withWorkers({}).length, 1);
    assert.match(withWorkers({})[0]!, /^WORKERS=2 needs REDIS_URL: in-memory rate limits/);
  });

  it("accepts one Redis server, a Redis Cluster or a master through Sentinel", () => {
    assert.deepEqual(withWorkers({ REDIS_URL: "redis://127.0.0.1:6379" }), []);
    assert.deepEqual(withWorkers({ REDIS_CLUSTER_NODES: "10.0.0.1:7000,10.0.0.2:7000" }), []);
    assert.deepEqual(withWorkers({ REDIS_SENTINELS: "10.0.0.1:26379", REDIS_SENTINEL_NAME: "gss" }), []);
  });
});
