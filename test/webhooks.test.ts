import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { billOperation, creditDeposit, release } from "../src/ledger/ledger.ts";
import { type WebhookWorker, webhookWorker } from "../src/webhooks/worker.ts";
import { authorizeMint, seedProject, startTestApp, TEST_PAYMASTER, type TestApp } from "./support/app.ts";
import {
  addWebhookEndpoint,
  deliveryLog,
  type Received,
  type Receiver,
  startReceiver,
  verifyWebhook,
} from "./support/receiver.ts";

/**
 * Issue 11, webhooks: event endpoints fed from the outbox, their signatures, retries, delivery
 * log and redelivery, and the approval webhook, against a real HTTP receiver (node:http) on this
 * machine. The worker is the service's own, driven pass by pass (drain) with a fast schedule.
 */

const TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const SELECTOR = "0xa0712d68";

let t: TestApp;
let worker: WebhookWorker;

before(async () => {
  t = await startTestApp();
  worker = webhookWorker(t.db, {
    retry: { baseDelayMs: 20, maxDelayMs: 80, maxAttempts: 8 },
    // Long enough that a local receiver's immediate answer is never a timeout on a loaded
    // machine (at 300 ms one was, under a load average of 7, and its retry a second delivery
    // that an exact count saw); the held answers of the recovery test wait it out.
    timeoutMs: 1000,
    pollIntervalMs: 50,
    keyring: t.services.keyring,
  });
});
after(async () => {
  await worker.stop();
  await t.close();
});

async function project() {
  const p = await seedProject(t, { slug: `wh-${randomBytes(3).toString("hex")}` });
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: TARGET, functionSelector: SELECTOR },
  });
  assert.equal(allow.statusCode, 201);
  return p;
}

function addEndpoint(
  p: { projectId: string; ownerToken: string },
  url: string,
  eventTypes = ["*"],
  more: Record<string, unknown> = {},
) {
  return addWebhookEndpoint(t, p, url, eventTypes, more);
}

/** Runs the worker until the project has no pending delivery (bounded by passes, not by time). */
async function deliverAll(projectId: string) {
  for (let pass = 0; pass < 1000; pass++) {
    await worker.drain();
    const [row] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id
       WHERE e.project_id = $1 AND d.status = 'pending'`,
      [projectId],
    );
    if (row!.n === 0) return;
    await sleep(20);
  }
  assert.fail("deliveries still pending after 1000 passes");
}

interface EventJson {
  id: string;
  type: string;
  projectId: string;
  data: Record<string, string | number | boolean | null>;
}
interface DeliveryJson {
  id: number;
  event_id: string;
  status: string;
  attempts: number;
  log: { status_code: number | null; error: string | null; next_attempt_at: string | null }[];
}
/** An endpoint's delivery log through the API (its latest 200 deliveries, each with its attempts). */
const deliveriesOf = (p: { projectId: string; ownerToken: string }, endpointId: number) =>
  deliveryLog<DeliveryJson>(t, p, endpointId);
const bodies = (received: Received[]) => received.map((r) => JSON.parse(r.body) as EventJson);

describe("event webhooks", () => {
  it("signs every delivery so that the secret alone verifies it, and never lists the secret", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      const endpoint = await addEndpoint(p, receiver.url, ["deposit.credited"]);
      assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const list = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/webhooks`,
        token: p.ownerToken,
      });
      assert.equal(list.statusCode, 200);
      assert.ok(!list.body.includes(endpoint.secret) && !list.body.includes('"secret"'));

      await creditDeposit(t.db, { projectId: p.projectId, reference: "14601:0xsig:0", amountWei: 5n });
      await deliverAll(p.projectId);
      assert.equal(receiver.received.length, 1);
      const [r] = receiver.received;
      assert.ok(
        verifyWebhook(endpoint.secret, r!.headers, r!.body),
        "the signature verifies with the secret",
      );
      assert.ok(
        !verifyWebhook(endpoint.secret, r!.headers, r!.body.replace("5", "6")),
        "a changed body does not",
      );
      const [event] = bodies(receiver.received);
      assert.equal(r!.headers["webhook-id"], event!.id);
      assert.equal(event!.type, "deposit.credited");
      assert.deepEqual(event!.data.amount, "5");

      // Rotation: the new secret is shown once; both sign until the old one's grace ends.
      const rotated = await t.request({
        method: "POST",
        url: `/projects/${p.projectId}/webhooks/${endpoint.id}/rotate-secret`,
        token: p.ownerToken,
      });
      assert.equal(rotated.statusCode, 200);
      const fresh = (rotated.json() as { secret: string }).secret;
      t.secrets.add(fresh);
      await creditDeposit(t.db, { projectId: p.projectId, reference: "14601:0xsig:1", amountWei: 7n });
      await deliverAll(p.projectId);
      const second = receiver.received[1]!;
      assert.ok(verifyWebhook(fresh, second.headers, second.body));
      assert.ok(verifyWebhook(endpoint.secret, second.headers, second.body));
    } finally {
      await receiver.close();
    }
  });

  it("reports sponsored, settled (actual cost), expired, deposit credited, and balance.low once per crossing", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      await addEndpoint(p, receiver.url);
      const depositWei = 10n ** 15n;
      await creditDeposit(t.db, {
        projectId: p.projectId,
        reference: "14601:0xdep:0",
        amountWei: depositWei,
      });
      const alert = await t.request({
        method: "PUT",
        url: `/projects/${p.projectId}/balance-alert`,
        token: p.ownerToken,
        payload: { thresholdWei: (depositWei - 1n).toString() },
      });
      assert.equal(alert.statusCode, 200, alert.body);

      const a = (await authorizeMint(t, p)).json() as { authorizationId: string; maxGasCost: string };
      const b = (await authorizeMint(t, p)).json() as { authorizationId: string; maxGasCost: string };
      // Back to the deposit exactly (at the threshold, not below): the next reservation crosses again.
      const refill = BigInt(a.maxGasCost) + BigInt(b.maxGasCost);
      await creditDeposit(t.db, { projectId: p.projectId, reference: "14601:0xdep:1", amountWei: refill });
      const c = (await authorizeMint(t, p)).json() as { authorizationId: string };
      const actualCostWei = 123_456_789n;
      await t.db.transaction((tx) =>
        billOperation(tx, {
          authId: b.authorizationId,
          chainId: 14601,
          paymaster: TEST_PAYMASTER,
          outcome: "success",
          actualGasUsed: 50_000n,
          actualGasCostWei: actualCostWei,
          txHash: `0x${"ab".repeat(32)}`,
          userOpHash: `0x${"cd".repeat(32)}`,
        }),
      );
      assert.equal(await release(t.db, a.authorizationId), true);
      await deliverAll(p.projectId);

      const events = bodies(receiver.received);
      const ofType = (type: string) => events.filter((e) => e.type === type);
      assert.deepEqual(
        ofType("sponsorship.sponsored")
          .map((e) => e.data.authorizationId)
          .sort(),
        [a.authorizationId, b.authorizationId, c.authorizationId].sort(),
      );
      const settled = ofType("sponsorship.settled");
      assert.equal(settled.length, 1);
      assert.equal(settled[0]!.data.authorizationId, b.authorizationId);
      assert.equal(settled[0]!.data.actualGasCost, actualCostWei.toString());
      assert.equal(settled[0]!.data.outcome, "success");
      assert.equal(settled[0]!.data.maxGasCost, b.maxGasCost);
      const expired = ofType("sponsorship.expired");
      assert.deepEqual(
        expired.map((e) => [e.data.authorizationId, e.data.releasedWei]),
        [[a.authorizationId, a.maxGasCost]],
      );
      assert.deepEqual(
        ofType("deposit.credited").map((e) => e.data.amount),
        [depositWei.toString(), refill.toString()],
      );
      assert.equal(ofType("deposit.credited")[0]!.data.chainId, 14601);
      const low = ofType("balance.low");
      assert.equal(low.length, 2, "two crossings, two alerts (b's reservation stayed below: none)");
      assert.ok(low.every((e) => BigInt(String(e.data.balance)) < BigInt(String(e.data.threshold))));
      assert.equal(events.length, 3 + 1 + 1 + 2 + 2);
      assert.equal(new Set(events.map((e) => e.id)).size, events.length, "every event has its own id");
      assert.ok(events.every((e) => e.projectId === p.projectId));
    } finally {
      await receiver.close();
    }
  });

  it("a receiver that fails (500s, timeouts) then recovers gets every event exactly once after de-duplication", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      const endpoint = await addEndpoint(p, receiver.url);
      // The first answers: errors, hangs past the attempt timeout, a redirect, garbage; then 200s.
      receiver.script.push(
        { status: 500 },
        { hold: true },
        { status: 503 },
        { status: 302 },
        { hold: true },
        { status: 500 },
        { status: 429 },
        { status: 500 },
      );
      for (let i = 0; i < 6; i++) {
        await creditDeposit(t.db, {
          projectId: p.projectId,
          reference: `14601:0xre:${i}`,
          amountWei: 10n ** 16n,
        });
      }
      for (let i = 0; i < 4; i++) assert.equal((await authorizeMint(t, p)).statusCode, 200);
      await deliverAll(p.projectId);
      receiver.releaseHeld(200);

      const expected = await t.db.query<{ event_id: string }>(
        "SELECT event_id FROM event_outbox WHERE project_id = $1",
        [p.projectId],
      );
      assert.equal(expected.length, 10);
      const uniqueIds = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
      assert.deepEqual([...uniqueIds].sort(), expected.map((e) => e.event_id).sort());
      assert.ok(receiver.received.length > uniqueIds.size, "some events were delivered more than once");
      assert.ok(receiver.received.every((r) => verifyWebhook(endpoint.secret, r.headers, r.body)));

      // The delivery log shows each failed attempt with its status or error and its next attempt.
      const deliveries = await deliveriesOf(p, endpoint.id);
      assert.equal(deliveries.length, 10);
      assert.ok(deliveries.every((d) => d.status === "succeeded"));
      const attempts = deliveries.flatMap((d) => d.log);
      assert.equal(
        attempts.length,
        deliveries.reduce((n, d) => n + d.attempts, 0),
      );
      assert.ok(attempts.some((a) => a.status_code === 500 && a.next_attempt_at !== null));
      assert.ok(attempts.some((a) => a.status_code === null && /timed out/.test(a.error ?? "")));
      assert.ok(attempts.some((a) => a.status_code === 302));
      assert.ok(attempts.filter((a) => a.status_code === 200).every((a) => a.next_attempt_at === null));
    } finally {
      await receiver.close();
    }
  });

  it("gives up after the last attempt (failed), and redeliver sends the same event id again", async () => {
    const p = await project();
    const receiver = await startReceiver({ status: 500 });
    try {
      const endpoint = await addEndpoint(p, receiver.url, ["deposit.credited"]);
      await creditDeposit(t.db, { projectId: p.projectId, reference: "14601:0xfail:0", amountWei: 1n });
      await deliverAll(p.projectId);
      assert.equal(receiver.received.length, 8, "maxAttempts attempts, then no more");
      const url = `/projects/${p.projectId}/webhooks/${endpoint.id}/deliveries`;
      const failed = await t.request({ method: "GET", url: `${url}?status=failed`, token: p.ownerToken });
      const delivery = (failed.json() as { deliveries: DeliveryJson[] }).deliveries[0]!;
      assert.equal(delivery.status, "failed");
      assert.equal(delivery.attempts, 8);
      assert.equal(delivery.log.at(-1)!.next_attempt_at, null);

      receiver.fallback = { status: 204 };
      const again = await t.request({
        method: "POST",
        url: `${url}/${delivery.id}/redeliver`,
        token: p.ownerToken,
      });
      assert.equal(again.statusCode, 202, again.body);
      await deliverAll(p.projectId);
      assert.equal(receiver.received.length, 9);
      assert.equal(receiver.received[8]!.headers["webhook-id"], delivery.event_id);
      const done = await t.request({ method: "GET", url, token: p.ownerToken });
      assert.equal((done.json() as { deliveries: DeliveryJson[] }).deliveries[0]!.status, "succeeded");
      const missing = await t.request({
        method: "POST",
        url: `${url}/999999/redeliver`,
        token: p.ownerToken,
      });
      assert.equal(missing.statusCode, 404);
    } finally {
      await receiver.close();
    }
  });

  it("writes no event for a project without a subscribed endpoint, and a paused endpoint gets nothing", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      await creditDeposit(t.db, {
        projectId: p.projectId,
        reference: "14601:0xnone:0",
        amountWei: 10n ** 16n,
      });
      assert.equal((await authorizeMint(t, p)).statusCode, 200);
      const count = async () =>
        (
          await t.db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM event_outbox WHERE project_id = $1",
            [p.projectId],
          )
        )[0]!.n;
      assert.equal(await count(), 0);
      const endpoint = await addEndpoint(p, receiver.url, ["sponsorship.sponsored"]);
      const paused = await t.request({
        method: "PATCH",
        url: `/projects/${p.projectId}/webhooks/${endpoint.id}`,
        token: p.ownerToken,
        payload: { enabled: false },
      });
      assert.equal(paused.statusCode, 200);
      assert.equal((paused.json() as { enabled: boolean }).enabled, false);
      assert.equal((await authorizeMint(t, p)).statusCode, 200);
      assert.equal(await count(), 0);
      await worker.drain();
      assert.equal(receiver.received.length, 0);
    } finally {
      await receiver.close();
    }
  });
});

describe("batched deliveries", () => {
  const deposits = async (projectId: string, tag: string, n: number) => {
    for (let i = 0; i < n; i++) {
      await creditDeposit(t.db, { projectId, reference: `14601:0x${tag}:${i}`, amountWei: BigInt(i + 1) });
    }
  };

  it("an endpoint that takes batches gets the events due together in signed requests of up to its number, each event as it comes alone", async () => {
    const p = await project();
    const single = await startReceiver();
    const batched = await startReceiver();
    try {
      await addEndpoint(p, single.url, ["deposit.credited"]);
      const endpoint = await addEndpoint(p, batched.url, ["deposit.credited"], { maxEventsPerRequest: 10 });
      const listed = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/webhooks/${endpoint.id}`,
        token: p.ownerToken,
      });
      assert.equal(listed.json().max_events_per_request, 10);
      await deposits(p.projectId, "batch", 25);
      await deliverAll(p.projectId);

      // 25 events due together: one claim, three requests of 10, 10 and 5, oldest first.
      assert.equal(single.received.length, 25);
      const alone = new Map(bodies(single.received).map((e) => [e.id, e]));
      const batches = batched.received.map((r) => JSON.parse(r.body) as { events: EventJson[] });
      assert.deepEqual(
        batches.map((b) => b.events.length),
        [10, 10, 5],
      );
      const ids = batches.flatMap((b) => b.events.map((e) => e.id));
      assert.equal(new Set(ids).size, 25, "each event once");
      for (const [i, r] of batched.received.entries()) {
        assert.ok(verifyWebhook(endpoint.secret, r.headers, r.body), "the secret alone verifies a batch");
        assert.match(String(r.headers["webhook-id"]), /^batch_[0-9a-f]{32}$/);
        // Each event in a batch is the object the endpoint would have been sent alone.
        for (const e of batches[i]!.events) assert.deepEqual(e, alone.get(e.id));
      }
      assert.equal(new Set(batched.received.map((r) => r.headers["webhook-id"])).size, 3);
      // Oldest first, within and across the requests.
      const amounts = batches.flatMap((b) => b.events.map((e) => Number(e.data.amount)));
      assert.deepEqual(
        amounts,
        Array.from({ length: 25 }, (_, i) => i + 1),
      );
      // Every delivery succeeded in one attempt, logged on its own.
      const log = await deliveriesOf(p, endpoint.id);
      assert.equal(log.length, 25);
      assert.ok(log.every((d) => d.status === "succeeded" && d.attempts === 1 && d.log.length === 1));
      assert.ok(log.every((d) => d.log[0]!.status_code === 200));
    } finally {
      await single.close();
      await batched.close();
    }
  });

  it("a batch that fails is one failed attempt of each event in it, each retried on its own until it arrives", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      const endpoint = await addEndpoint(p, receiver.url, ["deposit.credited"], { maxEventsPerRequest: 100 });
      receiver.script.push({ status: 500 }, { hold: true });
      await deposits(p.projectId, "batchfail", 6);
      await deliverAll(p.projectId);
      receiver.releaseHeld(200);
      const requests = receiver.received.map((r) => JSON.parse(r.body) as { events: EventJson[] });
      assert.equal(requests[0]!.events.length, 6, "the six due together went in one request");
      assert.ok(receiver.received.every((r) => verifyWebhook(endpoint.secret, r.headers, r.body)));
      const arrived = new Set(requests.slice(2).flatMap((b) => b.events.map((e) => e.id)));
      assert.equal(arrived.size, 6, "after the 500 and the timeout, every event arrived");
      // Each event's log: the 500, the timeout if it was in the held request (the retries fell due
      // at different moments, so not every event was), then the 200.
      const held = new Set(requests[1]!.events.map((e) => e.id));
      assert.ok(held.size > 0);
      const log = await deliveriesOf(p, endpoint.id);
      assert.equal(log.length, 6);
      for (const d of log) {
        assert.equal(d.status, "succeeded");
        const codes = held.has(d.event_id) ? [500, null, 200] : [500, 200];
        assert.deepEqual(
          d.log.map((a) => a.status_code),
          codes,
        );
        assert.equal(d.attempts, codes.length);
        if (held.has(d.event_id)) assert.match(d.log[1]!.error ?? "", /timed out/);
        assert.equal(d.log.at(-1)!.next_attempt_at, null);
      }
    } finally {
      await receiver.close();
    }
  });

  it("the number per request is validated, changed by PATCH, and 1 goes back to one event per request", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      for (const bad of [0, 101, 2.5, "10", null]) {
        const res = await t.request({
          method: "POST",
          url: `/projects/${p.projectId}/webhooks`,
          token: p.ownerToken,
          payload: { url: receiver.url, eventTypes: ["*"], maxEventsPerRequest: bad },
        });
        assert.equal(res.statusCode, 400, `${JSON.stringify(bad)}: ${res.body}`);
        assert.match(String(res.headers["content-type"]), /application\/problem\+json/);
      }
      const endpoint = await addEndpoint(p, receiver.url, ["deposit.credited"], { maxEventsPerRequest: 50 });
      const patch = (body: Record<string, unknown>) =>
        t.request({
          method: "PATCH",
          url: `/projects/${p.projectId}/webhooks/${endpoint.id}`,
          token: p.ownerToken,
          payload: body,
        });
      assert.equal((await patch({ maxEventsPerRequest: 101 })).statusCode, 400);
      const one = await patch({ maxEventsPerRequest: 1 });
      assert.equal(one.statusCode, 200, one.body);
      assert.equal(one.json().max_events_per_request, 1);
      await deposits(p.projectId, "one", 3);
      await deliverAll(p.projectId);
      assert.equal(receiver.received.length, 3);
      for (const r of receiver.received) {
        const event = JSON.parse(r.body) as EventJson;
        assert.equal(r.headers["webhook-id"], event.id);
        assert.equal(event.type, "deposit.credited");
      }
    } finally {
      await receiver.close();
    }
  });
});

describe("recording attempts", () => {
  it("attempts that end together are recorded in one statement, each delivery with its own outcome", async () => {
    const p = await project();
    const receiver = await startReceiver({ hold: true });
    // Counts the statements that record attempts, on the same database (a view of t.db, not a stand-in).
    let records = 0;
    const counted = Object.create(t.db) as typeof t.db;
    counted.query = (sql, params) => {
      if (sql.includes("INSERT INTO webhook_attempts")) records++;
      return t.db.query(sql, params);
    };
    const own = webhookWorker(counted, {
      // The refused ones are retried a minute later: after this test.
      retry: { baseDelayMs: 60_000, maxDelayMs: 60_000, maxAttempts: 8 },
      timeoutMs: 5000,
      pollIntervalMs: 50,
      caps: { perEndpoint: 8, perProject: 8 },
      keyring: t.services.keyring,
    });
    try {
      await addEndpoint(p, receiver.url, ["deposit.credited"]);
      for (let i = 0; i < 8; i++) {
        await creditDeposit(t.db, {
          projectId: p.projectId,
          reference: `14601:0xbatch${i}:0`,
          amountWei: 1n,
        });
      }
      const drained = own.drain();
      await receiver.waitFor(8);
      // Half are accepted and half refused, all answered at once.
      const held = receiver.held.splice(0);
      for (const [i, res] of held.entries()) res.writeHead(i % 2 === 0 ? 200 : 500).end("{}");
      await drained;
      const rows = await t.db.query<{ status: string; attempts: number; logged: number; code: number }>(
        `SELECT d.status, d.attempts, d.last_status_code AS code,
           (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS logged
         FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id WHERE e.project_id = $1`,
        [p.projectId],
      );
      assert.equal(rows.length, 8);
      assert.deepEqual(rows.map((r) => `${r.code} ${r.status} ${r.attempts} ${r.logged}`).sort(), [
        ...Array(4).fill("200 succeeded 1 1"),
        ...Array(4).fill("500 pending 1 1"),
      ]);
      assert.ok(records < 8, `8 attempts recorded in ${records} statements`);
    } finally {
      receiver.releaseHeld(200);
      await own.stop();
      await receiver.close();
    }
  });
});

describe("webhook management", () => {
  it("validates URLs and event types, bounds the endpoints, and lets only admins change them", async () => {
    const p = await project();
    const post = (payload: Record<string, unknown>, token = p.ownerToken) =>
      t.request({ method: "POST", url: `/projects/${p.projectId}/webhooks`, token, payload });
    for (const url of [
      "ftp://example.com/x",
      "http://user:pw@example.com/",
      "not a url",
      "https://example.com/#frag",
    ]) {
      const res = await post({ url, eventTypes: ["*"] });
      assert.equal(res.statusCode, 400, url);
      assert.equal((res.json() as { code: string }).code, "invalid_request");
    }
    assert.equal((await post({ url: "https://example.com/", eventTypes: ["nope"] })).statusCode, 400);
    assert.equal((await post({ url: "https://example.com/", eventTypes: [] })).statusCode, 400);
    assert.equal(
      (await post({ url: "https://example.com/", eventTypes: ["*"], secret: "x" })).statusCode,
      400,
    );
    const byKey = await post({ url: "https://example.com/", eventTypes: ["*"] }, p.apiKey);
    assert.equal(byKey.statusCode, 403);

    const viewerEmail = `viewer-${randomBytes(3).toString("hex")}@example.com`;
    const member = await t.request({
      method: "POST",
      url: `/orgs/${p.orgId}/members`,
      token: p.ownerToken,
      payload: { email: viewerEmail, role: "viewer" },
    });
    assert.ok(member.statusCode === 200 || member.statusCode === 201, member.body);
    const viewer = await t.token(viewerEmail);
    assert.equal((await post({ url: "https://example.com/", eventTypes: ["*"] }, viewer)).statusCode, 403);

    for (let i = 0; i < 10; i++) {
      const res = await post({ url: `https://example.com/${i}`, eventTypes: ["balance.low"] });
      assert.equal(res.statusCode, 201);
      t.secrets.add((res.json() as { secret: string }).secret);
    }
    const full = await post({ url: "https://example.com/11", eventTypes: ["*"] });
    assert.equal(full.statusCode, 409);
    assert.equal((full.json() as { code: string }).code, "webhooks_full");
    const list = await t.request({ method: "GET", url: `/projects/${p.projectId}/webhooks`, token: viewer });
    assert.equal(list.statusCode, 200);
    const endpoints = list.json() as { id: number }[];
    assert.equal(endpoints.length, 10);
    const del = await t.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/webhooks/${endpoints[0]!.id}`,
      token: p.ownerToken,
    });
    assert.equal(del.statusCode, 200);
    const gone = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/webhooks/${endpoints[0]!.id}`,
      token: p.ownerToken,
    });
    assert.equal(gone.statusCode, 404);
  });
});

describe("approval webhook", () => {
  async function withApproval(
    receiver: Receiver,
    settings: { failMode: "open" | "closed"; timeoutMs?: number },
  ) {
    const p = await project();
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `14601:0xapr:${p.projectId}`,
      amountWei: 10n ** 17n,
    });
    const read = async () => {
      const got = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/approval-webhook`,
        token: p.ownerToken,
      });
      assert.equal(got.statusCode, 200, got.body);
      return got.json() as Record<string, unknown>;
    };
    assert.deepEqual(await read(), { configured: false });
    const res = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/approval-webhook`,
      token: p.ownerToken,
      payload: { url: receiver.url, timeoutMs: settings.timeoutMs ?? 200, failMode: settings.failMode },
    });
    assert.equal(res.statusCode, 200, res.body);
    const secret = (res.json() as { secret: string }).secret;
    assert.match(secret, /^whsec_/);
    t.secrets.add(secret);
    assert.deepEqual(await read(), {
      configured: true,
      url: receiver.url,
      timeoutMs: settings.timeoutMs ?? 200,
      failMode: settings.failMode,
    });
    return { ...p, secret };
  }

  async function tank(projectId: string) {
    const [row] = await t.db.query<{ balance: string; n: number }>(
      `SELECT gas_tank_balance::text AS balance, (SELECT count(*)::int FROM sponsorships WHERE project_id = $1) AS n
       FROM projects WHERE id = $1`,
      [projectId],
    );
    return row!;
  }

  it("asks the receiver with a signed description of the operation; approve sponsors, deny refuses and reserves nothing", async () => {
    const receiver = await startReceiver({ status: 200, body: '{"approve": true}' });
    try {
      const p = await withApproval(receiver, { failMode: "closed" });
      assert.equal((await authorizeMint(t, p)).statusCode, 200);
      const [asked] = receiver.received;
      assert.ok(verifyWebhook(p.secret, asked!.headers, asked!.body));
      const request = JSON.parse(asked!.body);
      assert.equal(request.type, "sponsorship.approval");
      assert.equal(request.projectId, p.projectId);
      assert.deepEqual(request.data.calls, [{ target: TARGET, selector: SELECTOR }]);
      assert.equal(request.data.chainId, 14601);
      assert.match(request.data.maxGasCost, /^[1-9][0-9]*$/);

      receiver.fallback = { status: 200, body: '{"approve": false, "reason": "player is banned"}' };
      const before = await tank(p.projectId);
      const denied = await authorizeMint(t, p);
      assert.equal(denied.statusCode, 403);
      const problem = denied.json() as { code: string; detail: string };
      assert.equal(problem.code, "approval_denied");
      assert.match(problem.detail, /player is banned/);
      assert.deepEqual(await tank(p.projectId), before, "nothing reserved");

      // The settings are shown without the secret.
      const shown = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/approval-webhook`,
        token: p.ownerToken,
      });
      assert.deepEqual(shown.json(), {
        configured: true,
        url: receiver.url,
        timeoutMs: 200,
        failMode: "closed",
      });
    } finally {
      await receiver.close();
    }
  });

  it("a receiver that never answers: fail-open sponsors and fail-closed refuses, before the receiver answers", async () => {
    const receiver = await startReceiver({ hold: true });
    try {
      const open = await withApproval(receiver, { failMode: "open" });
      const granted = await authorizeMint(t, open);
      assert.equal(granted.statusCode, 200, granted.body);
      const closed = await withApproval(receiver, { failMode: "closed" });
      const before = await tank(closed.projectId);
      const refused = await authorizeMint(t, closed);
      assert.equal(refused.statusCode, 503, refused.body);
      assert.equal((refused.json() as { code: string }).code, "approval_unavailable");
      assert.deepEqual(await tank(closed.projectId), before);
      // Both answers came while the receiver still held both requests: the timeout decided.
      assert.equal(receiver.held.length, 2);
      assert.ok(receiver.held.every((res) => !res.writableEnded));
    } finally {
      await receiver.close();
    }
  });

  it("errors and garbage answers follow the fail mode too", async () => {
    const receiver = await startReceiver({ status: 500 });
    try {
      const closed = await withApproval(receiver, { failMode: "closed" });
      const open = await withApproval(receiver, { failMode: "open" });
      for (const answer of [
        { status: 500 },
        { status: 200, body: "not json" },
        { status: 200, body: '{"ok":1}' },
        // An approval past the 16 KiB an answer may have is not read: no answer.
        { status: 200, body: `{"approve":true,"pad":"${"x".repeat(20_000)}"}` },
      ]) {
        receiver.fallback = answer;
        const c = await authorizeMint(t, closed);
        assert.equal(c.statusCode, 503, JSON.stringify(answer));
        assert.equal((c.json() as { code: string }).code, "approval_unavailable");
        assert.equal((await authorizeMint(t, open)).statusCode, 200, JSON.stringify(answer));
      }
      // Removing the webhook stops the questions at once on this instance.
      const removed = await t.request({
        method: "DELETE",
        url: `/projects/${closed.projectId}/approval-webhook`,
        token: closed.ownerToken,
      });
      assert.equal(removed.statusCode, 200);
      const asked = receiver.received.length;
      assert.equal((await authorizeMint(t, closed)).statusCode, 200);
      assert.equal(receiver.received.length, asked);
    } finally {
      await receiver.close();
    }
  });

  it("pm_getPaymasterData asks too, and a denial carries the code in the JSON-RPC error data", async () => {
    const receiver = await startReceiver({ status: 200, body: '{"approve": false, "reason": "quota"}' });
    try {
      const p = await withApproval(receiver, { failMode: "closed" });
      const { encodeFunctionData, numberToHex, parseAbi } = await import("viem");
      const mint = encodeFunctionData({
        abi: parseAbi(["function mint(uint256 itemId)"]),
        functionName: "mint",
        args: [7n],
      });
      const callData = encodeFunctionData({
        abi: parseAbi(["function execute(address dest, uint256 value, bytes func)"]),
        functionName: "execute",
        args: [TARGET, 0n, mint],
      });
      const op = {
        sender: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
        nonce: "0x0",
        callData,
        callGasLimit: numberToHex(80_000),
        verificationGasLimit: numberToHex(60_000),
        preVerificationGas: numberToHex(50_000),
        maxFeePerGas: numberToHex(2_000_000_000),
        maxPriorityFeePerGas: numberToHex(1_000_000_000),
        signature: "0x",
      };
      const res = await t.app.inject({
        method: "POST",
        url: "/rpc",
        headers: { "content-type": "application/json", authorization: `Bearer ${p.apiKey}` },
        payload: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "pm_getPaymasterData",
          params: [op, "0x0000000071727De22E5E9d8BAf0edAc6f37da032", "0x3909", {}],
        }),
      });
      const body = res.json() as { error: { data: { code: string }; message: string } };
      assert.equal(body.error.data.code, "approval_denied", res.body);
      assert.match(body.error.message, /quota/);
      const request = JSON.parse(receiver.received[0]!.body);
      assert.equal(request.data.mode, "operation");
      assert.equal((await tank(p.projectId)).n, 0);
    } finally {
      await receiver.close();
    }
  });
});
