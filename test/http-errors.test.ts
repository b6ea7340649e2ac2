import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { findNul } from "../src/http/validation.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { exchange, RawConnection, type RawResponse } from "./support/raw-http.ts";

/**
 * Errors a client can provoke before any handler runs: NUL characters the database cannot
 * store, URLs and methods the router refuses, bytes Node's HTTP parser refuses. Each is a
 * problem+json with a stable code that quotes nothing of the request, and a refusal leaves a
 * keep-alive connection usable unless HTTP itself cannot go on (then it says Connection: close).
 */
let t: TestApp;
let port: number;
let owner: string;
let apiKey: string;
let projectId: string;
let slug: string;

before(async () => {
  t = await startTestApp();
  const p = await seedProject(t, { projectId: "errs-proj", slug: "errs-org" });
  ({ ownerToken: owner, apiKey, projectId, slug } = p);
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  port = (t.app.server.address() as AddressInfo).port;
});
after(() => t.close());

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const HEALTH = "GET /health HTTP/1.1\r\nHost: test\r\n\r\n";

/** A problem+json response with the expected status and code, and a body as long as it says. */
function assertProblem(res: RawResponse, status: number, code: string, label = "") {
  const where = `${label} → ${res.status} ${res.body.slice(0, 300)}`;
  assert.equal(res.status, status, where);
  assert.match(res.headers["content-type"] ?? "", /^application\/problem\+json/, where);
  assert.equal(Number(res.headers["content-length"]), res.bodyBytes, where);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  assert.equal(body.status, status, where);
  assert.equal(body.code, code, where);
  assert.equal(typeof body.requestId, "string", where);
  assert.equal(res.headers["x-request-id"], body.requestId, where);
}

function request(method: string, path: string, headers: Record<string, string> = {}, body = ""): string {
  const lines = [`${method} ${path} HTTP/1.1`, "Host: test"];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (body || ["POST", "PATCH", "PUT", "DELETE"].includes(method)) {
    lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

describe("a NUL character is refused before any handler, on every route", () => {
  /** What authorize and its dry run both take. */
  const sponsorRequest = () => ({
    projectId,
    user: GAME,
    target: GAME,
    selector: "0xa0712d68",
    estimatedGas: 100_000,
    chainId: 14601,
  });
  /** A body each route accepts, so that only the NUL is wrong. */
  const validBodies = (): Record<string, Record<string, unknown>> => ({
    "POST /orgs": { name: "Nul org", slug: "nul-org" },
    "POST /orgs/{orgId}/members": { email: "member@nul.example", role: "viewer" },
    "PATCH /orgs/{orgId}/members/{developerId}": { role: "viewer" },
    "POST /projects": { id: "nul-project", name: "Nul project", owner: slug },
    "PATCH /projects/{id}": { name: "Renamed", dailyCap: "1000", sponsorIcon: "https://x.example/i.png" },
    "POST /projects/{id}/apikeys": { rateLimit: 10, scopes: ["read"] },
    "POST /projects/{id}/allowlist": { targetContract: GAME, functionSelector: "0xa0712d68" },
    "DELETE /projects/{id}/allowlist": { targetContract: GAME, functionSelector: "0xa0712d68" },
    "PATCH /projects/{id}/allowlist": { targetContract: GAME, functionSelector: "0xa0712d68", name: "Mint" },
    "PATCH /projects/{id}/apikeys/{keyId}": { name: "Renamed key" },
    "PATCH /projects/{id}/policies/{ruleId}": { name: "Renamed rule", paused: false },
    "PUT /projects/{id}/contracts/{address}": {
      name: "Game",
      abi: [{ type: "function", name: "mint", inputs: [{ type: "uint256" }] }],
    },
    "POST /sponsor/authorize": { ...sponsorRequest(), clientNonce: "nonce-1" },
    "POST /sponsor/check": sponsorRequest(),
    "PUT /projects/{id}/policies/{ruleId}": { kind: "sender_count_cap", maxOperations: 5, window: "day" },
    "POST /projects/{id}/webhooks": { url: "https://hooks.example.com/nul", eventTypes: ["*"] },
    "PATCH /projects/{id}/webhooks/{webhookId}": { description: "renamed", enabled: true },
    "PUT /projects/{id}/approval-webhook": {
      url: "https://approvals.example.com/nul",
      timeoutMs: 500,
      failMode: "open",
    },
    "PUT /projects/{id}/balance-alert": { thresholdWei: "1000" },
    "POST /auth/dev-token": { email: "nul@example.com" },
  });
  const paramValues = (): Record<string, string> => ({
    id: projectId,
    orgId: slug,
    developerId: "1",
    // No such key: a NUL that got through must not revoke the key the tests use.
    keyId: "999",
    chainId: "14601",
    ruleId: "nul-rule",
    webhookId: "999",
    deliveryId: "999",
    address: GAME,
  });

  interface Operation {
    method: string;
    path: string;
    params: string[];
    query: string[];
    bodyProps: Record<string, { type?: string; items?: { type?: string } }> | null;
  }
  function operations(): Operation[] {
    const spec = t.app.swagger() as {
      paths: Record<
        string,
        Record<string, { parameters?: { in: string; name: string }[]; requestBody?: unknown }>
      >;
    };
    return Object.entries(spec.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => {
        const body = op.requestBody as
          | { content: Record<string, { schema: { properties?: Operation["bodyProps"] } }> }
          | undefined;
        return {
          method: method.toUpperCase(),
          path,
          params: (op.parameters ?? []).filter((p) => p.in === "path").map((p) => p.name),
          query: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
          bodyProps: body ? (body.content["application/json"]?.schema.properties ?? {}) : null,
        };
      }),
    );
  }

  function urlOf(op: Operation, params: Record<string, string>, query = ""): string {
    return op.path.replace(/\{(\w+)\}/g, (_, name: string) => params[name]!) + query;
  }

  it("answers 400 invalid_request for a NUL in a path parameter, a query value or a body string, and logs none of it", async () => {
    const ops = operations();
    assert.ok(ops.length > 20, "the OpenAPI document lists the routes");
    const bodies = validBodies();
    const missing = ops
      .filter((op) => op.bodyProps && op.path !== "/rpc" && !bodies[`${op.method} ${op.path}`])
      .map((op) => `${op.method} ${op.path}`);
    assert.deepEqual(missing, [], "every route with a body has a valid body here");

    const logsBefore = t.logs.length;
    const markers: string[] = [];
    const failures: string[] = [];
    let cases = 0;
    for (const op of ops) {
      const token = op.path === "/sponsor/authorize" || op.path === "/rpc" ? apiKey : owner;
      const headers = { authorization: `Bearer ${token}` };
      const valid = paramValues();
      const label = `${op.method} ${op.path}`;
      const base = bodies[label];
      // Path and query cases carry the route's valid body, so that only the NUL is wrong.
      const requests: { what: string; url: string; payload?: Record<string, unknown> }[] = [];
      for (const name of op.params) {
        const url = urlOf(op, { ...valid, [name]: `${valid[name]}%00x` });
        requests.push({ what: `path ${name}`, url, ...(base ? { payload: base } : {}) });
      }
      for (const name of op.query.length > 0 ? op.query : ["q"]) {
        requests.push({
          what: `query ${name}`,
          url: urlOf(op, valid, `?${name}=1%00`),
          ...(base ? { payload: base } : {}),
        });
      }
      if (op.bodyProps && base) {
        for (const [name, prop] of Object.entries(op.bodyProps)) {
          const marker = `nul-marker-${markers.length}@example.com`;
          markers.push(marker);
          const nul = `${marker}\u0000`;
          if (prop.type === "string") {
            requests.push({ what: `body ${name}`, url: urlOf(op, valid), payload: { ...base, [name]: nul } });
          } else if (prop.type === "array" && prop.items?.type === "string") {
            requests.push({
              what: `body ${name}[]`,
              url: urlOf(op, valid),
              payload: { ...base, [name]: [nul] },
            });
          }
        }
      }
      for (const r of requests) {
        cases++;
        const res = await t.app.inject({
          method: op.method as "GET",
          url: r.url,
          headers,
          ...(r.payload ? { payload: r.payload } : {}),
        });
        const problem = /^application\/problem\+json/.test(String(res.headers["content-type"]));
        const body = problem ? (res.json() as { code?: string; detail?: string }) : {};
        if (
          res.statusCode !== 400 ||
          body.code !== "invalid_request" ||
          !/NUL/.test(body.detail ?? "") ||
          res.body.includes("nul-marker")
        ) {
          failures.push(`${label} (${r.what}) → ${res.statusCode} ${res.body.slice(0, 120)}`);
        }
      }
    }
    assert.ok(cases > 50, `only ${cases} cases`);
    assert.deepEqual(failures, [], "every NUL is refused with 400 invalid_request, quoting nothing");
    const logs = t.logs.slice(logsBefore);
    assert.deepEqual(
      markers.filter((m) => logs.some((line) => line.includes(m))),
      [],
      "a refused value reached the logs",
    );
    assert.deepEqual(
      logs.filter((line) => /"level":50/.test(line)).map((l) => l.slice(0, 200)),
      [],
    );
  });

  it("keeps /rpc a JSON-RPC endpoint for NULs inside its JSON-RPC body", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/rpc",
      headers: { authorization: `Bearer ${apiKey}` },
      payload: {
        jsonrpc: "2.0",
        id: "a\u0000",
        method: "pm_getPaymasterStubData",
        params: [{ sender: "\u0000" }, "0x\u0000", "0x3909", { projectId: "\u0000" }],
      },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().jsonrpc, "2.0");
    assert.equal(typeof res.json().error.data.code, "string");
  });

  it("finds a NUL at any depth, in keys as in values, without recursion", () => {
    assert.equal(findNul({ a: "x", b: [1, true, null, { c: "y" }] }), null);
    assert.deepEqual(findNul({ a: "x", b: [1, { c: "y\u0000" }] }), ["b", 1, "c"]);
    assert.deepEqual(findNul({ a: { "k\u0000": 1 } }), ["a", "k\u0000"]);
    const deep = JSON.parse(`${"[".repeat(200_000)}"\\u0000"${"]".repeat(200_000)}`);
    assert.equal(findNul(deep)?.length, 200_000);
  });

  it("answers a deeply nested body with a NUL as a 400, not a stack overflow", async () => {
    const depth = 30_000;
    const res = await t.app.inject({
      method: "POST",
      url: "/orgs",
      headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
      payload: `{"name":${"[".repeat(depth)}"\\u0000"${"]".repeat(depth)},"slug":"deep"}`,
    });
    assert.equal(res.statusCode, 400, res.body.slice(0, 300));
    assert.equal(res.json().code, "invalid_request");
    assert.ok(res.body.length < 1000, "the detail stays short");
  });
});

describe("errors before the handlers are problem+json and quote nothing", () => {
  const cases: {
    name: string;
    send: string;
    status: number;
    code: string;
    echo?: string[];
    check?: (r: RawResponse) => void;
  }[] = [
    {
      name: "a URL whose percent-encoding does not decode",
      send: request("GET", "/projects/%zzECHOME"),
      status: 400,
      code: "malformed_request",
      echo: ["ECHOME", "%zz"],
    },
    {
      name: "a path parameter over the length limit",
      send: request("GET", `/projects/ECHOME${"a".repeat(300)}`),
      status: 414,
      code: "uri_too_long",
      echo: ["ECHOME"],
    },
    {
      name: "an unknown path",
      send: request("GET", "/no/such/ECHOME"),
      status: 404,
      code: "not_found",
      echo: ["ECHOME"],
    },
    {
      name: "PROPFIND on a path that exists",
      send: request("PROPFIND", "/health"),
      status: 405,
      code: "method_not_allowed",
      check: (r) => assert.equal(r.headers.allow, "GET, HEAD"),
    },
    {
      name: "PUT on a project",
      send: request("PUT", "/projects/ECHOME"),
      status: 405,
      code: "method_not_allowed",
      echo: ["ECHOME"],
      check: (r) => assert.equal(r.headers.allow, "GET, HEAD, PATCH"),
    },
    {
      name: "an unknown method token",
      send: request("FOO", "/health"),
      status: 400,
      code: "malformed_request",
    },
    {
      name: "bytes that are not HTTP",
      send: "\u0001\u0002ECHOME\r\n\r\n",
      status: 400,
      code: "malformed_request",
      echo: ["ECHOME"],
    },
    {
      name: "a broken chunked body",
      send: "POST /orgs HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      status: 400,
      code: "malformed_request",
    },
    {
      name: "headers over the size limit",
      send: `GET /health HTTP/1.1\r\nHost: test\r\nX-Big: ECHOME${"a".repeat(20_000)}\r\n\r\n`,
      status: 431,
      code: "headers_too_large",
      echo: ["ECHOME"],
    },
    {
      name: "an HTTP/1.1 request without Host",
      send: "GET /health HTTP/1.1\r\n\r\n",
      status: 400,
      code: "malformed_request",
    },
    {
      name: "CONNECT",
      send: "CONNECT ECHOME.example:443 HTTP/1.1\r\nHost: ECHOME.example:443\r\n\r\n",
      status: 405,
      code: "method_not_allowed",
      echo: ["ECHOME"],
    },
  ];

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const conn = await exchange(port, c.send, { expect: 1 });
      const res = conn.responses[0];
      assert.ok(res, `no response (malformed: ${conn.malformed}, reset: ${conn.reset})`);
      assertProblem(res, c.status, c.code, c.name);
      for (const raw of c.echo ?? [])
        assert.ok(!res.body.includes(raw), `the body quotes ${raw}: ${res.body}`);
      c.check?.(res);
    });
  }

  it("an unknown Expect is ignored rather than answered with a bare 417", async () => {
    const conn = await exchange(port, request("GET", "/health", { expect: "teapot" }), { expect: 1 });
    assert.equal(conn.responses[0]?.status, 200);
  });
});

describe("a refused request leaves its keep-alive connection usable", () => {
  const big = JSON.stringify({ name: "x".repeat(70_000), slug: "big" });
  const refusals = (): { name: string; send: string; status: number; code: string }[] => [
    { name: "bad URL", send: request("GET", "/projects/%zz"), status: 400, code: "malformed_request" },
    { name: "unknown path", send: request("GET", "/no/such/route"), status: 404, code: "not_found" },
    {
      name: "method not allowed",
      send: request("DELETE", "/health"),
      status: 405,
      code: "method_not_allowed",
    },
    {
      name: "long path parameter",
      send: request("GET", `/projects/${"a".repeat(300)}`),
      status: 414,
      code: "uri_too_long",
    },
    {
      name: "wrong content type",
      send: request(
        "POST",
        "/orgs",
        { authorization: `Bearer ${owner}`, "content-type": "text/plain" },
        "name=x",
      ),
      status: 415,
      code: "unsupported_media_type",
    },
    {
      name: "body over the limit",
      send: request(
        "POST",
        "/orgs",
        { authorization: `Bearer ${owner}`, "content-type": "application/json" },
        big,
      ),
      status: 413,
      code: "payload_too_large",
    },
    {
      name: "malformed JSON",
      send: request(
        "POST",
        "/orgs",
        { authorization: `Bearer ${owner}`, "content-type": "application/json" },
        '{"name":',
      ),
      status: 400,
      code: "malformed_json",
    },
    {
      name: "invalid body",
      send: request(
        "POST",
        "/orgs",
        { authorization: `Bearer ${owner}`, "content-type": "application/json" },
        "{}",
      ),
      status: 400,
      code: "invalid_request",
    },
    {
      name: "NUL in a path parameter",
      send: request("GET", `/projects/${projectId}%00`, { authorization: `Bearer ${owner}` }),
      status: 400,
      code: "invalid_request",
    },
    {
      name: "missing Host",
      send: "GET /health HTTP/1.1\r\n\r\n",
      status: 400,
      code: "malformed_request",
    },
    {
      name: "bad credential",
      send: request("GET", "/orgs", { authorization: "Bearer nope" }),
      status: 401,
      code: "unauthorized",
    },
  ];

  // The refusals are built once the test app exists (they carry its credentials).
  for (const [i, name] of [
    "bad URL",
    "unknown path",
    "method not allowed",
    "long path parameter",
    "wrong content type",
    "body over the limit",
    "malformed JSON",
    "invalid body",
    "NUL in a path parameter",
    "missing Host",
    "bad credential",
  ].entries()) {
    it(`answers the next request on the connection after: ${name}`, async () => {
      const r = refusals()[i]!;
      assert.equal(r.name, name);
      const conn = await RawConnection.open(port);
      try {
        conn.write(r.send);
        const first = await conn.next();
        assertProblem(first, r.status, r.code, r.name);
        assert.notEqual(first.headers.connection?.toLowerCase(), "close", `${r.name} closes the connection`);
        conn.write(HEALTH);
        const second = await conn.next();
        assert.equal(second.status, 200, `${r.name}: the next request on the connection → ${second.status}`);
      } finally {
        conn.destroy();
      }
    });
  }

  for (const [name, send] of [
    ["an unknown method", request("FOO", "/health")],
    ["bytes that are not HTTP", "\u0001garbage\r\n\r\n"],
    ["headers over the limit", `GET /health HTTP/1.1\r\nHost: test\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`],
    ["a broken chunk", "POST /orgs HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
    [
      "Content-Length with Transfer-Encoding",
      "POST /orgs HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
    ],
  ] as const) {
    it(`says Connection: close, and closes, when the parser cannot go on: ${name}`, async () => {
      const conn = await RawConnection.open(port);
      try {
        conn.write(send);
        const res = await conn.next();
        assert.ok(res.status === 400 || res.status === 431, String(res.status));
        assert.match(res.headers["content-type"] ?? "", /^application\/problem\+json/);
        assert.equal(res.headers.connection, "close", JSON.stringify(res.headers));
        assert.equal(await conn.closedByServer(), true, "the server closes the connection");
      } finally {
        conn.destroy();
      }
    });
  }

  it("answers pipelined requests in order, then the one it cannot parse", async () => {
    const conn = await exchange(
      port,
      `${HEALTH}${request("GET", "/no/such")}${HEALTH}\u0001garbage\r\n\r\n`,
      {
        expect: 4,
      },
    );
    assert.equal(conn.malformed, null);
    assert.deepEqual(
      conn.responses.map((r) => r.status),
      [200, 404, 200, 400],
    );
    assert.equal(conn.responses[3]!.headers.connection, "close");
  });
});
