import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { AggregatorRegistry } from "prom-client";
import { creditDeposit } from "../src/ledger/ledger.ts";
import {
  APPROVAL_CALL_RESULTS,
  createMetrics,
  PENDING_SAMPLE_MAX_AGE_MS,
  WEBHOOK_ATTEMPT_OUTCOMES,
} from "../src/metrics/metrics.ts";
import { webhookSender } from "../src/webhooks/egress.ts";
import { type WebhookWorker, webhookWorker } from "../src/webhooks/worker.ts";
import { authorizeMint, seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { parseExposition, type Sample } from "./support/prometheus.ts";
import { addWebhookEndpoint, type Receiver, startReceiver } from "./support/receiver.ts";

/**
 * The webhook metrics on /metrics: delivery attempts by outcome and their durations, deliveries
 * given up on, the pending backlog (read from the store at most every 10 s), and approval
 * webhook calls by result. Real deliveries go to a node:http receiver on this machine through
 * the service's own worker (driven pass by pass), and every figure is checked as the difference
 * between two scrapes, so the tests do not depend on each other's traffic. Nothing that
 * identifies a receiver (URL, secret, project) may appear in the exposition.
 */

const TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const SELECTOR = "0xa0712d68";
// A second: a receiver's immediate answer must never time out on a loaded machine (at 300 ms one
// did, under a load average of 6, and the scripted answers then went to the wrong attempts).
const TIMEOUT_MS = 1000;
const MAX_ATTEMPTS = 3;

let t: TestApp;
/** The service's clock: the machine's, this far ahead; or stopped at `frozenAt` (pending sample tests). */
let skewMs = 0;
let frozenAt: number | null = null;
let worker: WebhookWorker;
/** The same worker, sending the way WEBHOOK_PRIVATE_TARGETS=refuse does (127.0.0.1 is refused). */
let refusing: WebhookWorker;
/** Strings that must never reach /metrics: URLs, secrets, project ids. */
const unspeakable = new Set<string>();

before(async () => {
  t = await startTestApp({ now: () => frozenAt ?? Date.now() + skewMs });
  const options = {
    retry: { baseDelayMs: 20, maxDelayMs: 80, maxAttempts: MAX_ATTEMPTS },
    timeoutMs: TIMEOUT_MS,
    pollIntervalMs: 50,
    metrics: t.services.metrics,
    keyring: t.services.keyring,
  };
  worker = webhookWorker(t.db, options);
  refusing = webhookWorker(t.db, { ...options, send: webhookSender("refuse") });
});
after(async () => {
  await worker.stop();
  await refusing.stop();
  await t.close();
});

interface Scrape {
  text: string;
  samples: Sample[];
  types: Map<string, string>;
  /** The sample with exactly these labels, or undefined. */
  value(name: string, labels?: Record<string, string>): number | undefined;
}

async function scrape(): Promise<Scrape> {
  const res = await t.request({ method: "GET", url: "/metrics" });
  assert.equal(res.statusCode, 200);
  return parse(res.body);
}

function parse(text: string): Scrape {
  const { samples, types } = parseExposition(text);
  const value = (name: string, labels: Record<string, string> = {}) =>
    samples.find(
      (s) =>
        s.name === name &&
        Object.keys(s.labels).length === Object.keys(labels).length &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )?.value;
  return { text, samples, types, value };
}

/** What moved between two scrapes, for a sample that both have. */
function moved(before: Scrape, after: Scrape, name: string, labels: Record<string, string> = {}): number {
  const a = before.value(name, labels);
  const b = after.value(name, labels);
  assert.notEqual(a, undefined, `${name} ${JSON.stringify(labels)} before`);
  assert.notEqual(b, undefined, `${name} ${JSON.stringify(labels)} after`);
  return b! - a!;
}

/** Attempts by outcome between two scrapes, every outcome listed (0 when it did not move). */
function attemptsMoved(before: Scrape, after: Scrape): Record<string, number> {
  return Object.fromEntries(
    WEBHOOK_ATTEMPT_OUTCOMES.map((outcome) => [
      outcome,
      moved(before, after, "gss_webhook_delivery_attempts_total", { outcome }),
    ]),
  );
}

const noAttempts = Object.fromEntries(WEBHOOK_ATTEMPT_OUTCOMES.map((o) => [o, 0]));

function assertNothingIdentifying(s: Scrape) {
  for (const secret of [...unspeakable, ...t.secrets]) {
    assert.ok(!s.text.includes(secret), `/metrics shows ${secret.slice(0, 12)}…`);
  }
  // No label anywhere in the webhook families but the fixed ones.
  for (const sample of s.samples.filter((x) => /^gss_(webhook|approval)_/.test(x.name))) {
    for (const key of Object.keys(sample.labels)) {
      assert.ok(["outcome", "result", "le"].includes(key), `${sample.name} has a label ${key}`);
    }
  }
}

async function project() {
  const p = await seedProject(t, { slug: `whm-${randomBytes(3).toString("hex")}` });
  unspeakable.add(p.projectId);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: TARGET, functionSelector: SELECTOR },
  });
  assert.equal(allow.statusCode, 201, allow.body);
  return p;
}

async function addEndpoint(p: { projectId: string; ownerToken: string }, url: string) {
  const body = await addWebhookEndpoint(t, p, url, ["deposit.credited"]);
  unspeakable.add(url);
  unspeakable.add(new URL(url).host);
  return body;
}

let references = 0;
/** A deposit, hence one deposit.credited event for each subscribed endpoint. */
async function event(projectId: string) {
  await creditDeposit(t.db, { projectId, reference: `14601:0xwhm:${references++}`, amountWei: 10n ** 16n });
}

async function pendingCount(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'",
  );
  return row!.n;
}

/** Runs a worker until no delivery is pending (bounded by passes, not by time). */
async function deliverAll(w: WebhookWorker = worker) {
  for (let pass = 0; pass < 500; pass++) {
    await w.drain();
    if ((await pendingCount()) === 0) return;
    await sleep(20);
  }
  assert.fail("deliveries still pending after 500 passes");
}

/** A local port with nothing listening on it: connections are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return typeof address === "object" && address ? address.port : 0;
}

describe("webhook delivery metrics", () => {
  it("the families exist from the first scrape, with every outcome at a fixed label set", async () => {
    const s = await scrape();
    const families: [string, string][] = [
      ["gss_webhook_delivery_attempts_total", "counter"],
      ["gss_webhook_delivery_attempt_duration_seconds", "histogram"],
      ["gss_webhook_deliveries_failed_total", "counter"],
      ["gss_webhook_deliveries_pending", "gauge"],
      ["gss_approval_webhook_calls_total", "counter"],
      ["gss_approval_webhook_duration_seconds", "histogram"],
    ];
    for (const [name, type] of families) assert.equal(s.types.get(name), type, name);
    const labelValues = (name: string, label: string) =>
      s.samples
        .filter((x) => x.name === name)
        .map((x) => x.labels[label])
        .sort();
    assert.deepEqual(
      labelValues("gss_webhook_delivery_attempts_total", "outcome"),
      [...WEBHOOK_ATTEMPT_OUTCOMES].sort(),
    );
    assert.deepEqual(
      labelValues("gss_approval_webhook_calls_total", "result"),
      [...APPROVAL_CALL_RESULTS].sort(),
    );
    assert.equal(s.value("gss_webhook_deliveries_failed_total"), 0);
    assert.equal(s.value("gss_webhook_delivery_attempt_duration_seconds_count"), 0);
  });

  it("a receiver answering 200, then 500, then hanging past the timeout: each attempt counted once, by outcome", async () => {
    const p = await project();
    const receiver = await startReceiver({ status: 500 });
    try {
      await addEndpoint(p, receiver.url);
      const start = await scrape();

      // One event answered 200 at once.
      receiver.script.push({ status: 200 });
      await event(p.projectId);
      await deliverAll();
      const first = await scrape();
      assert.deepEqual(attemptsMoved(start, first), { ...noAttempts, delivered: 1 });
      assert.equal(moved(start, first, "gss_webhook_delivery_attempt_duration_seconds_count"), 1);
      assert.equal(moved(start, first, "gss_webhook_deliveries_failed_total"), 0);

      // Another: 500, then held past the timeout, then 500 again (the fallback): its last attempt.
      receiver.script.push({ status: 500 }, { hold: true });
      await event(p.projectId);
      await deliverAll();
      assert.equal(receiver.received.length, 1 + MAX_ATTEMPTS);
      const second = await scrape();
      assert.deepEqual(attemptsMoved(first, second), { ...noAttempts, http_error: 2, timeout: 1 });
      assert.equal(moved(first, second, "gss_webhook_deliveries_failed_total"), 1);
      const histogram = "gss_webhook_delivery_attempt_duration_seconds";
      assert.equal(moved(first, second, `${histogram}_count`), 3);
      assert.equal(moved(first, second, `${histogram}_bucket`, { le: "+Inf" }), 3);
      // The timed-out attempt lasted the timeout at least; the answered ones, less.
      assert.ok(moved(first, second, `${histogram}_sum`) >= TIMEOUT_MS / 1000);
      assert.equal(moved(first, second, `${histogram}_bucket`, { le: "0.25" }), 2);

      // What the delivery log says agrees with the counters.
      const [log] = await t.db.query<{ attempts: number; status: string }>(
        `SELECT d.attempts, d.status FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id
         WHERE e.project_id = $1 ORDER BY d.id DESC LIMIT 1`,
        [p.projectId],
      );
      assert.deepEqual(log, { attempts: MAX_ATTEMPTS, status: "failed" });
      assertNothingIdentifying(second);
    } finally {
      await receiver.close();
    }
  });

  it("refused connections count as network_error, private targets under `refuse` as refused_private_target", async () => {
    const p = await project();
    const port = await closedPort();
    await addEndpoint(p, `http://127.0.0.1:${port}/hook?token=${randomBytes(8).toString("hex")}`);
    const start = await scrape();
    await event(p.projectId);
    await deliverAll();
    const refused = await scrape();
    assert.deepEqual(attemptsMoved(start, refused), { ...noAttempts, network_error: MAX_ATTEMPTS });
    assert.equal(moved(start, refused, "gss_webhook_deliveries_failed_total"), 1);
    assert.equal(moved(start, refused, "gss_webhook_delivery_attempt_duration_seconds_count"), MAX_ATTEMPTS);

    const q = await project();
    const receiver = await startReceiver();
    try {
      await addEndpoint(q, receiver.url);
      await event(q.projectId);
      await deliverAll(refusing);
      assert.equal(receiver.received.length, 0, "nothing reached the private address");
      const guarded = await scrape();
      assert.deepEqual(attemptsMoved(refused, guarded), {
        ...noAttempts,
        refused_private_target: MAX_ATTEMPTS,
      });
      assert.equal(moved(refused, guarded, "gss_webhook_deliveries_failed_total"), 1);
      assertNothingIdentifying(guarded);
    } finally {
      await receiver.close();
    }
  });

  it("the pending gauge counts waiting deliveries, read from the store at most once per 10 s", async () => {
    const p = await project();
    const receiver = await startReceiver();
    try {
      await addEndpoint(p, receiver.url);
      for (let i = 0; i < 4; i++) await event(p.projectId);
      assert.equal(await pendingCount(), 4);
      // The service's clock stops 10 s past now: whatever earlier scrapes read is due again, and
      // no more than one read can start until the test moves the clock.
      frozenAt = Date.now() + skewMs + PENDING_SAMPLE_MAX_AGE_MS;
      /**
       * The gauge as scrapes show it, once it is `expected`. A read slower than a scrape's
       * patience lands for a later scrape, and until then the previous value shows; with the
       * clock stopped no other read starts, so a value that never comes is a wrong one.
       */
      const pendingIs = async (expected: number) => {
        let seen: number | undefined;
        for (let i = 0; i < 50; i++) {
          seen = (await scrape()).value("gss_webhook_deliveries_pending");
          if (seen === expected) return;
          await sleep(100);
        }
        assert.fail(`the pending gauge shows ${seen}, not ${expected}`);
      };
      await pendingIs(4);

      await deliverAll();
      assert.equal(receiver.received.length, 4);
      assert.equal(await pendingCount(), 0);
      // Within 10 s of the last read, scrapes show its value rather than asking the store again.
      await pendingIs(4);
      frozenAt += PENDING_SAMPLE_MAX_AGE_MS - 1;
      await pendingIs(4);
      frozenAt += 1;
      await pendingIs(0);
      assertNothingIdentifying(await scrape());
    } finally {
      // The clock goes on from where it stopped, never back.
      if (frozenAt !== null) skewMs = frozenAt - Date.now();
      frozenAt = null;
      await receiver.close();
    }
  });
});

describe("approval webhook metrics", () => {
  async function withApproval(receiver: Receiver) {
    const p = await project();
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `14601:0xwhm-apr:${p.projectId}`,
      amountWei: 10n ** 17n,
    });
    const res = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/approval-webhook`,
      token: p.ownerToken,
      payload: { url: receiver.url, timeoutMs: 200, failMode: "closed" },
    });
    assert.equal(res.statusCode, 200, res.body);
    t.secrets.add((res.json() as { secret: string }).secret);
    unspeakable.add(receiver.url);
    unspeakable.add(new URL(receiver.url).host);
    return p;
  }

  const authorize = (p: { projectId: string; apiKey: string }) => authorizeMint(t, p);

  const resultsMoved = (a: Scrape, b: Scrape) =>
    Object.fromEntries(
      APPROVAL_CALL_RESULTS.map((result) => [
        result,
        moved(a, b, "gss_approval_webhook_calls_total", { result }),
      ]),
    );

  it("approve, deny, no answer in time and an error answer: one call each, each timed", async () => {
    const receiver = await startReceiver({ status: 200, body: '{"approve": true}' });
    try {
      const p = await withApproval(receiver);
      const start = await scrape();

      assert.equal((await authorize(p)).statusCode, 200);
      receiver.fallback = { status: 200, body: '{"approve": false, "reason": "not today"}' };
      const denied = await authorize(p);
      assert.equal(denied.statusCode, 403);
      assert.equal((denied.json() as { code: string }).code, "approval_denied");
      const decided = await scrape();
      assert.deepEqual(resultsMoved(start, decided), { approved: 1, denied: 1, timeout: 0, error: 0 });
      assert.equal(moved(start, decided, "gss_approval_webhook_duration_seconds_count"), 2);

      receiver.fallback = { hold: true };
      const late = await authorize(p);
      assert.equal((late.json() as { code: string }).code, "approval_unavailable");
      receiver.fallback = { status: 500 };
      const broken = await authorize(p);
      assert.equal((broken.json() as { code: string }).code, "approval_unavailable");
      const failed = await scrape();
      assert.deepEqual(resultsMoved(decided, failed), { approved: 0, denied: 0, timeout: 1, error: 1 });
      assert.equal(moved(decided, failed, "gss_approval_webhook_duration_seconds_count"), 2);
      assert.ok(moved(decided, failed, "gss_approval_webhook_duration_seconds_sum") >= 0.2);
      assert.equal(receiver.received.length, 4);

      // A project without an approval webhook calls nothing, so counts nothing.
      const plain = await project();
      await creditDeposit(t.db, {
        projectId: plain.projectId,
        reference: `14601:0xwhm-plain:${plain.projectId}`,
        amountWei: 10n ** 17n,
      });
      assert.equal((await authorize(plain)).statusCode, 200);
      const quiet = await scrape();
      assert.deepEqual(resultsMoved(failed, quiet), { approved: 0, denied: 0, timeout: 0, error: 0 });
      // Delivery attempts did not move either: the approval webhook is not a delivery.
      assert.deepEqual(attemptsMoved(start, quiet), noAttempts);
      assertNothingIdentifying(quiet);
    } finally {
      await receiver.close();
    }
  });
});

describe("the pending sample and cluster mode", () => {
  it("a read that hangs does not hold a scrape, and concurrent or close scrapes share one read", async () => {
    let clock = 1_000_000;
    let reads = 0;
    let answer: (n: number) => void = () => {};
    const metrics = createMetrics({ version: "t", clusterWorker: false });
    metrics.pendingDeliveriesFrom(
      () =>
        new Promise<number>((resolve) => {
          reads++;
          answer = resolve;
        }),
      () => clock,
    );
    // The read is answered only below: had a scrape waited for it, these would never resolve.
    const texts = await Promise.all([metrics.exposition(), metrics.exposition(), metrics.exposition()]);
    assert.equal(reads, 1);
    for (const text of texts) assert.doesNotMatch(text, /^gss_webhook_deliveries_pending /m);
    answer(7);
    await sleep(0);
    assert.match(await metrics.exposition(), /^gss_webhook_deliveries_pending 7$/m);
    clock += PENDING_SAMPLE_MAX_AGE_MS - 1;
    await metrics.exposition();
    assert.equal(reads, 1);
    clock += 1;
    const again = metrics.exposition();
    for (let i = 0; i < 2_000 && reads < 2; i++) await sleep(1);
    answer(3);
    assert.match(await again, /^gss_webhook_deliveries_pending 3$/m);
    assert.equal(reads, 2);
  });

  it("a failed read leaves no sample rather than a stale one", async () => {
    let clock = 0;
    let fail = false;
    const metrics = createMetrics({ version: "t", clusterWorker: false });
    metrics.pendingDeliveriesFrom(
      async () => {
        if (fail) throw new Error("database away");
        return 5;
      },
      () => clock,
    );
    assert.match(await metrics.exposition(), /^gss_webhook_deliveries_pending 5$/m);
    fail = true;
    clock += PENDING_SAMPLE_MAX_AGE_MS;
    assert.doesNotMatch(await metrics.exposition(), /^gss_webhook_deliveries_pending /m);
  });

  it("the primary adds up the workers' counters and histograms, and takes the pending figure once (max)", async () => {
    const workers = [0, 1].map(() => {
      const m = createMetrics({ version: "t", clusterWorker: false });
      m.pendingDeliveriesFrom(async () => 9);
      return m;
    });
    workers[0]!.webhookAttempt("delivered", 0.01);
    workers[0]!.webhookAttempt("timeout", 1);
    workers[1]!.webhookAttempt("delivered", 0.02);
    workers[1]!.webhookGaveUp();
    workers[1]!.approvalCall("denied", 0.05);
    const registry = AggregatorRegistry.aggregate(
      (await Promise.all(workers.map((w) => w.snapshot()))) as never[],
    );
    const s = parse(await registry.metrics());
    assert.equal(s.value("gss_webhook_deliveries_pending"), 9);
    assert.equal(s.value("gss_webhook_delivery_attempts_total", { outcome: "delivered" }), 2);
    assert.equal(s.value("gss_webhook_delivery_attempts_total", { outcome: "timeout" }), 1);
    assert.equal(s.value("gss_webhook_delivery_attempt_duration_seconds_count"), 3);
    assert.equal(s.value("gss_webhook_deliveries_failed_total"), 1);
    assert.equal(s.value("gss_approval_webhook_calls_total", { result: "denied" }), 1);
    assert.equal(s.value("gss_approval_webhook_duration_seconds_count"), 1);
  });
});
