import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { openTestDb, seedProject, startTestApp, type TestApp } from "./support/app.ts";

const version = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

describe("health", () => {
  it("GET /health answers exactly the documented fields", async () => {
    const res = await t.request({ method: "GET", url: "/health" });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.deepEqual(Object.keys(body).sort(), ["service", "status", "timestamp", "version"]);
    assert.equal(body.status, "ok");
    assert.equal(body.service, "gas-sponsorship-service");
    assert.equal(body.version, version);
    assert.match(body.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("GET /health/ready reports the database", async () => {
    const res = await t.request({ method: "GET", url: "/health/ready" });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().checks.database.status, "ok");
  });

  it("a database that is gone gives a 503 problem with Retry-After that leaks no internals", async () => {
    const spare = await openTestDb();
    const other = await startTestApp({ db: spare });
    const token = await other.token("down@example.com");
    await spare.db.close();
    const res = await other.app.inject({
      method: "GET",
      url: "/orgs",
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.statusCode, 503, res.body);
    assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
    assert.equal(res.json().code, "unavailable");
    assert.ok(Number(res.headers["retry-after"]) >= 1);
    assert.doesNotMatch(res.body, /SELECT|developers|pglite|postgres|at \w+ \(|\.ts:/i);
    await other.close();
    if (spare.schema) await t.db.query(`DROP SCHEMA ${spare.schema} CASCADE`);
  });

  it("GET /health/ready answers 503 when the database is down", async () => {
    const spare = await openTestDb();
    const other = await startTestApp({ db: spare });
    await spare.db.close();
    const res = await other.app.inject({ method: "GET", url: "/health/ready" });
    assert.equal(res.statusCode, 503);
    assert.equal(res.json().checks.database.status, "down");
    await other.close();
    if (spare.schema) await t.db.query(`DROP SCHEMA ${spare.schema} CASCADE`);
  });
});

describe("chains", () => {
  it("lists chain 14601 from configuration without RPC URLs", async () => {
    const res = await t.request({ method: "GET", url: "/blockchain/chains" });
    assert.equal(res.statusCode, 200);
    const [chain] = res.json();
    assert.equal(chain.chainId, 14601);
    assert.equal(chain.nativeCurrency.symbol, "S");
    assert.equal(chain.nativeCurrency.decimals, 18);
    assert.equal(chain.entryPoint, "0x0000000071727De22E5E9d8BAf0edAc6f37da032");
    assert.ok(!res.body.includes("http"), "RPC URLs must not be exposed");
  });
});

describe("errors are problem+json, never 500", () => {
  const problem = (
    res: { statusCode: number; headers: Record<string, unknown>; json(): unknown },
    status: number,
    code: string,
  ) => {
    assert.equal(res.statusCode, status);
    assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
    const body = res.json() as Record<string, unknown>;
    assert.equal(body.status, status);
    assert.equal(body.code, code);
    assert.equal(typeof body.requestId, "string");
    assert.equal(typeof body.detail, "string");
  };

  it("unknown route → 404", async () => {
    problem(await t.request({ method: "GET", url: "/no/such/route" }), 404, "not_found");
  });

  it("malformed JSON → 400", async () => {
    const token = await t.token("json@example.com");
    const res = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      headers: { "content-type": "application/json" },
      payload: '{"name": "x", ',
    });
    problem(res, 400, "malformed_json");
  });

  it("wrong content type → 415", async () => {
    const token = await t.token("ct@example.com");
    const res = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      headers: { "content-type": "text/plain" },
      payload: "name=x",
    });
    problem(res, 415, "unsupported_media_type");
  });

  it("oversized body → 413", async () => {
    const token = await t.token("big@example.com");
    const res = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ name: "x".repeat(70_000), slug: "big" }),
    });
    problem(res, 413, "payload_too_large");
  });

  it("unknown fields on management bodies → 400", async () => {
    const token = await t.token("unknown@example.com");
    const res = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      payload: { name: "Acme", slug: "acme-unknown", admin: true },
    });
    problem(res, 400, "invalid_request");
    assert.match(res.json().detail, /unknown field 'admin'/);
  });

  it("no credential → 401 with WWW-Authenticate", async () => {
    const res = await t.request({ method: "GET", url: "/orgs" });
    problem(res, 401, "unauthorized");
    assert.ok(res.headers["www-authenticate"]);
  });
});

describe("OpenAPI", () => {
  it("serves the document at /docs/json and the UI at /docs", async () => {
    const json = await t.app.inject({ method: "GET", url: "/docs/json" });
    assert.equal(json.statusCode, 200);
    const spec = json.json();
    assert.ok(spec.paths["/sponsor/authorize"].post);
    const ui = await t.app.inject({ method: "GET", url: "/docs/" });
    assert.equal(ui.statusCode, 200);
  });

  it("matches the committed openapi.json (run `npm run openapi` after changing routes)", async () => {
    const committed = JSON.parse(readFileSync(new URL("../openapi.json", import.meta.url), "utf8"));
    const live = JSON.parse(JSON.stringify(t.app.swagger()));
    assert.deepEqual(live, committed);
  });
});

describe("walk-through", () => {
  it("token → organization → project → key → allowlist", async () => {
    const seeded = await seedProject(t, { projectId: "walkthrough" });
    const res = await t.request({
      method: "POST",
      url: `/projects/${seeded.projectId}/allowlist`,
      token: seeded.ownerToken,
      payload: {
        targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        functionSelector: "0xa0712d68",
      },
    });
    assert.equal(res.statusCode, 201);
    assert.equal(res.json().target_contract, "0x5fbdb2315678afecb367f032d93f642f64180aa3");
  });
});
