/**
 * Webhooks never reach the service's own network under WEBHOOK_PRIVATE_TARGETS=refuse (the
 * production default): non-public IP literals and localhost are refused when saved (400, nothing
 * stored), and the worker's connections are checked after DNS resolution, so a URL saved earlier
 * (or a name that resolves to a private address) gets no request; its delivery log says why.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../src/config.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { type DeadlineSignal, deadline } from "../src/webhooks/deadline.ts";
import { guardedLookup, isPublicAddress, refusedTarget, webhookSender } from "../src/webhooks/egress.ts";
import { type WebhookWorker, webhookWorker } from "../src/webhooks/worker.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { type Receiver, startReceiver } from "./support/receiver.ts";

describe("which addresses are public", () => {
  it("refuses loopback, private, link-local, shared, reserved and IPv4-mapped private addresses", () => {
    const notPublic = [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "64:ff9b::a00:1",
      // IPv4-compatible (::/96) and IPv4-mapped (::ffff:0:0/96) in every spelling.
      "::127.0.0.1",
      "::7f00:1",
      "::8.8.8.8",
      "0:0:0:0:0:ffff:7f00:1",
      "0:0:0:0:0:FFFF:10.0.0.1",
      "::ffff:a9fe:a9fe",
      // IPv4-translated, NAT64 (even of a public address), 6to4, Teredo, documentation.
      "::ffff:0:7f00:1",
      "64:ff9b::8.8.8.8",
      "64:ff9b:1::1",
      "2002:7f00:1::1",
      "2002:808:808::1",
      "2001:0:4136:e378:8000:63bf:3fff:fdd2",
      "2001:db8::1",
      "3fff::1",
      "not an address",
    ];
    for (const a of notPublic) assert.equal(isPublicAddress(a), false, a);
    const publicOnes = ["1.1.1.1", "8.8.8.8", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"];
    for (const a of [...publicOnes, "0:0:0:0:0:ffff:808:808", "2a00:1450:4001:82a::200e"]) {
      assert.equal(isPublicAddress(a), true, a);
    }
  });

  it("judges URLs by their host when saved; names are judged when connecting", () => {
    const refused = (u: string) => refusedTarget(new URL(u), "refuse");
    for (const u of [
      "http://127.0.0.1:8080/hook",
      "http://localhost/hook",
      "http://LOCALHOST./hook",
      "http://api.localhost/hook",
      "http://[::1]/hook",
      "http://[::ffff:127.0.0.1]/hook",
      "http://169.254.169.254/latest/meta-data",
      "http://2130706433/",
      "http://0x7f.1/",
    ]) {
      assert.ok(refused(u), u);
    }
    assert.equal(refused("https://hooks.example.com/x"), null);
    assert.equal(refused("https://8.8.8.8/x"), null);
    assert.equal(refusedTarget(new URL("http://127.0.0.1/"), "allow"), null);
  });

  it("the connection's lookup refuses a name that resolves to a loopback address", async () => {
    const err = await new Promise<Error | null>((resolve) =>
      guardedLookup()("localhost", {}, (e) => resolve(e as Error | null)),
    );
    assert.equal(err?.name, "PrivateTargetRefused");
  });

  it("is `refuse` by default in production and `allow` elsewhere", () => {
    assert.equal(loadConfig({}).webhookPrivateTargets, "allow");
    assert.equal(loadConfig({ WEBHOOK_PRIVATE_TARGETS: "refuse" }).webhookPrivateTargets, "refuse");
    const production = loadConfig({ NODE_ENV: "production", ALLOW_INSECURE_DEFAULTS: "true" });
    assert.equal(production.webhookPrivateTargets, "refuse");
  });
});

describe("WEBHOOK_PRIVATE_TARGETS=refuse", () => {
  let store: TestDb;
  let strict: TestApp;
  let lax: TestApp;
  let receiver: Receiver;
  let worker: WebhookWorker;

  before(async () => {
    store = await openTestDb();
    strict = await startTestApp({ db: store, env: { WEBHOOK_PRIVATE_TARGETS: "refuse" } });
    lax = await startTestApp({ db: store, env: { WEBHOOK_PRIVATE_TARGETS: "allow" } });
    receiver = await startReceiver();
    worker = webhookWorker(store.db, {
      retry: { baseDelayMs: 10, maxDelayMs: 10, maxAttempts: 1 },
      timeoutMs: 1_000,
      pollIntervalMs: 50,
      send: webhookSender("refuse"),
      keyring: strict.services.keyring,
    });
  });
  after(async () => {
    await worker.stop();
    await receiver.close();
    await strict.close();
    await lax.close();
    await store.drop();
  });

  it("refuses to save an endpoint or an approval webhook on this machine's network, storing nothing", async () => {
    const p = await seedProject(strict, { slug: `eg-${randomBytes(3).toString("hex")}` });
    for (const url of [receiver.url, "http://localhost:9/x", "http://[::1]:9/x", "http://10.0.0.5:5432/"]) {
      const res = await strict.request({
        method: "POST",
        url: `/projects/${p.projectId}/webhooks`,
        token: p.ownerToken,
        payload: { url, eventTypes: ["*"] },
      });
      assert.equal(res.statusCode, 400, url);
      assert.match((res.json() as { detail: string }).detail, /public addresses/);
    }
    const approval = await strict.request({
      method: "PUT",
      url: `/projects/${p.projectId}/approval-webhook`,
      token: p.ownerToken,
      payload: { url: "http://169.254.169.254/", timeoutMs: 200, failMode: "open" },
    });
    assert.equal(approval.statusCode, 400);
    const list = await strict.request({
      method: "GET",
      url: `/projects/${p.projectId}/webhooks`,
      token: p.ownerToken,
    });
    assert.equal(list.statusCode, 200);
    assert.deepEqual(list.json(), [], "nothing was stored");
  });

  it("a worker under `refuse` sends nothing to an endpoint saved under `allow`, and logs why", async () => {
    const p = await seedProject(lax, { slug: `eg-${randomBytes(3).toString("hex")}` });
    const created = await lax.request({
      method: "POST",
      url: `/projects/${p.projectId}/webhooks`,
      token: p.ownerToken,
      payload: { url: receiver.url, eventTypes: ["*"] },
    });
    assert.equal(created.statusCode, 201, created.body);
    const endpoint = created.json() as { id: number; secret: string };
    lax.secrets.add(endpoint.secret);
    // A deposit credit is an event every endpoint subscribed to "*" receives.
    await creditDeposit(store.db, { projectId: p.projectId, reference: `eg:${p.projectId}`, amountWei: 1n });
    for (let pass = 0; pass < 20; pass++) await worker.drain();
    assert.equal(receiver.received.length, 0, "no request reached the receiver");
    const log = await lax.request({
      method: "GET",
      url: `/projects/${p.projectId}/webhooks/${endpoint.id}/deliveries`,
      token: p.ownerToken,
    });
    assert.equal(log.statusCode, 200);
    assert.match(log.body, /the host has no public address to connect to/);
    assert.ok(!log.body.includes("127.0.0.1"), "the log names no address");
  });

  it("a name that does not resolve and a name of this machine read the same in the delivery log", async () => {
    // Otherwise a tenant learns which internal host names exist from its own delivery log.
    const p = await seedProject(lax, { slug: `eg-${randomBytes(3).toString("hex")}` });
    const port = new URL(receiver.url).port;
    const logs: string[] = [];
    for (const host of ["localhost", `no-such-host-${randomBytes(4).toString("hex")}.invalid`]) {
      const created = await lax.request({
        method: "POST",
        url: `/projects/${p.projectId}/webhooks`,
        token: p.ownerToken,
        payload: { url: `http://${host}:${port}/hook`, eventTypes: ["*"] },
      });
      assert.equal(created.statusCode, 201, created.body);
      lax.secrets.add((created.json() as { secret: string }).secret);
      logs.push(String((created.json() as { id: number }).id));
    }
    await creditDeposit(store.db, {
      projectId: p.projectId,
      reference: `enum:${p.projectId}`,
      amountWei: 1n,
    });
    for (let pass = 0; pass < 20; pass++) await worker.drain();
    const errors: string[] = [];
    for (const id of logs) {
      const log = await lax.request({
        method: "GET",
        url: `/projects/${p.projectId}/webhooks/${id}/deliveries`,
        token: p.ownerToken,
      });
      const attempts = JSON.stringify(log.json());
      const error = /"error":"([^"]*)"/.exec(attempts)?.[1];
      assert.ok(error, attempts);
      errors.push(error);
    }
    assert.equal(errors[0], errors[1]);
    assert.match(errors[0]!, /no public address/);
    assert.equal(receiver.received.length, 0);
  });

  it("the guarded path delivers to an address it allows (the same agent, widened to 127.0.0.1)", async () => {
    const send = webhookSender("refuse", (a) => a === "127.0.0.1");
    const signal = new AbortController().signal;
    const res = await send(receiver.url, {
      body: "{}",
      headers: { "content-type": "application/json" },
      signal,
    });
    assert.equal(res.status, 200);
    assert.equal(receiver.received.length, 1);
    await assert.rejects(
      send(receiver.url.replace("127.0.0.1", "localhost"), { body: "{}", headers: {}, signal }),
      (e: Error) => [e.name, (e.cause as Error | undefined)?.name].includes("PrivateTargetRefused"),
    );
  });
});

describe("what the sender reads of an answer", () => {
  // A real HTTP server whose answer each test sets: a status, a body, and whether the body stalls
  // after its first bytes.
  let answer: { status: number; body: string; stall?: boolean } = { status: 200, body: "" };
  let server: Server;
  let url: string;
  const send = webhookSender("allow");
  const post = (signal: AbortSignal | DeadlineSignal, keepAnswerUpTo?: number) =>
    send(url, { headers: { "content-type": "application/json" }, body: "{}", signal, keepAnswerUpTo });

  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (answer.stall) {
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.write(answer.body);
          return;
        }
        res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("keeps a body up to the bytes asked for, and none past them", async () => {
    const open = new AbortController().signal;
    answer = { status: 200, body: '{"approve":true}' };
    assert.deepEqual(await post(open, 16), { status: 200, text: '{"approve":true}' });
    assert.deepEqual(await post(open, 15), { status: 200, text: null });
    // Not asked for: read away, not kept, however large, and the status stands.
    answer = { status: 503, body: "x".repeat(300 * 1024) };
    assert.deepEqual(await post(open), { status: 503, text: null });
    answer = { status: 204, body: "" };
    assert.deepEqual(await post(open), { status: 204, text: null });
  });

  it("a body that stalls: a kept one fails with the deadline, a dropped one keeps its status", async () => {
    answer = { status: 200, body: '{"appr', stall: true };
    const kept = deadline(300);
    await assert.rejects(post(kept.signal, 1024), (err: Error) => err.name === "TimeoutError");
    kept.clear();
    const dropped = deadline(300);
    assert.deepEqual(await post(dropped.signal), { status: 200, text: null });
    dropped.clear();
  });

  it("a request undici will not write fails, and leaves nothing listening on its deadline", async () => {
    const limit = deadline(1000);
    await assert.rejects(
      send(url, { headers: { "x-broken": "a\r\nb" }, body: "{}", signal: limit.signal, keepAnswerUpTo: 64 }),
      (err: Error) => err.name === "InvalidArgumentError",
    );
    assert.equal(limit.signal.listenerCount("abort"), 0);
    limit.clear();
  });

  it("an aborted request is not sent, and one aborted on the way fails with the abort's reason", async () => {
    answer = { status: 200, body: "{}" };
    const why = new Error("stopping");
    const aborted = new AbortController();
    aborted.abort(why);
    let received = 0;
    const count = () => received++;
    server.on("request", count);
    try {
      await assert.rejects(post(aborted.signal, 64), (err) => err === why);
      answer = { status: 200, body: "", stall: true };
      const later = new AbortController();
      const pending = post(later.signal, 64);
      while (received === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      later.abort(why);
      await assert.rejects(pending, (err) => err === why);
      assert.equal(received, 1, "only the second request reached the server");
    } finally {
      server.off("request", count);
    }
  });
});
