/**
 * Running it for real (issue 10): request ids that follow a request from the load balancer to
 * every log line, log lines that say who called and how it ended (never with the key), the
 * client's address behind trusted proxies (TRUST_PROXY), and Prometheus metrics at /metrics.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { formatEther, parseEther } from "viem";
import { type ChainWatchers, createChainWatchers } from "../src/chains/watchers.ts";
import { ConfigError, loadConfig } from "../src/config.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { VERSION } from "../src/services.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { DEVNET_CHAIN_ID } from "./support/chain/anvil.ts";
import {
  allowlist,
  MINT_SELECTOR,
  type ServiceOnChain,
  sponsorUnknownAccounts,
  startServiceOnChain,
  totalGas,
} from "./support/chain-service.ts";
import { parseExposition } from "./support/prometheus.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const USER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

type LogLine = Record<string, unknown> & { msg?: string; reqId?: string; level: number };
const parsed = (t: TestApp): LogLine[] => t.logs.map((l) => JSON.parse(l));
const linesOf = (t: TestApp, reqId: string) => parsed(t).filter((l) => l.reqId === reqId);
const completed = (t: TestApp, reqId: string) => {
  const line = linesOf(t, reqId).find((l) => l.msg === "request completed");
  assert.ok(line, `no completion line for ${reqId}`);
  return line;
};

describe("x-request-id", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it("at info, one line per request: method, URL, client, status and time on the completion line", async () => {
    const quiet = await startTestApp({ logLevel: "info" });
    try {
      const res = await quiet.app.inject({
        method: "GET",
        url: "/no/such/route?x=1",
        remoteAddress: "198.51.100.4",
      });
      const id = String(res.headers["x-request-id"]);
      const mine = quiet.logs.map((l) => JSON.parse(l)).filter((l) => l.reqId === id);
      assert.deepEqual(
        mine.map((l) => l.msg),
        ["request completed"],
      );
      const [line] = mine;
      assert.equal(line.req.method, "GET");
      assert.equal(line.req.url, "/no/such/route?x=1");
      assert.equal(line.req.remoteAddress, "198.51.100.4");
      assert.equal(line.res.statusCode, 404);
      assert.equal(typeof line.responseTime, "number");
      assert.equal(line.code, "not_found");
    } finally {
      await quiet.close();
    }
  });

  it("REQUEST_LOG_EVERY=3: one successful request's line in three, every error's line, and metrics for all", async () => {
    const sampled = await startTestApp({ logLevel: "info", env: { REQUEST_LOG_EVERY: "3" } });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) {
        const res = await sampled.app.inject({ method: "GET", url: "/health" });
        assert.equal(res.statusCode, 200);
        ids.push(String(res.headers["x-request-id"]));
      }
      const missing = await sampled.app.inject({ method: "GET", url: "/no/such/route" });
      const lines = sampled.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === "request completed");
      // The third and sixth successful requests, and the 404.
      assert.deepEqual(
        lines.map((l) => l.reqId),
        [ids[2], ids[5], String(missing.headers["x-request-id"])],
      );
      assert.equal(lines[2].code, "not_found");
      const metrics = await sampled.app.inject({ method: "GET", url: "/metrics" });
      const health = metrics.body
        .split("\n")
        .find((l) => l.startsWith("gss_http_requests_total{") && l.includes('route="/health"'));
      assert.ok(health?.endsWith(" 7"), `every /health request counted: ${health}`);
    } finally {
      await sampled.close();
    }
  });

  it("a safe incoming id is kept: echoed, in the problem body, and the reqId of every line of the request", async () => {
    const id = "lb-7f3a.trace:01_A-z";
    const res = await t.request({ method: "GET", url: "/no/such/route", headers: { "x-request-id": id } });
    assert.equal(res.statusCode, 404);
    assert.equal(res.headers["x-request-id"], id);
    assert.equal(res.json().requestId, id);
    const lines = linesOf(t, id);
    assert.deepEqual(
      lines.map((l) => l.msg),
      ["incoming request", "request completed"],
    );
    // No other line mentions it under another id.
    assert.deepEqual(
      t.logs.filter((l) => l.includes(id) && JSON.parse(l).reqId !== id),
      [],
    );
  });

  it("an unsafe or oversized id is replaced by a fresh UUID and never logged", async () => {
    for (const given of ["has space", "a".repeat(129), "<script>", "semi;colon", 'quote"d', "é"]) {
      const res = await t.request({ method: "GET", url: "/health", headers: { "x-request-id": given } });
      assert.equal(res.statusCode, 200);
      const echoed = String(res.headers["x-request-id"]);
      assert.match(echoed, UUID, given);
      assert.ok(linesOf(t, echoed).length >= 2, "the request's lines carry the generated id");
      assert.ok(!t.logs.some((l) => l.includes(given)), `${given} reached the logs`);
    }
    const longest = "b".repeat(128);
    const res = await t.request({ method: "GET", url: "/health", headers: { "x-request-id": longest } });
    assert.equal(res.headers["x-request-id"], longest);
  });

  it("two ids in one request (repeated header) are not trusted either", async () => {
    const res = await t.app.inject({
      method: "GET",
      url: "/health",
      headers: { "x-request-id": ["first", "second"] as unknown as string },
    });
    assert.match(String(res.headers["x-request-id"]), UUID);
  });
});

describe("log lines say who called and how it ended, never with the key", () => {
  let t: TestApp;
  let p: Awaited<ReturnType<typeof seedProject>>;
  let keyId: number;
  before(async () => {
    t = await startTestApp();
    p = await seedProject(t);
    const keys = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
    });
    keyId = (keys.json() as { id: number }[])[0]!.id;
  });
  after(() => t.close());

  it("a refused authorization: projectId, apiKeyId, route and the error code on the completion line", async () => {
    const res = await t.request({
      method: "POST",
      url: "/sponsor/authorize",
      token: p.apiKey,
      payload: {
        projectId: p.projectId,
        user: USER,
        target: GAME,
        selector: MINT_SELECTOR,
        estimatedGas: 100_000,
        chainId: 14601,
      },
    });
    assert.equal(res.statusCode, 403, res.body);
    const line = completed(t, String(res.headers["x-request-id"]));
    assert.equal(line.projectId, p.projectId);
    assert.equal(line.apiKeyId, keyId);
    assert.equal(line.route, "/sponsor/authorize");
    assert.equal(line.code, "not_allowlisted");
    assert.deepEqual(line.res, { statusCode: 403 });
  });

  it("/rpc with the key in the URL: the caller and the JSON-RPC error's code, and not a trace of the key", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/rpc?apikey=${p.apiKey}`,
      headers: { "content-type": "application/json" },
      payload: { jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: [] },
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().error.data.code, "invalid_params");
    const line = completed(t, String(res.headers["x-request-id"]));
    assert.equal(line.projectId, p.projectId);
    assert.equal(line.apiKeyId, keyId);
    assert.equal(line.code, "invalid_params");
    assert.ok(!t.logs.some((l) => l.includes(p.apiKey.slice(4, 24))), "the key reached the logs");
  });

  it("a key in any spelling or place in the URL never reaches a log line", async () => {
    const key = p.apiKey;
    const everyChar = [...key].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`).join("");
    const urls = [
      `/rpc?api%6Bey=${key}`,
      `/rpc?%61pikey=${key}`,
      `/rpc?%61%70%69%5f%6b%65%79=${key}`,
      `/rpc?APIKEY=${key}`,
      `/rpc?chain=1;apikey=${key}`,
      `/rpc?chain=1;api%6bey=${key}&x=2`,
      `/rpc?token=${key}`,
      `/rpc?token=${everyChar}`,
      `/rpc?${key}`,
      `/rpc?callback=https%3A%2F%2Fexample.com%2F%3Fk%3D${key}`,
      `/health?x=${key}`,
      `/projects/${key}`,
      `/projects/${everyChar}/balance`,
    ];
    const before = t.logs.length;
    for (const url of urls) {
      const res = await t.app.inject({
        method: url.startsWith("/rpc") ? "POST" : "GET",
        url,
        headers: { "content-type": "application/json" },
        payload: url.startsWith("/rpc")
          ? { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }
          : undefined,
      });
      assert.ok(res.statusCode < 500, `${url}: ${res.statusCode}`);
    }
    const lines = t.logs.slice(before).join("\n");
    assert.ok(lines.length > 0);
    for (const trace of [key.slice(4, 24), everyChar.slice(12, 60), key.slice(4, 24).toLowerCase()]) {
      assert.ok(!lines.includes(trace), `the key reached the logs: ${trace}`);
    }
  });

  it("the key in ?apikey= is still honoured on /rpc when its name is percent-encoded", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/rpc?api%6Bey=${p.apiKey}`,
      headers: { "content-type": "application/json" },
      payload: { jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: [] },
    });
    assert.equal(res.json().error.data.code, "invalid_params", "authenticated: the params are judged");
    const line = completed(t, String(res.headers["x-request-id"]));
    assert.equal(line.apiKeyId, keyId);
  });

  it("a developer: developerId and the project of the path; a success has no code", async () => {
    const res = await t.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.ownerToken });
    assert.equal(res.statusCode, 200);
    const line = completed(t, String(res.headers["x-request-id"]));
    assert.equal(typeof line.developerId, "number");
    assert.equal(line.projectId, p.projectId);
    assert.equal(line.code, undefined);
    assert.equal(line.route, "/projects/:id");
  });

  it("a key over its rate limit: 429 logged with the key's id and rate_limited", async () => {
    const limited = await seedProject(t, { rateLimit: 1, scopes: ["read"] });
    await t.request({ method: "GET", url: `/projects/${limited.projectId}`, token: limited.apiKey });
    const res = await t.request({
      method: "GET",
      url: `/projects/${limited.projectId}`,
      token: limited.apiKey,
    });
    assert.equal(res.statusCode, 429);
    const line = completed(t, String(res.headers["x-request-id"]));
    assert.equal(line.projectId, limited.projectId);
    assert.equal(typeof line.apiKeyId, "number");
    assert.equal(line.code, "rate_limited");
  });
});

describe("TRUST_PROXY", () => {
  it("is off by default; takes a hop count or addresses and CIDR ranges; refuses anything else without echoing it", () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: "0" }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: "2" }).trustProxy, 2);
    assert.deepEqual(loadConfig({ TRUST_PROXY: "10.0.0.0/8, 192.168.1.7,fd00::/8,loopback" }).trustProxy, [
      "10.0.0.0/8",
      "192.168.1.7",
      "fd00::/8",
      "loopback",
    ]);
    for (const bad of ["10.0.0.0/33", "::1/129", "10.0.0.0/8/1", "lb.internal", "true", "1.2.3"]) {
      assert.throws(
        () => loadConfig({ TRUST_PROXY: bad }),
        (err: Error) =>
          err instanceof ConfigError && /TRUST_PROXY/.test(err.message) && !err.message.includes(bad),
        bad,
      );
    }
  });

  /** request.ip as the service saw it, from the request's own log line. */
  async function ipSeen(t: TestApp, remoteAddress: string, forwardedFor?: string): Promise<unknown> {
    const res = await t.app.inject({
      method: "GET",
      url: "/health",
      remoteAddress,
      headers: forwardedFor ? { "x-forwarded-for": forwardedFor } : {},
    });
    const incoming = linesOf(t, String(res.headers["x-request-id"])).find(
      (l) => l.msg === "incoming request",
    );
    return (incoming?.req as { remoteAddress?: string } | undefined)?.remoteAddress;
  }

  it("off: the socket's address, whatever X-Forwarded-For says", async () => {
    const t = await startTestApp();
    try {
      assert.equal(await ipSeen(t, "10.1.2.3", "198.51.100.7, 203.0.113.9"), "10.1.2.3");
    } finally {
      await t.close();
    }
  });

  it("a hop count: the address that many proxies in", async () => {
    const one = await startTestApp({ env: { TRUST_PROXY: "1" } });
    const two = await startTestApp({ env: { TRUST_PROXY: "2" } });
    try {
      assert.equal(await ipSeen(one, "10.1.2.3", "198.51.100.7, 203.0.113.9"), "203.0.113.9");
      assert.equal(await ipSeen(two, "10.1.2.3", "198.51.100.7, 203.0.113.9"), "198.51.100.7");
      assert.equal(await ipSeen(one, "10.1.2.3"), "10.1.2.3");
    } finally {
      await one.close();
      await two.close();
    }
  });

  it("a list of ranges: X-Forwarded-For is believed only from those peers", async () => {
    const t = await startTestApp({ env: { TRUST_PROXY: "10.0.0.0/8" } });
    try {
      assert.equal(await ipSeen(t, "10.1.2.3", "203.0.113.9"), "203.0.113.9");
      assert.equal(await ipSeen(t, "192.0.2.1", "203.0.113.9"), "192.0.2.1");
      // A chain through two trusted hops ends at the first untrusted one.
      assert.equal(await ipSeen(t, "10.1.2.3", "198.51.100.7, 10.9.9.9"), "198.51.100.7");
    } finally {
      await t.close();
    }
  });
});

describe("METRICS_TOKEN", () => {
  it("when set, /metrics needs it as a bearer token: 401 problem without or with another, 200 with it", async () => {
    const token = "metrics-token-2f9c81d0e4";
    const t = await startTestApp({ env: { METRICS_TOKEN: token } });
    t.secrets.add(token);
    try {
      for (const authorization of [
        undefined,
        "Bearer wrong-token-000000000",
        `Basic ${token}`,
        `Bearer ${token}x`,
      ]) {
        const res = await t.request({
          method: "GET",
          url: "/metrics",
          headers: authorization ? { authorization } : {},
        });
        assert.equal(res.statusCode, 401, String(authorization));
        assert.equal(res.json().code, "unauthorized");
        assert.match(String(res.headers["www-authenticate"]), /^Bearer/);
      }
      const ok = await t.request({
        method: "GET",
        url: "/metrics",
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(ok.statusCode, 200);
      assert.match(String(ok.headers["content-type"]), /^text\/plain; version=0\.0\.4/);
    } finally {
      await t.close();
    }
    assert.throws(() => loadConfig({ METRICS_TOKEN: "short" }), /METRICS_TOKEN/);
  });
});

describe("/metrics after some traffic, on a chain with the watchers running", () => {
  let s: ServiceOnChain;
  let watchers: ChainWatchers;
  let p: Awaited<ReturnType<typeof seedProject>>;

  before(async () => {
    s = await startServiceOnChain({ confirmations: 0 });
    watchers = createChainWatchers(s.t.config, s.t.db, { metrics: s.t.services.metrics });
    s.t.services.readiness.push(...watchers.probes);
    watchers.start();
    p = await seedProject(s.t);
    // USER is an address with no code: the project sponsors it on caps alone.
    await sponsorUnknownAccounts(s.t, p);
    await allowlist(s.t, p, s.stack.gameItems, MINT_SELECTOR);
    await creditDeposit(s.t.db, {
      projectId: p.projectId,
      reference: "fund:metrics",
      amountWei: parseEther("1"),
    });
  });
  after(async () => {
    await watchers?.stop();
    await s?.stop();
  });

  const authorizeBody = (selector: string) => ({
    projectId: p.projectId,
    user: USER,
    target: s.stack.gameItems,
    selector,
    estimatedGas: Number(totalGas()),
    chainId: DEVNET_CHAIN_ID,
  });

  it("exposes every family with plausible values", { timeout: 120_000 }, async () => {
    const t = s.t;
    const ok = await Promise.all(
      [1, 2, 3].map(() =>
        t.request({
          method: "POST",
          url: "/sponsor/authorize",
          token: p.apiKey,
          payload: authorizeBody(MINT_SELECTOR),
        }),
      ),
    );
    assert.deepEqual(
      ok.map((r) => r.statusCode),
      [200, 200, 200],
    );
    const reservedWei = ok.reduce((sum, r) => sum + BigInt(r.json().maxGasCost), 0n);
    const refused = await t.request({
      method: "POST",
      url: "/sponsor/authorize",
      token: p.apiKey,
      payload: authorizeBody("0xdeadbeef"),
    });
    assert.equal(refused.statusCode, 403);
    const anonymous = await t.request({
      method: "POST",
      url: "/sponsor/authorize",
      payload: authorizeBody(MINT_SELECTOR),
    });
    assert.equal(anonymous.statusCode, 401);
    const rpc = (method: string) =>
      t.app.inject({
        method: "POST",
        url: "/rpc",
        headers: { authorization: `Bearer ${p.apiKey}`, "content-type": "application/json" },
        payload: { jsonrpc: "2.0", id: 1, method, params: [] },
      });
    assert.equal((await rpc("pm_getPaymasterStubData")).json().error.data.code, "invalid_params");
    assert.equal((await rpc("eth_chainId")).json().error.data.code, "method_not_found");
    assert.equal((await t.request({ method: "GET", url: "/no/such/route" })).statusCode, 404);

    // The watchers run (this instance leads) and have caught up with the chain.
    const scrape = async () => parseExposition((await t.request({ method: "GET", url: "/metrics" })).body);
    const end = Date.now() + 60_000;
    let m = await scrape();
    const value = (name: string, labels: Record<string, string> = {}) =>
      m.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
        ?.value;
    const chain = { chain_id: String(DEVNET_CHAIN_ID) };
    while (
      value("gss_watcher_leader", chain) !== 1 ||
      ["settlement", "settlement:0.8", "deposits"].some(
        (w) => value("gss_watcher_lag_blocks", { ...chain, watcher: w }) !== 0,
      )
    ) {
      assert.ok(Date.now() < end, "the watchers did not catch up");
      await new Promise((resolve) => setTimeout(resolve, 100));
      m = await scrape();
    }

    const families: [string, string][] = [
      ["gss_build_info", "gauge"],
      ["gss_http_requests_total", "counter"],
      ["gss_http_request_duration_seconds", "histogram"],
      ["gss_authorize_outcomes_total", "counter"],
      ["gss_reservation_batch_size", "histogram"],
      ["gss_watcher_lag_blocks", "gauge"],
      ["gss_watcher_leader", "gauge"],
      ["gss_unattributed_spend_ether", "gauge"],
      ["gss_paymaster_deposit_ether", "gauge"],
      ["gss_gas_tanks_ether", "gauge"],
      ["gss_open_reservations_ether", "gauge"],
      ["gss_paymaster_deposit_coverage", "gauge"],
      ["gss_readiness_check_status", "gauge"],
      ["process_cpu_user_seconds_total", "counter"],
      ["process_resident_memory_bytes", "gauge"],
      ["nodejs_heap_size_used_bytes", "gauge"],
      ["nodejs_eventloop_lag_seconds", "gauge"],
    ];
    for (const [name, type] of families) assert.equal(m.types.get(name), type, name);

    assert.equal(value("gss_build_info", { version: VERSION }), 1);
    const authorize = { route: "/sponsor/authorize", method: "POST" };
    assert.equal(value("gss_http_requests_total", { ...authorize, status_code: "200" }), 3);
    assert.equal(value("gss_http_requests_total", { ...authorize, status_code: "403" }), 1);
    assert.equal(value("gss_http_requests_total", { ...authorize, status_code: "401" }), 1);
    assert.equal(value("gss_http_requests_total", { route: "/rpc", method: "POST", status_code: "200" }), 2);
    assert.equal(
      value("gss_http_requests_total", { route: "unmatched", method: "GET", status_code: "404" }),
      1,
    );
    assert.equal(value("gss_http_request_duration_seconds_count", authorize), 5);
    assert.ok(value("gss_http_request_duration_seconds_sum", authorize)! > 0);
    assert.equal(value("gss_http_request_duration_seconds_bucket", { ...authorize, le: "+Inf" }), 5);

    const outcome = (api: string, method: string, code: string) =>
      value("gss_authorize_outcomes_total", { api, method, code });
    assert.equal(outcome("rest", "authorize", "ok"), 3);
    assert.equal(outcome("rest", "authorize", "not_allowlisted"), 1);
    assert.equal(outcome("rest", "authorize", "unauthorized"), 1);
    assert.equal(outcome("rpc", "pm_getPaymasterStubData", "invalid_params"), 1);
    assert.equal(outcome("rpc", "other", "method_not_found"), 1);

    // Three reservations that met, maybe in fewer calls; the refusal may have reached the store too.
    const batches = value("gss_reservation_batch_size_count")!;
    const reservations = value("gss_reservation_batch_size_sum")!;
    assert.ok(batches >= 1 && batches <= reservations, `${batches} batches of ${reservations}`);
    assert.ok(reservations >= 3 && reservations <= 4, `${reservations} reservations`);

    for (const entry_point of ["0.7", "0.8"]) {
      assert.equal(value("gss_unattributed_spend_ether", { ...chain, entry_point }), 0);
      assert.equal(value("gss_paymaster_deposit_ether", { ...chain, entry_point }), 10);
    }
    assert.equal(value("gss_open_reservations_ether", chain), Number(formatEther(reservedWei)));
    assert.equal(value("gss_gas_tanks_ether", chain), Number(formatEther(parseEther("1") - reservedWei)));
    assert.equal(value("gss_paymaster_deposit_coverage", chain), 0);
    assert.equal(value("gss_readiness_check_status", { check: "database" }), 0);
    assert.equal(value("gss_readiness_check_status", { check: "chain:14601" }), 0);

    assert.ok(value("process_cpu_user_seconds_total")! > 0);
    assert.ok(value("process_resident_memory_bytes")! > 0);
    assert.ok(value("nodejs_heap_size_used_bytes")! > 0);
    assert.ok(value("nodejs_eventloop_lag_seconds")! >= 0);
  });
});
