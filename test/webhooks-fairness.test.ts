import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { after, afterEach, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Db } from "../src/db/db.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { approvalGate } from "../src/webhooks/approval.ts";
import { deadline } from "../src/webhooks/deadline.ts";
import {
  type AttemptResult,
  claimDue,
  claimStatement,
  type InFlightCaps,
  listDeliveries,
  recordAttempts,
  redeliver,
  releaseClaims,
} from "../src/webhooks/deliveries.ts";
import { webhookSender } from "../src/webhooks/egress.ts";
import { putApproval } from "../src/webhooks/store.ts";
import {
  REFILL_AFTER_MS,
  type WebhookWorker,
  type WorkerOptions,
  webhookWorker,
} from "../src/webhooks/worker.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { deliveriesRead, emitBalanceLow, rolledBack } from "./support/events.ts";
import { addWebhookEndpoint, type Receiver, startReceiver } from "./support/receiver.ts";

/**
 * Issue 20, no tenant can stall another: webhook deliveries go out through a pool of slots, each
 * refilled as soon as its delivery ends, with caps on what one endpoint and one project may hold
 * in flight; and every request ends at its deadline, even when garbage is collected while it
 * waits (AbortSignal.timeout inside AbortSignal.any did not, on Node 20). The receivers are real
 * node:http servers on 127.0.0.1 that count the requests they have open.
 *
 * The garbage-collection tests need `global.gc`: scripts/run-tests.mjs runs node with
 * --expose-gc; by hand, `node --expose-gc --import tsx --test test/webhooks-fairness.test.ts`.
 */

let t: TestApp;
const workers: WebhookWorker[] = [];
const receivers: Receiver[] = [];

before(async () => {
  t = await startTestApp();
});
afterEach(async () => {
  // Receivers first: a request still held open then ends at once, whatever its worker does.
  for (const r of receivers.splice(0)) await r.close();
  for (const w of workers.splice(0)) await w.stop();
  // What a test left pending (its hanging deliveries) must not reach the next test's worker.
  await t.db.query(
    "UPDATE webhook_deliveries SET status = 'failed', completed_at = now() WHERE status = 'pending'",
  );
});
after(async () => {
  await t.close();
});

/** A worker of the service's own, with a schedule that never retries within a test. */
function worker(options: Partial<WorkerOptions>): WebhookWorker {
  const w = webhookWorker(t.db, {
    retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 2 },
    timeoutMs: 30_000,
    pollIntervalMs: 20,
    keyring: t.services.keyring,
    ...options,
  });
  workers.push(w);
  return w;
}

async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function project() {
  const tag = randomBytes(3).toString("hex");
  return seedProject(t, { slug: `fair-${tag}`, email: `fair-${tag}@example.com` });
}

let references = 0;
/** `n` deposits, hence `n` deposit.credited events for each subscribed endpoint. */
async function events(projectId: string, n: number) {
  for (let i = 0; i < n; i++) {
    await creditDeposit(t.db, { projectId, reference: `14601:0xfair:${references++}`, amountWei: 1n });
  }
}

/** `promise`, or a failure naming `what` once `ms` have passed. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits (bounded) until `done()` holds. */
async function untilAsync(done: () => Promise<boolean>, what: string, ms = 10_000) {
  const started = Date.now();
  while (!(await done())) {
    if (Date.now() - started > ms) assert.fail(`${what}: not within ${ms} ms`);
    await sleep(10);
  }
}
const until = (done: () => boolean, what: string, ms?: number) => untilAsync(async () => done(), what, ms);

/** A worker on `db` that retries nothing within a test and waits long for its receivers. */
function patientWorker(db: Db, caps: Partial<InFlightCaps>): WebhookWorker {
  const w = webhookWorker(db, {
    retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 2 },
    timeoutMs: 30_000,
    pollIntervalMs: 20,
    keyring: t.services.keyring,
    caps,
  });
  workers.push(w);
  return w;
}

/** The project's deliveries under a lease now: claimed by a worker, sending or waiting. */
async function leasedCount(projectId: string): Promise<number> {
  const rows = await t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id
     WHERE e.project_id = $1 AND d.leased_until > now()`,
    [projectId],
  );
  return rows[0]!.n;
}

/** Stops `w`, then checks that each of the project's `n` deliveries is due again as if never claimed. */
async function stopsHandingBackAll(w: WebhookWorker, projectId: string, n: number): Promise<void> {
  await within(10_000, w.stop(), "the worker's stop");
  const rows = await deliveries(projectId);
  assert.equal(rows.length, n);
  assert.ok(
    rows.every((r) => r.status === "pending" && r.attempts === 0 && r.leased_until === null),
    JSON.stringify(rows),
  );
}

/** The worker's claim and its record of attempts, told by their text (each calls a function of its own). */
const isClaim = (text: string) => text.includes("webhook_claim(");
const isRecord = (text: string) => text.includes("webhook_record_attempts(");

/** The test app's store, telling `see` of every statement as it is asked for and as its rows come back. */
function watched(see: (phase: "asked" | "back", text: string) => void): Db {
  return new Proxy(t.db, {
    get(target, prop, receiver) {
      if (prop !== "query") return Reflect.get(target, prop, receiver);
      return async (text: string, values?: unknown[], name?: string) => {
        see("asked", text);
        const rows = await target.query(text, values, name);
        see("back", text);
        return rows;
      };
    },
  }) as Db;
}

async function deliveries(projectId: string) {
  return t.db.query<{
    status: string;
    attempts: number;
    last_error: string | null;
    leased_until: Date | null;
  }>(
    `SELECT d.status, d.attempts, d.last_error, d.leased_until FROM webhook_deliveries d
     JOIN event_outbox e ON e.id = d.event_id WHERE e.project_id = $1 ORDER BY d.id`,
    [projectId],
  );
}

const sum = (rs: Receiver[], f: (r: Receiver) => number) => rs.reduce((n, r) => n + f(r), 0);

describe("webhook fairness across projects", () => {
  it("delivers another project's events while one project's endpoints hang, their requests still open", async () => {
    const noisy = await project();
    const quiet = await project();
    const hanging = await Promise.all([1, 2, 3, 4, 5].map(() => receiver({ hold: true })));
    const healthy = await receiver();
    for (const r of hanging) await addWebhookEndpoint(t, noisy, r.url, ["deposit.credited"]);
    await addWebhookEndpoint(t, quiet, healthy.url, ["deposit.credited"]);
    // 40 deliveries to endpoints that never answer, all due before the quiet project's one:
    // more than the worker has slots, so oldest-first in batches would fill every slot with them.
    await events(noisy.projectId, 8);
    await events(quiet.projectId, 1);

    worker({ concurrency: 8, caps: { perEndpoint: 2, perProject: 4 } }).start();
    await within(10_000, healthy.waitFor(1), "the quiet project's delivery");
    // The moment it arrived: the noisy project's requests were still open, none answered.
    const openThen = sum(hanging, (r) => r.open);
    assert.ok(openThen >= 1, "the noisy project's requests are open as the quiet one's arrives");
    assert.equal(
      openThen,
      sum(hanging, (r) => r.received.length),
      "none of them has ended",
    );

    // The noisy project then holds its cap, four requests and no more, all still hanging; the
    // quiet project's next event goes through all the same.
    await until(() => sum(hanging, (r) => r.open) === 4, "four hanging requests");
    await events(quiet.projectId, 1);
    await within(10_000, healthy.waitFor(2), "the quiet project's second delivery");
    assert.equal(
      sum(hanging, (r) => r.open),
      4,
    );
    assert.equal(
      sum(hanging, (r) => r.received.length),
      4,
      "no fifth request while four hang",
    );
    assert.ok(
      hanging.every((r) => r.peakOpen <= 2),
      "at most two per endpoint",
    );
    // Recorded as delivered while the hanging requests still wait.
    let quietStatuses: string[] = [];
    await untilAsync(async () => {
      quietStatuses = (await deliveries(quiet.projectId)).map((d) => d.status);
      return quietStatuses.every((s) => s === "succeeded");
    }, "the quiet project's deliveries recorded");
    assert.deepEqual(quietStatuses, ["succeeded", "succeeded"]);
    assert.equal(
      sum(hanging, (r) => r.open),
      4,
    );
  });

  it("a claim reads what the endpoints can take, not the backlog of an endpoint at its cap", async () => {
    // 2,000 deliveries wait for an endpoint at its cap, all older than another project's one.
    // The claim used to read every one of them to find none it could take (11 ms a claim at
    // 9,000, one claim per delivery made, under the events bench). It must take the other
    // project's delivery, reading a number of rows that does not depend on the backlog.
    const [busy, other] = [await project(), await project()];
    const busyEndpoint = await addWebhookEndpoint(t, busy, "https://hooks.example.com/busy", ["balance.low"]);
    await addWebhookEndpoint(t, other, "https://hooks.example.com/other", ["balance.low"]);
    const backlog = 2_000;
    await emitBalanceLow(t.db, busy.projectId, backlog);
    await emitBalanceLow(t.db, other.projectId, 1);
    const caps = { perEndpoint: 2, perProject: 4 };
    const inFlight = {
      byEndpoint: new Map([[busyEndpoint.id, 2]]),
      byProject: new Map([[busy.projectId, 2]]),
    };
    // Its window (16 × 8 of the oldest due rows) and a few more: not the backlog, and no more
    // for a claim of more rows (a worker's claim asks up to 2 × 64 with the defaults).
    for (const limit of [16, 128]) {
      const read = await claimRowsRead(claimStatement(limit, 60_000, caps, inFlight));
      assert.ok(
        read < 16 * 8 + 50,
        `a claim of ${limit} read ${read} rows of webhook_deliveries with ${backlog} waiting`,
      );
    }
    const claimed = await claimDue(t.db, 16, 60_000, caps, inFlight, t.services.keyring);
    assert.deepEqual(
      claimed.map((d) => d.projectId),
      [other.projectId],
    );
  });

  it("a claim does not visit endpoints whose deliveries wait for a later retry, when few are due", async () => {
    // 300 endpoints, each with a delivery scheduled for a retry an hour from now (receivers that
    // fail for a day keep such rows), and one due delivery elsewhere: the claim takes it, reading
    // the due rows only, not a row or an index entry per waiting endpoint.
    const [failing, other] = [await project(), await project()];
    await t.db.query(
      `INSERT INTO webhook_endpoints (project_id, url, event_types, secret)
       SELECT $1, 'https://hooks.example.com/failing/' || g, ARRAY['balance.low'], 'v1:k:sealed:secret'
       FROM generate_series(1, 300) g`,
      [failing.projectId],
    );
    await emitBalanceLow(t.db, failing.projectId, 1);
    await t.db.query(
      `UPDATE webhook_deliveries d SET next_attempt_at = now() + interval '1 hour'
       FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.project_id = $1 AND d.status = 'pending'`,
      [failing.projectId],
    );
    await addWebhookEndpoint(t, other, "https://hooks.example.com/other", ["balance.low"]);
    await emitBalanceLow(t.db, other.projectId, 1);
    const caps = { perEndpoint: 2, perProject: 4 };
    const idle = { byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
    const read = await claimRowsRead(claimStatement(16, 60_000, caps, idle));
    assert.ok(read < 50, `the claim read ${read} rows of webhook_deliveries with 300 endpoints waiting`);
    const claimed = await claimDue(t.db, 16, 60_000, caps, idle, t.services.keyring);
    assert.deepEqual(
      claimed.map((d) => d.projectId),
      [other.projectId],
    );
  });

  /** An attempt the receiver answered with `statusCode`, and what comes of it. */
  function answered(statusCode: number, next: AttemptResult["next"]): AttemptResult {
    const error = statusCode >= 200 && statusCode < 300 ? null : `HTTP ${statusCode}`;
    return { startedAt: new Date(), latencyMs: 5, statusCode, error, next };
  }

  /** A project with one endpoint and one event for it; `mine` claims (60 s leases) what is due of that endpoint. */
  async function oneDelivery(url: string) {
    const p = await project();
    const endpoint = await addWebhookEndpoint(t, p, url, ["balance.low"]);
    await emitBalanceLow(t.db, p.projectId, 1);
    const caps = { perEndpoint: 4, perProject: 4 };
    const idle = { byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
    const mine = async () =>
      (await claimDue(t.db, 16, 60_000, caps, idle, t.services.keyring)).filter(
        (d) => d.endpointId === endpoint.id,
      );
    return { p, endpoint, mine };
  }

  it("leases a claimed delivery: not claimed again until the lease ends, then claimed with the next attempt", async () => {
    const { endpoint, mine } = await oneDelivery("https://hooks.example.com/leased");
    const [first] = await mine();
    assert.equal(first?.attempt, 1);
    assert.deepEqual(await mine(), [], "leased: not due, whatever its next_attempt_at says");
    // The delivery log shows when a leased delivery comes back if its instance dies.
    const [shown] = await listDeliveries(t.db, endpoint.id, { limit: 1, beforeId: null, status: null });
    assert.ok(Date.parse(shown!.next_attempt_at!) > Date.now(), "the lease's end, ahead");
    // The lease runs out: its end moved into the past rather than waited for, so that a slow
    // machine cannot let a short lease end before the check above.
    await t.db.query(
      "UPDATE webhook_deliveries SET leased_until = now() - interval '1 second' WHERE id = $1",
      [first!.id],
    );
    const [again] = await mine();
    assert.equal(again?.id, first!.id);
    assert.equal(again?.attempt, 2, "the lease ran out: claimed anew, the attempt counter moved on");
    // The first holder's late result is logged, but leaves the delivery to its new holder.
    const result = answered(200, { kind: "succeeded" });
    assert.deepEqual(await recordAttempts(t.db, [{ delivery: first!, result }]), [false]);
    // Handed back unattempted, it is due at once; recorded, it is done.
    await releaseClaims(t.db, [again!]);
    const [third] = await mine();
    assert.equal(third?.attempt, 2, "a release gives the attempt back");
    assert.deepEqual(await recordAttempts(t.db, [{ delivery: third!, result }]), [true]);
    assert.deepEqual(await mine(), []);
  });

  it("a redelivery while an attempt is in flight: the old attempt's result is logged but moves nothing", async () => {
    // A redelivery sets the attempt counter back to 0, so the claim after it carries attempt 1
    // again. Fenced by the attempt number, the first holder's late result would land on the new
    // claim: here a retry due at once, clearing the new holder's lease, so the delivery could be
    // claimed a third time with the second request still open (migration 051).
    const { p, endpoint, mine } = await oneDelivery("https://hooks.example.com/fenced");
    const [first] = await mine();
    assert.equal(first?.attempt, 1);
    assert.equal(await redeliver(t.db, p.projectId, endpoint.id, first!.id), true);
    const [second] = await mine();
    assert.equal(second?.id, first!.id);
    assert.equal(second?.attempt, 1, "a fresh schedule: the attempt number starts again");
    const retryNow = answered(503, { kind: "retry", delayMs: 0 });
    assert.deepEqual(await recordAttempts(t.db, [{ delivery: first!, result: retryNow }]), [false]);
    await releaseClaims(t.db, [first!]);
    assert.deepEqual(await mine(), [], "the second claim's lease holds");
    const [row] = await t.db.query<{ attempts: number; leased: boolean }>(
      "SELECT attempts, leased_until > now() AS leased FROM webhook_deliveries WHERE id = $1",
      [first!.id],
    );
    assert.deepEqual(row, { attempts: 1, leased: true });
    const [shown] = await listDeliveries(t.db, endpoint.id, { limit: 1, beforeId: null, status: null });
    assert.deepEqual(
      shown!.log.map((a) => [a.attempt, a.status_code]),
      [[1, 503]],
      "the late attempt is in the log",
    );
    const done = answered(200, { kind: "succeeded" });
    assert.deepEqual(await recordAttempts(t.db, [{ delivery: second!, result: done }]), [true]);
  });

  it("claims without writing an index entry: the claim's update stays on the row's page (HOT)", async () => {
    // A claim changes the lease and the attempt counter, which no index holds (migration 050).
    // When it moved next_attempt_at, a key of two indexes, every claimed delivery got a new entry
    // in each of the five indexes that hold a pending row.
    const p = await project();
    await addWebhookEndpoint(t, p, "https://hooks.example.com/hot", ["balance.low"]);
    await emitBalanceLow(t.db, p.projectId, 8);
    const idle = { byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
    const claim = claimStatement(16, 60_000, { perEndpoint: 16, perProject: 16 }, idle);
    // The counters are read before and after, in the claim's transaction: what PostgreSQL has
    // not yet flushed of earlier transactions is in them too.
    const stats = `SELECT pg_stat_get_xact_tuples_updated('webhook_deliveries'::regclass)::int AS updated,
       pg_stat_get_xact_tuples_hot_updated('webhook_deliveries'::regclass)::int AS hot`;
    const counts = await t.db.transaction(async (tx) => {
      const [before] = await tx.query<{ updated: number; hot: number }>(stats);
      const claimed = await tx.query(claim.text, claim.values);
      const [after] = await tx.query<{ updated: number; hot: number }>(stats);
      return {
        claimed: claimed.length,
        updated: after!.updated - before!.updated,
        hot: after!.hot - before!.hot,
      };
    });
    assert.ok(counts.claimed >= 8, `claimed ${counts.claimed}`);
    assert.equal(counts.updated, counts.claimed);
    assert.equal(counts.hot, counts.claimed, "every claimed row updated in place, no new index entries");
  });

  it("holds one endpoint to its in-flight cap", async () => {
    const p = await project();
    const slow = await receiver({ status: 200, delayMs: 150 });
    await addWebhookEndpoint(t, p, slow.url, ["deposit.credited"]);
    await events(p.projectId, 6);
    const attempted = await worker({ concurrency: 16, caps: { perEndpoint: 2, perProject: 8 } }).drain();
    assert.equal(attempted, 6);
    assert.equal(slow.received.length, 6);
    assert.equal(slow.peakOpen, 2, "two at once, never more");
    assert.ok((await deliveries(p.projectId)).every((d) => d.status === "succeeded"));
  });

  it("holds one project to its in-flight cap across its endpoints, and another project to its own", async () => {
    const [a, b] = [await project(), await project()];
    // One receiver per project, one path per endpoint: the receiver's count is the project's.
    const [forA, forB] = [
      await receiver({ status: 200, delayMs: 150 }),
      await receiver({ status: 200, delayMs: 150 }),
    ];
    for (const i of [1, 2, 3]) {
      await addWebhookEndpoint(t, a, `${forA.url}/${i}`, ["deposit.credited"]);
      await addWebhookEndpoint(t, b, `${forB.url}/${i}`, ["deposit.credited"]);
    }
    await events(a.projectId, 4);
    await events(b.projectId, 4);
    const attempted = await worker({ concurrency: 16, caps: { perEndpoint: 4, perProject: 3 } }).drain();
    assert.equal(attempted, 24);
    assert.equal(forA.received.length, 12);
    assert.equal(forB.received.length, 12);
    assert.equal(forA.peakOpen, 3, "project a: three at once, never more");
    assert.equal(forB.peakOpen, 3, "project b: three at once, never more");
  });
});

describe("a freed slot does not wait for the database", () => {
  it("sends an endpoint's next delivery as its previous exchange ends, before that one's record or the next claim is back", async () => {
    const p = await project();
    const r = await receiver({ status: 200 });
    await addWebhookEndpoint(t, p, r.url, ["deposit.credited"]);
    await events(p.projectId, 3);
    // What the worker does, in order: its claims and records as the database sees them, its sends.
    const log: string[] = [];
    const traced = watched((phase, text) => {
      const what = isClaim(text) ? "claim" : isRecord(text) ? "record" : null;
      if (what) log.push(`${what} ${phase}`);
    });
    const send = webhookSender("allow");
    const w = webhookWorker(traced, {
      retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 2 },
      timeoutMs: 30_000,
      pollIntervalMs: 20,
      keyring: t.services.keyring,
      concurrency: 4,
      caps: { perEndpoint: 1, perProject: 1 },
      send: (url, req) => {
        log.push("send");
        return send(url, req);
      },
    });
    workers.push(w);
    assert.equal(await w.drain(), 3);
    assert.equal(r.received.length, 3);
    assert.equal(r.peakOpen, 1, "one exchange at a time: the endpoint's cap");
    assert.ok((await deliveries(p.projectId)).every((d) => d.status === "succeeded"));
    // The second send comes before the first record is back and before the second claim is:
    // before, a slot's next delivery waited for its previous record and then for a claim.
    const nth = (entry: string, n: number) =>
      log.reduce((at, e, i) => (e === entry && --n === 0 ? i : at), -1);
    assert.ok(nth("send", 2) < nth("record back", 1), log.join(", "));
    assert.ok(nth("send", 2) < nth("claim back", 2), log.join(", "));
  });
});

describe("claims under a stream of events (issue 22: a claim is the costliest statement of a delivery)", () => {
  it("takes a stream's deliveries a window at a time: at most one claim per REFILL_AFTER_MS (and per poll tick), not one per exchange, and each event once", async () => {
    const p = await project();
    const r = await receiver({ status: 200 });
    await addWebhookEndpoint(t, p, r.url, ["balance.low"]);
    let claims = 0;
    const counted = watched((phase, text) => {
      if (isClaim(text) && phase === "asked") claims++;
    });
    const pollIntervalMs = 1000;
    const w = webhookWorker(counted, {
      retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 2 },
      timeoutMs: 30_000,
      pollIntervalMs,
      keyring: t.services.keyring,
    });
    workers.push(w);
    const started = performance.now();
    w.start();
    // A steady stream: 5 events at a time, 60 times, each written as the service writes events.
    for (let i = 0; i < 60; i++) {
      await emitBalanceLow(t.db, p.projectId, 5);
      await sleep(2);
    }
    await until(() => r.received.length >= 300, "the stream's 300 deliveries");
    const elapsedMs = performance.now() - started;
    const ids = new Set(r.received.map((x) => `${x.headers["webhook-id"]}`));
    assert.equal(r.received.length, 300, "no event twice");
    assert.equal(ids.size, 300);
    // Refills come at most one per window and the poll at most one per tick (the first claim is
    // the worker's start). Claiming as each exchange ended, with nothing waiting, made 80 claims in
    // 1,068 ms here: one per 13 ms, past this bound; the window made 36 in 853 ms.
    const bound = Math.ceil(elapsedMs / REFILL_AFTER_MS) + Math.ceil(elapsedMs / pollIntervalMs) + 2;
    assert.ok(claims <= bound, `${claims} claims in ${Math.round(elapsedMs)} ms (at most ${bound})`);
  });
});

describe("claims across instances", () => {
  it("two instances claiming side by side send each delivery once, each within its own caps", async () => {
    const p = await project();
    const slow = await receiver({ status: 200, delayMs: 50 });
    for (const i of [1, 2, 3]) await addWebhookEndpoint(t, p, `${slow.url}/${i}`, ["deposit.credited"]);
    await events(p.projectId, 10);
    const options = { concurrency: 8, caps: { perEndpoint: 2, perProject: 3 } };
    const [one, two] = await Promise.all([worker(options).drain(), worker(options).drain()]);
    assert.equal(one + two, 30);
    const ids = slow.received.map((r) => `${r.headers["webhook-id"]}`);
    assert.equal(ids.length, 30);
    // Three endpoints share each event id: every (event, endpoint) pair arrived exactly once.
    const perEvent = new Map<string, number>();
    for (const id of ids) perEvent.set(id, (perEvent.get(id) ?? 0) + 1);
    assert.deepEqual([...new Set(perEvent.values())], [3]);
    const rows = await deliveries(p.projectId);
    assert.ok(rows.every((d) => d.status === "succeeded" && d.attempts === 1));
    // The caps are each instance's own: together at most twice the project's.
    assert.ok(slow.peakOpen <= 6, `${slow.peakOpen} open at once`);
  });
});

describe("request deadlines survive garbage collection", () => {
  it("records a hanging delivery as a timeout at WEBHOOK_TIMEOUT_MS although gc() ran while it waited", async () => {
    assert.equal(typeof global.gc, "function", "this test needs node --expose-gc (scripts/run-tests.mjs)");
    const p = await project();
    const hanging = await receiver({ hold: true });
    await addWebhookEndpoint(t, p, hanging.url, ["deposit.credited"]);
    await events(p.projectId, 1);
    const w = worker({ timeoutMs: 300, retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 1 } });

    const drained = w.drain();
    await within(10_000, hanging.waitFor(1), "the request");
    global.gc!();
    await sleep(10);
    global.gc!();
    // Well before undici's own 300 s: the deadline is the worker's 300 ms.
    assert.equal(await within(10_000, drained, "the hanging delivery's end"), 1);
    assert.deepEqual(
      (await deliveries(p.projectId)).map((d) => [d.status, d.last_error]),
      [["failed", "timed out after 300 ms"]],
    );
    await until(() => hanging.open === 0, "the receiver seeing the request dropped");
  });

  it("ends an approval call that gets no answer at the project's timeout although gc() ran while it waited", async () => {
    assert.equal(typeof global.gc, "function", "this test needs node --expose-gc (scripts/run-tests.mjs)");
    const p = await project();
    const hanging = await receiver({ hold: true });
    await putApproval(
      t.db,
      t.services.keyring,
      p.projectId,
      { url: hanging.url, timeoutMs: 300, failMode: "closed" },
      `whsec_${randomBytes(32).toString("base64")}`,
      false,
    );
    const gate = approvalGate({ db: t.db, cacheTtlMs: 0, now: Date.now, keyring: t.services.keyring });
    const asked = gate.check({
      projectId: p.projectId,
      mode: "call",
      chainId: 14601,
      sender: `0x${"11".repeat(20)}`,
      calls: [{ target: `0x${"22".repeat(20)}`, selector: "0xa0712d68" }],
      maxGasCostWei: 1n,
      maxTotalGas: 1n,
    });
    await within(10_000, hanging.waitFor(1), "the approval request");
    global.gc!();
    await sleep(10);
    global.gc!();
    const outcome = await within(10_000, asked, "the approval call's end");
    assert.equal(outcome.kind, "refused");
    assert.match(outcome.kind === "refused" ? outcome.detail : "", /no answer within 300 ms/);
  });
});

/**
 * Rows of webhook_deliveries a claim reads (deliveriesRead), run and rolled back. The claim is a
 * function (db/functions/webhook_claim.sql), whose plans an EXPLAIN of the call does not show; the
 * counters see every statement inside it.
 */
async function claimRowsRead(claim: { text: string; values: unknown[] }): Promise<number> {
  return rolledBack(t.db, async (tx) => {
    const before = await deliveriesRead(tx);
    await tx.query(claim.text, claim.values);
    return (await deliveriesRead(tx)) - before;
  });
}

describe("request deadlines without an AbortSignal per request (issue 22: about 10 µs of CPU each)", () => {
  it("a deadline aborts with a TimeoutError at its time, and not once cleared", async () => {
    const late = deadline(30);
    const cleared = deadline(30);
    cleared.clear();
    await once(late.signal, "abort");
    assert.equal(late.signal.aborted, true);
    assert.equal((late.signal.reason as Error).name, "TimeoutError");
    await sleep(60);
    assert.equal(cleared.signal.aborted, false);
  });

  it("one stop signal aborts every deadline still open under it, with its reason, and none it let go of", async () => {
    const stop = new AbortController();
    const open = [deadline(60_000, stop.signal), deadline(60_000, stop.signal)];
    const done = deadline(60_000, stop.signal);
    done.clear();
    const why = new Error("stopping");
    stop.abort(why);
    for (const d of open) {
      assert.equal(d.signal.aborted, true);
      assert.equal(d.signal.reason, why);
      d.clear();
    }
    assert.equal(done.signal.aborted, false);
    // Made after the stop: aborted from the start, and undici refuses to send it.
    const afterwards = deadline(60_000, stop.signal);
    assert.equal(afterwards.signal.aborted, true);
    const r = await receiver();
    await assert.rejects(
      webhookSender("allow")(r.url, { headers: {}, body: "{}", signal: afterwards.signal }),
      (err: Error) => err === why,
    );
    afterwards.clear();
    assert.equal(r.received.length, 0);
  });

  it("stopping the worker ends its hanging requests at once and hands their deliveries back, unattempted", async () => {
    const p = await project();
    const hanging = await receiver({ hold: true });
    await addWebhookEndpoint(t, p, hanging.url, ["deposit.credited"]);
    await events(p.projectId, 2);
    // The helper's timeout (30 s) is far past the test's own bound: only the stop can end these
    // requests in time.
    const w = worker({});
    w.start();
    await within(10_000, hanging.waitFor(2), "both requests");
    await within(10_000, w.stop(), "the worker's stop");
    await until(() => hanging.open === 0, "the receiver seeing both requests dropped");
    const rows = (await deliveries(p.projectId)).map(({ status, attempts, leased_until }) => ({
      status,
      attempts,
      leased_until,
    }));
    assert.deepEqual(rows, [
      { status: "pending", attempts: 0, leased_until: null },
      { status: "pending", attempts: 0, leased_until: null },
    ]);
    const attempts = await t.db.query(
      `SELECT a.id FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
       JOIN event_outbox e ON e.id = d.event_id WHERE e.project_id = $1`,
      [p.projectId],
    );
    assert.equal(attempts.length, 0);
  });

  it("a stop hands back everything the worker holds in one or two statements, not one per delivery", async () => {
    const p = await project();
    const hanging = await receiver({ hold: true });
    await addWebhookEndpoint(t, p, hanging.url, ["deposit.credited"]);
    await events(p.projectId, 20);
    let releases = 0;
    // A hand-back is the statement that takes an attempt back and ends the lease.
    const counted = watched((phase, text) => {
      if (phase === "asked" && /attempts = (d\.)?attempts - 1, leased_until = NULL/.test(text)) releases++;
    });
    // Two exchanges open to the endpoint, and up to eight claimed per slot waiting behind them.
    const w = patientWorker(counted, { perEndpoint: 2, perProject: 16 });
    w.start();
    await within(10_000, hanging.waitFor(2), "both requests");
    assert.equal(
      await leasedCount(p.projectId),
      16,
      "two sending and fourteen waiting, eight per slot of the endpoint's two",
    );
    await stopsHandingBackAll(w, p.projectId, 20);
    assert.ok(releases >= 1 && releases <= 2, `${releases} statements handed 16 deliveries back`);
  });

  it("an endpoint changed back to one event per request while its deliveries wait: the batch formed before still sends every one", async () => {
    const p = await project();
    const r = await receiver({ hold: true });
    const endpoint = await addWebhookEndpoint(t, p, r.url, ["deposit.credited"], { maxEventsPerRequest: 10 });
    const w = patientWorker(t.db, { perEndpoint: 1, perProject: 16 });
    const leased = () => leasedCount(p.projectId);
    w.start();
    // The first event goes out alone and is held: the endpoint's one exchange is busy.
    await events(p.projectId, 1);
    await within(10_000, r.waitFor(1), "the first request");
    // The second is claimed while the endpoint still takes batches, the third after it stopped.
    await events(p.projectId, 1);
    await untilAsync(async () => (await leased()) === 2, "the second event claimed");
    const patched = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}/webhooks/${endpoint.id}`,
      token: p.ownerToken,
      payload: { maxEventsPerRequest: 1 },
    });
    assert.equal(patched.statusCode, 200, patched.body);
    await events(p.projectId, 1);
    await untilAsync(async () => (await leased()) === 3, "the third event claimed");
    r.fallback = { status: 200 };
    r.releaseHeld(200);
    await until(() => r.received.length >= 2, "the second request");
    await untilAsync(
      async () => (await deliveries(p.projectId)).every((d) => d.status === "succeeded"),
      "every delivery succeeded",
    );
    // Every event that was recorded delivered was in a request the receiver got.
    const sent = r.received.flatMap((x) => (JSON.parse(x.body) as { events: { id: string }[] }).events);
    const ids = await t.db.query<{ event_id: string }>(
      "SELECT event_id FROM event_outbox WHERE project_id = $1",
      [p.projectId],
    );
    assert.deepEqual(sent.map((e) => e.id).sort(), ids.map((e) => e.event_id).sort());
    assert.equal(r.received.length, 2, "the two waiting went together, in the batch formed for them");
  });

  it("a stop hands back every delivery of a batch in flight, and those waiting behind it", async () => {
    const p = await project();
    const hanging = await receiver({ hold: true });
    await addWebhookEndpoint(t, p, hanging.url, ["deposit.credited"], { maxEventsPerRequest: 5 });
    await events(p.projectId, 20);
    // Two requests open to the endpoint, five events each; sixteen claimed, six of them waiting.
    const w = patientWorker(t.db, { perEndpoint: 2, perProject: 16 });
    w.start();
    await within(10_000, hanging.waitFor(2), "both requests");
    const sizes = hanging.received.map((r) => (JSON.parse(r.body) as { events: unknown[] }).events.length);
    assert.deepEqual(sizes, [5, 5]);
    await stopsHandingBackAll(w, p.projectId, 20);
  });
});
