/**
 * Load for the Redis failover tests (redis-cluster, redis-sentinel): a few loops of requests
 * through two instances that share one key, run until told to stop, every status kept.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Queryable } from "../../src/db/db.ts";
import type { TestApp } from "./app.ts";
import { waitFor } from "./poll.ts";

export interface Load {
  /** Every status so far, in order of arrival. */
  statuses: number[];
  /** The slowest response so far, in ms (for the test's log, never asserted). */
  slowestMs(): number;
  /** Waits until `more` further responses have arrived. */
  answered(more: number): Promise<void>;
  /** Stops the loops and waits for the requests in flight. */
  stop(): Promise<number[]>;
}

export function startLoad(apps: TestApp[], p: { projectId: string; apiKey: string }, loops = 4): Load {
  const statuses: number[] = [];
  let slowestMs = 0;
  let running = true;
  const loop = async (i: number) => {
    while (running) {
      const app = apps[i % apps.length]!;
      const startedMs = Date.now();
      const res = await app.request({
        method: "GET",
        url: `/projects/${p.projectId}/balance`,
        token: p.apiKey,
      });
      slowestMs = Math.max(slowestMs, Date.now() - startedMs);
      statuses.push(res.statusCode);
      // Lets the test's own polling run between requests on a loaded machine.
      await sleep(5);
    }
  };
  const done = Promise.all(Array.from({ length: loops }, (_, i) => loop(i)));
  return {
    statuses,
    slowestMs: () => slowestMs,
    async answered(more) {
      const target = statuses.length + more;
      await waitFor(`${more} more responses under load`, async () =>
        statuses.length >= target ? true : undefined,
      );
    },
    async stop() {
      running = false;
      await done;
      return statuses;
    },
  };
}

/** Waits until the instance's readiness says Redis is ok (counting shared again). */
export async function waitRedisReady(app: TestApp): Promise<void> {
  await waitFor("readiness reports Redis ok", async () => {
    const ready = await app.request({ method: "GET", url: "/health/ready" });
    return ready.json().checks.redis.status === "ok" ? true : undefined;
  });
}

/** `3n` concurrent requests of one key with budget `n`, alternating between the instances: the statuses. */
export async function burst(apps: TestApp[], p: { projectId: string; apiKey: string }, n: number) {
  const results = await Promise.all(
    Array.from({ length: 3 * n }, (_, i) =>
      apps[i % apps.length]!.request({
        method: "GET",
        url: `/projects/${p.projectId}/balance`,
        token: p.apiKey,
      }),
    ),
  );
  return results.map((r) => r.statusCode);
}

/** The id the limiter counts a project's (only) key under. */
export async function keyIdOf(db: Queryable, projectId: string): Promise<number> {
  const rows = await db.query<{ id: number }>("SELECT id FROM api_keys WHERE project_id = $1", [projectId]);
  assert.equal(rows.length, 1);
  return Number(rows[0]!.id);
}
