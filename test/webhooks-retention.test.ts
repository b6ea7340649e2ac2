import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { maintenance } from "../src/retention/maintenance.ts";
import {
  DAY_MS,
  forgetFinishedDeliveries,
  forgetOldEvents,
  type OutboxPosition,
} from "../src/retention/webhooks.ts";
import { type WebhookWorker, webhookWorker } from "../src/webhooks/worker.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { addWebhookEndpoint, deliveryLog, type Receiver, startReceiver } from "./support/receiver.ts";

/**
 * Retention of the webhook tables (src/retention/webhooks.ts): finished deliveries, their attempt
 * logs and outbox events go once WEBHOOK_RETENTION_DAYS are over; anything still owed to an
 * endpoint stays with its event. The database stamps rows with its own clock, so the tests move
 * the `now` they hand to the job (and backdate rows where a test needs old and new side by side).
 */

const RETENTION_DAYS = 30;
let t: TestApp;
/** Gives up after the second attempt, quickly: for deliveries that succeed or fail for good. */
let fast: WebhookWorker;
/** Waits a minute between attempts: a failed first attempt leaves a delivery pending, retrying. */
let slow: WebhookWorker;
const receivers: Receiver[] = [];

before(async () => {
  t = await startTestApp({ env: { WEBHOOK_RETENTION_DAYS: String(RETENTION_DAYS) } });
  fast = webhookWorker(t.db, {
    retry: { baseDelayMs: 10, maxDelayMs: 20, maxAttempts: 2 },
    // The receivers answer at once; a loaded machine (test files side by side) must not turn a
    // slow answer into a retry, which would change the attempt counts these tests assert.
    timeoutMs: 10_000,
    pollIntervalMs: 50,
    keyring: t.services.keyring,
  });
  slow = webhookWorker(t.db, {
    retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 5 },
    timeoutMs: 10_000,
    pollIntervalMs: 50,
    keyring: t.services.keyring,
  });
});
after(async () => {
  await fast.stop();
  await slow.stop();
  for (const r of receivers) await r.close();
  await t.close();
});

async function receiver(status: number) {
  const r = await startReceiver({ status });
  receivers.push(r);
  return r;
}

async function project() {
  return seedProject(t, { slug: `whr-${randomBytes(3).toString("hex")}` });
}

async function addEndpoint(p: { projectId: string; ownerToken: string }, url: string) {
  return (await addWebhookEndpoint(t, p, url, ["deposit.credited"])).id;
}

async function pause(p: { projectId: string; ownerToken: string }, endpointId: number) {
  const res = await t.request({
    method: "PATCH",
    url: `/projects/${p.projectId}/webhooks/${endpointId}`,
    token: p.ownerToken,
    payload: { enabled: false },
  });
  assert.equal(res.statusCode, 200, res.body);
}

/** `n` deposit.credited events for the project: one delivery per subscribed, enabled endpoint. */
async function events(projectId: string, n: number) {
  for (let i = 0; i < n; i++) {
    await creditDeposit(t.db, {
      projectId,
      reference: `14601:0x${randomBytes(32).toString("hex")}:0`,
      amountWei: 1n,
    });
  }
}

/** Runs the fast worker until none of these endpoints' deliveries is pending. */
async function finishAll(endpointIds: number[]) {
  for (let pass = 0; pass < 500; pass++) {
    await fast.drain();
    const [row] = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ANY ($1) AND status = 'pending'",
      [endpointIds],
    );
    if (row!.n === 0) return;
    await sleep(20);
  }
  assert.fail("deliveries still pending after 500 passes");
}

async function counts(projectId: string) {
  const [row] = await t.db.query<{
    events: number;
    deliveries: number;
    pending: number;
    attempts: number;
  }>(
    `SELECT (SELECT count(*) FROM event_outbox WHERE project_id = $1)::int AS events,
       (SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
         WHERE e.project_id = $1)::int AS deliveries,
       (SELECT count(*) FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
         WHERE e.project_id = $1 AND d.status = 'pending')::int AS pending,
       (SELECT count(*) FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
         JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.project_id = $1)::int AS attempts`,
    [projectId],
  );
  return row!;
}

/** Moves a project's rows `days` into the past, as if they had been written then. */
async function backdate(projectId: string, days: number) {
  await t.db.query(
    `UPDATE event_outbox SET created_at = created_at - make_interval(days => $2) WHERE project_id = $1`,
    [projectId, days],
  );
  await t.db.query(
    `UPDATE webhook_deliveries d SET created_at = d.created_at - make_interval(days => $2),
       completed_at = d.completed_at - make_interval(days => $2)
     FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.project_id = $1`,
    [projectId, days],
  );
}

/** Both steps to the end, as the maintenance job runs them; what each removed. */
async function sweep(nowMs: number, batchSize = 1000) {
  let deliveries = 0;
  for (;;) {
    const n = await forgetFinishedDeliveries(t.db, nowMs, RETENTION_DAYS, batchSize);
    assert.ok(n <= batchSize);
    deliveries += n;
    if (n < batchSize) break;
  }
  let events = 0;
  let position: OutboxPosition | null = null;
  do {
    const step = await forgetOldEvents(t.db, nowMs, RETENTION_DAYS, batchSize, position);
    assert.ok(step.removed <= batchSize);
    events += step.removed;
    position = step.next;
  } while (position !== null);
  return { deliveries, events };
}

/**
 * What earlier tests left that a sweep far in the future would remove, removed now, so that
 * each test counts only its own rows (pending deliveries stay: no sweep ever removes them).
 */
async function cleanSlate() {
  await sweep(Date.now() + 100 * 365 * DAY_MS);
}

/** The endpoint's delivery log through the API (its latest 200 deliveries). */
const deliveriesOf = (p: { projectId: string; ownerToken: string }, endpointId: number) =>
  deliveryLog<{ id: number; event_id: string; status: string; attempts: number }>(t, p, endpointId);

function redeliver(p: { projectId: string; ownerToken: string }, endpointId: number, deliveryId: number) {
  return t.request({
    method: "POST",
    url: `/projects/${p.projectId}/webhooks/${endpointId}/deliveries/${deliveryId}/redeliver`,
    token: p.ownerToken,
  });
}

describe("webhook retention", () => {
  it("reads WEBHOOK_RETENTION_DAYS", () => {
    assert.equal(t.config.webhookRetentionDays, RETENTION_DAYS);
  });

  it("removes deliveries that succeeded or failed for good, with their attempts, then their events, once the period is over", async () => {
    await cleanSlate();
    const p = await project();
    const ok = await addEndpoint(p, (await receiver(200)).url);
    const bad = await addEndpoint(p, (await receiver(500)).url);
    await events(p.projectId, 4);
    await finishAll([ok, bad]);
    const before = await counts(p.projectId);
    assert.deepEqual(before, { events: 4, deliveries: 8, pending: 0, attempts: 4 + 4 * 2 });
    assert.ok((await deliveriesOf(p, bad)).every((d) => d.status === "failed" && d.attempts === 2));

    // A day short of the period: nothing goes.
    assert.deepEqual(await sweep(Date.now() + (RETENTION_DAYS - 1) * DAY_MS), { deliveries: 0, events: 0 });
    assert.deepEqual(await counts(p.projectId), before);

    // Past it: the deliveries, every attempt row, and the events they held.
    assert.deepEqual(await sweep(Date.now() + (RETENTION_DAYS + 1) * DAY_MS), { deliveries: 8, events: 4 });
    assert.deepEqual(await counts(p.projectId), { events: 0, deliveries: 0, pending: 0, attempts: 0 });
    assert.deepEqual(await deliveriesOf(p, ok), []);
  });

  it("keeps pending and retrying deliveries and their events however old, and removes them only once they finish and age", async () => {
    await cleanSlate();
    const p = await project();
    const done = await addEndpoint(p, (await receiver(200)).url);
    const flaky = await receiver(500);
    const retrying = await addEndpoint(p, flaky.url);
    const paused = await addEndpoint(p, (await receiver(200)).url);
    await events(p.projectId, 3);
    await pause(p, paused);
    // One attempt each: `done` succeeds, `retrying` fails once and waits a minute for its next.
    await slow.drain();
    const retryingLog = await deliveriesOf(p, retrying);
    assert.ok(retryingLog.every((d) => d.status === "pending" && d.attempts === 1));
    assert.ok((await deliveriesOf(p, paused)).every((d) => d.status === "pending" && d.attempts === 0));
    assert.ok((await deliveriesOf(p, done)).every((d) => d.status === "succeeded"));

    // Ten years old: the finished deliveries go, the pending ones and every event stay.
    await backdate(p.projectId, 3650);
    assert.deepEqual(await sweep(Date.now()), { deliveries: 3, events: 0 });
    assert.deepEqual(await counts(p.projectId), { events: 3, deliveries: 6, pending: 6, attempts: 3 });
    // The delivery log still shows them with their events, and they can be redelivered.
    const kept = await deliveriesOf(p, retrying);
    assert.deepEqual(
      kept.map((d) => d.event_id),
      retryingLog.map((d) => d.event_id),
    );
    assert.equal((await redeliver(p, retrying, kept[0]!.id)).statusCode, 202);

    // The receiver recovers and the endpoint is resumed: all six are delivered, just now, so
    // they and their (ten-year-old) events are kept for the period...
    flaky.fallback = { status: 200 };
    const resume = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}/webhooks/${paused}`,
      token: p.ownerToken,
      payload: { enabled: true },
    });
    assert.equal(resume.statusCode, 200);
    await t.db.query(
      "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE endpoint_id = $1 AND status = 'pending'",
      [retrying],
    );
    await finishAll([retrying, paused]);
    assert.deepEqual(await sweep(Date.now() + (RETENTION_DAYS - 1) * DAY_MS), { deliveries: 0, events: 0 });
    assert.equal((await counts(p.projectId)).events, 3);
    // ...and go after it.
    assert.deepEqual(await sweep(Date.now() + (RETENTION_DAYS + 1) * DAY_MS), { deliveries: 6, events: 3 });
    assert.deepEqual(await counts(p.projectId), { events: 0, deliveries: 0, pending: 0, attempts: 0 });
  });

  it("keeps recent deliveries and an old event whose delivery finished recently; a removed delivery answers redelivery like an unknown one", async () => {
    await cleanSlate();
    const p = await project();
    const endpoint = await addEndpoint(p, (await receiver(200)).url);
    await events(p.projectId, 2);
    await finishAll([endpoint]);
    const [newer, older] = await deliveriesOf(p, endpoint);
    // The older delivery finished 40 days ago; the newer one's event is as old, but it was
    // redelivered 10 days ago (its completed_at moved on), so it and its event stay.
    await t.db.query(
      `UPDATE event_outbox SET created_at = created_at - interval '40 days'
       WHERE event_id = ANY ($1)`,
      [[newer!.event_id, older!.event_id]],
    );
    await t.db.query(
      `UPDATE webhook_deliveries SET created_at = created_at - interval '40 days',
         completed_at = completed_at - CASE WHEN id = $1 THEN interval '40 days' ELSE interval '10 days' END
       WHERE id IN ($1, $2)`,
      [older!.id, newer!.id],
    );
    // A third event, just written and delivered: recent in every way.
    await events(p.projectId, 1);
    await finishAll([endpoint]);

    assert.deepEqual(await sweep(Date.now()), { deliveries: 1, events: 1 });
    const left = await deliveriesOf(p, endpoint);
    assert.equal(left.length, 2);
    assert.ok(!left.some((d) => d.id === older!.id));
    assert.equal((await counts(p.projectId)).events, 2);

    // The pruned delivery is unknown to the API, exactly like an id that never existed.
    const pruned = await redeliver(p, endpoint, older!.id);
    const unknown = await redeliver(p, endpoint, 987_654_321);
    assert.equal(pruned.statusCode, 404);
    assert.equal(unknown.statusCode, 404);
    const prunedBody = pruned.json() as Record<string, unknown>;
    const unknownBody = unknown.json() as Record<string, unknown>;
    delete prunedBody.requestId;
    delete unknownBody.requestId;
    assert.deepEqual(prunedBody, unknownBody);
    assert.equal(prunedBody.code, "not_found");
    // What is kept is redelivered as before.
    assert.equal((await redeliver(p, endpoint, newer!.id)).statusCode, 202);
    await finishAll([endpoint]);
  });

  it("honours the batch size, returns what it removed, and walks past events it must keep", async () => {
    await cleanSlate();
    const p = await project();
    const paused = await addEndpoint(p, (await receiver(200)).url);
    await events(p.projectId, 5);
    await pause(p, paused);
    // These five events stay pending, and are the oldest: every walk meets them first.
    await backdate(p.projectId, 400);
    const ok = await addEndpoint(p, (await receiver(200)).url);
    await events(p.projectId, 7);
    await finishAll([ok]);
    const clock = Date.now() + (RETENTION_DAYS + 1) * DAY_MS;

    const batches: number[] = [];
    for (;;) {
      const n = await forgetFinishedDeliveries(t.db, clock, RETENTION_DAYS, 3);
      batches.push(n);
      if (n < 3) break;
    }
    assert.deepEqual(batches, [3, 3, 1]);

    const steps: number[] = [];
    let position: OutboxPosition | null = null;
    do {
      const step = await forgetOldEvents(t.db, clock, RETENTION_DAYS, 3, position);
      steps.push(step.removed);
      position = step.next;
    } while (position !== null);
    // 12 events in windows of 3: the five kept ones fill the first window and part of the second;
    // the fourth window is full, so one more call finds that nothing follows it.
    assert.deepEqual(steps, [0, 1, 3, 3, 0]);
    assert.deepEqual(await counts(p.projectId), { events: 5, deliveries: 5, pending: 5, attempts: 0 });

    // The maintenance job does the same in one pass, in batches of RETENTION_BATCH_SIZE.
    await events(p.projectId, 4);
    await finishAll([ok]);
    const job = maintenance(t.db, {
      intervalMs: 0,
      batchSize: 3,
      checkpointEvery: 1_000_000,
      webhookRetentionDays: RETENTION_DAYS,
      now: () => clock,
    });
    const pass = await job.pass();
    assert.equal(pass.deliveriesRemoved, 4);
    assert.equal(pass.eventsRemoved, 4);
    assert.deepEqual(await counts(p.projectId), { events: 5, deliveries: 5, pending: 5, attempts: 0 });
    assert.deepEqual([(await job.pass()).deliveriesRemoved, (await job.pass()).eventsRemoved], [0, 0]);
  });

  it("two instances sweeping at once never fail and never remove a row twice", async () => {
    await cleanSlate();
    const p = await project();
    const a = await addEndpoint(p, (await receiver(200)).url);
    const b = await addEndpoint(p, (await receiver(500)).url);
    const total = 25;
    await events(p.projectId, total);
    await finishAll([a, b]);
    assert.deepEqual(await counts(p.projectId), {
      events: total,
      deliveries: 2 * total,
      pending: 0,
      attempts: total + 2 * total,
    });
    const clock = Date.now() + (RETENTION_DAYS + 1) * DAY_MS;

    // The bare steps, side by side, in small batches.
    const results = await Promise.all([sweep(clock, 4), sweep(clock, 4), sweep(clock, 4)]);
    const rest = await sweep(clock, 4);
    const removed = [...results, rest].reduce(
      (sum, r) => ({ deliveries: sum.deliveries + r.deliveries, events: sum.events + r.events }),
      { deliveries: 0, events: 0 },
    );
    assert.deepEqual(removed, { deliveries: 2 * total, events: total });
    assert.deepEqual(await counts(p.projectId), { events: 0, deliveries: 0, pending: 0, attempts: 0 });

    // Two maintenance jobs (two instances), each pass side by side.
    await events(p.projectId, total);
    await finishAll([a, b]);
    const jobs = [0, 1].map(() =>
      maintenance(t.db, {
        intervalMs: 0,
        batchSize: 4,
        checkpointEvery: 1_000_000,
        webhookRetentionDays: RETENTION_DAYS,
        now: () => clock,
      }),
    );
    let deliveries = 0;
    let eventsRemoved = 0;
    for (let round = 0; round < 10; round++) {
      const passes = await Promise.all(jobs.map((j) => j.pass()));
      for (const pass of passes) {
        deliveries += pass.deliveriesRemoved;
        eventsRemoved += pass.eventsRemoved;
      }
    }
    assert.deepEqual({ deliveries, events: eventsRemoved }, { deliveries: 2 * total, events: total });
    assert.deepEqual(await counts(p.projectId), { events: 0, deliveries: 0, pending: 0, attempts: 0 });
  });
});
