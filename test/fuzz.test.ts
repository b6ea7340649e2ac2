import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

/**
 * Malformed bodies, params and headers thrown at every route: each must answer a 4xx
 * problem+json and leave the database exactly as it was.
 */
let t: TestApp;
let owner: string;
let apiKey: string;
let projectId: string;
let slug: string;
/** Values that name something real (the organization by id as well as by slug). */
const realValues = new Set<string>();

before(async () => {
  // The fuzzer sends far more developer requests a minute than DEVELOPER_RATE_LIMIT allows;
  // each case must reach validation, not the limit.
  t = await startTestApp({ env: { DEVELOPER_RATE_LIMIT: "1000000", FAILED_AUTH_LIMIT: "1000000" } });
  const p = await seedProject(t, { projectId: "fuzz-proj", slug: "fuzz-org" });
  ({ ownerToken: owner, apiKey, projectId, slug } = p);
  for (const v of [slug, projectId, String(p.orgId), "1", "14601"]) realValues.add(v);
  await creditDeposit(t.db, { projectId, reference: "fuzz", amountWei: 10n ** 20n });
});
after(() => t.close());

type FieldKind = "string" | "integer" | "boolean" | "wei" | "strings";
interface Route {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  params: Record<string, string>;
  body?: Record<string, unknown>;
  fields?: Record<string, FieldKind>;
  /** Unknown fields are refused (false for authorize, which ignores them). */
  strict?: boolean;
  auth: "owner" | "key";
  query?: Record<string, FieldKind>;
}

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const routes = (): Route[] => [
  {
    method: "POST",
    path: "/orgs",
    params: {},
    body: { name: "N", slug: "fresh-org" },
    fields: { name: "string", slug: "string" },
    strict: true,
    auth: "owner",
  },
  { method: "GET", path: "/orgs/:orgId/members", params: { orgId: slug }, auth: "owner" },
  {
    method: "POST",
    path: "/orgs/:orgId/members",
    params: { orgId: slug },
    body: { email: "new@fuzz.example", role: "viewer" },
    fields: { email: "string", role: "string" },
    strict: true,
    auth: "owner",
  },
  {
    method: "PATCH",
    path: "/orgs/:orgId/members/:developerId",
    params: { orgId: slug, developerId: "1" },
    body: { role: "owner" },
    fields: { role: "string" },
    strict: true,
    auth: "owner",
  },
  {
    method: "GET",
    path: "/orgs/:orgId/funds/parity",
    params: { orgId: slug },
    query: { onlyDrift: "boolean" },
    auth: "owner",
  },
  {
    method: "POST",
    path: "/projects",
    params: {},
    body: { id: "fresh-project", name: "N", owner: slug },
    fields: { id: "string", name: "string", owner: "string" },
    strict: true,
    auth: "owner",
  },
  {
    method: "GET",
    path: "/projects/funds/parity-report",
    params: {},
    query: { onlyDrift: "boolean" },
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id", params: { id: projectId }, auth: "owner" },
  {
    method: "PATCH",
    path: "/projects/:id",
    params: { id: projectId },
    body: { name: "Renamed" },
    fields: { name: "string", dailyCap: "wei", validityTtlSec: "integer" },
    strict: true,
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id/balance", params: { id: projectId }, auth: "owner" },
  { method: "GET", path: "/projects/:id/funding-accounts", params: { id: projectId }, auth: "owner" },
  {
    method: "GET",
    path: "/projects/:id/funding-accounts/:chainId",
    params: { id: projectId, chainId: "14601" },
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id/apikeys", params: { id: projectId }, auth: "owner" },
  {
    method: "POST",
    path: "/projects/:id/apikeys",
    params: { id: projectId },
    body: { rateLimit: 10 },
    fields: { rateLimit: "integer", scopes: "strings" },
    strict: true,
    auth: "owner",
  },
  {
    method: "DELETE",
    path: "/projects/:id/apikeys/:keyId",
    params: { id: projectId, keyId: "1" },
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id/allowlist", params: { id: projectId }, auth: "owner" },
  {
    method: "POST",
    path: "/projects/:id/allowlist",
    params: { id: projectId },
    body: { targetContract: GAME, functionSelector: "0xa0712d68" },
    fields: { targetContract: "string", functionSelector: "string" },
    strict: true,
    auth: "owner",
  },
  {
    method: "DELETE",
    path: "/projects/:id/allowlist",
    params: { id: projectId },
    body: { targetContract: GAME, functionSelector: "0xa0712d68" },
    fields: { targetContract: "string", functionSelector: "string" },
    strict: true,
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id/analytics/overview", params: { id: projectId }, auth: "owner" },
  {
    method: "GET",
    path: "/projects/:id/analytics/events",
    params: { id: projectId },
    query: { limit: "integer", offset: "integer" },
    auth: "owner",
  },
  { method: "GET", path: "/projects/:id/funds/parity", params: { id: projectId }, auth: "owner" },
  {
    method: "POST",
    path: "/sponsor/authorize",
    params: {},
    body: {
      projectId,
      user: GAME,
      target: GAME,
      selector: "0xa0712d68",
      estimatedGas: 100_000,
      chainId: 14601,
    },
    fields: {
      projectId: "string",
      user: "string",
      target: "string",
      selector: "string",
      estimatedGas: "integer",
      chainId: "integer",
      clientNonce: "string",
    },
    strict: false,
    auth: "key",
  },
];

/** A value that can never satisfy a field of the given kind. */
function wrongFor(kind: FieldKind): fc.Arbitrary<unknown> {
  const notString = fc.oneof(
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 3 }),
    fc.object({ maxDepth: 1 }),
  );
  switch (kind) {
    case "string":
    case "wei":
      return kind === "wei"
        ? fc.oneof(
            notString.filter((v) => v !== null),
            fc.constantFrom("-1", "1.5", "0x10", "", "1e3"),
          )
        : notString;
    case "integer":
      return fc.oneof(
        // As query text, a string of digits would be a valid integer.
        fc.string().filter((v) => !/^-?[0-9]+$/.test(v)),
        fc.boolean(),
        fc.constant(null),
        fc.double({ noInteger: true, noNaN: true }),
        fc.constant(2 ** 60),
      );
    case "boolean":
      return fc.oneof(
        fc.integer(),
        fc.string({ minLength: 2 }).filter((s) => !["true", "false"].includes(s)),
      );
    case "strings":
      return fc.oneof(
        fc.string(),
        fc.integer(),
        fc
          .array(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 3 })
          .filter((a) => a.some((s) => !["sponsor", "read", "manage"].includes(s))),
      );
  }
}

type Mutation =
  | { kind: "field"; field: string; value: unknown }
  | { kind: "drop"; field: string }
  | { kind: "unknown"; field: string }
  | { kind: "raw"; payload: string }
  | { kind: "notObject"; value: unknown }
  | { kind: "param"; name: string; value: string }
  | { kind: "query"; name: string; value: unknown }
  | { kind: "auth"; value: string }
  | { kind: "contentType"; value: string };

function mutationsFor(route: Route): fc.Arbitrary<Mutation> {
  const options: fc.Arbitrary<Mutation>[] = [
    fc
      .oneof(
        fc.string({ maxLength: 200 }).map((s) => `Bearer ${s.replace(/\s/g, "x")}`),
        fc.string({ maxLength: 100 }),
        fc
          .string({ minLength: 40, maxLength: 60 })
          .map((s) => `Bearer gsk_${s.replace(/[^A-Za-z0-9]/g, "a")}`),
      )
      .filter((v) => !/[\r\n]/.test(v))
      .map((value) => ({ kind: "auth" as const, value })),
  ];
  const paramNames = Object.keys(route.params);
  if (paramNames.length > 0) {
    options.push(
      fc.record({
        kind: fc.constant("param" as const),
        name: fc.constantFrom(...paramNames),
        value: fc
          .string({ minLength: 1, maxLength: 250 })
          // "." and ".." are path dot-segments, which URL normalisation resolves to another route.
          .filter(
            (v) => v !== "." && v !== ".." && !realValues.has(v) && !Object.values(route.params).includes(v),
          ),
      }),
    );
  }
  if (route.query) {
    const q = route.query;
    options.push(
      fc
        .constantFrom(...Object.keys(q))
        .chain((name) => wrongFor(q[name]!).map((value) => ({ kind: "query" as const, name, value }))),
      fc
        .string({ minLength: 1, maxLength: 10 })
        .filter((n) => /^[a-z]+$/.test(n) && !(n in q))
        .map((name) => ({ kind: "query" as const, name, value: "1" })),
    );
  }
  if (route.body && route.fields) {
    const fields = route.fields;
    const required = Object.keys(route.body);
    options.push(
      fc
        .constantFrom(...Object.keys(fields))
        .chain((field) =>
          wrongFor(fields[field]!).map((value) => ({ kind: "field" as const, field, value })),
        ),
      fc.constantFrom(...required).map((field) => ({ kind: "drop" as const, field })),
      fc
        .string({ maxLength: 300 })
        .filter((s) => {
          try {
            JSON.parse(s);
            return false;
          } catch {
            return true;
          }
        })
        .map((payload) => ({ kind: "raw" as const, payload })),
      fc
        .oneof(
          fc.integer(),
          fc.string(),
          fc.array(fc.anything(), { maxLength: 3 }),
          fc.constant(null),
          fc.boolean(),
        )
        .map((value) => ({ kind: "notObject" as const, value })),
      fc
        .constantFrom(
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "application/xml",
        )
        .map((value) => ({ kind: "contentType" as const, value })),
    );
    if (route.strict) {
      options.push(
        fc
          .string({ minLength: 1, maxLength: 20 })
          .filter((f) => !(f in fields) && f !== "__proto__")
          .map((field) => ({ kind: "unknown" as const, field })),
      );
    }
  }
  return fc.oneof(...options);
}

function build(route: Route, m: Mutation) {
  const params = { ...route.params };
  if (m.kind === "param") params[m.name] = m.value;
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(params[name]!));
  const query =
    m.kind === "query"
      ? `?${m.name}=${encodeURIComponent(typeof m.value === "string" ? m.value : JSON.stringify(m.value))}`
      : "";
  const headers: Record<string, string> = {
    authorization: m.kind === "auth" ? m.value : `Bearer ${route.auth === "owner" ? owner : apiKey}`,
  };
  let payload: string | undefined;
  if (route.body) {
    const body: Record<string, unknown> = { ...route.body };
    if (m.kind === "field") body[m.field] = m.value;
    if (m.kind === "drop") delete body[m.field];
    if (m.kind === "unknown") body[m.field] = 1;
    payload = m.kind === "raw" ? m.payload : JSON.stringify(m.kind === "notObject" ? m.value : body);
    headers["content-type"] = m.kind === "contentType" ? m.value : "application/json";
  }
  return { method: route.method, url: `${path}${query}`, headers, payload };
}

async function snapshot(): Promise<string> {
  const tables: Record<string, string> = {
    developers: "id, email, subject",
    organizations: "*",
    org_members: "*",
    projects: "*",
    funding_accounts: "*",
    api_keys: "id, project_id, digest, rate_limit, scopes, revoked_at",
    allowlist_entries: "*",
    ledger_entries: "*",
    sponsorships: "*",
    daily_usage: "*",
  };
  const parts: string[] = [];
  for (const [table, columns] of Object.entries(tables)) {
    const rows = await t.db.query<{ h: string | null; n: number }>(
      `SELECT count(*)::int AS n, md5(string_agg(x::text, '|' ORDER BY x::text)) AS h FROM (SELECT ${columns} FROM ${table}) x`,
    );
    parts.push(`${table}:${rows[0]!.n}:${rows[0]!.h}`);
  }
  return parts.join("\n");
}

describe("malformed input never hurts", () => {
  it("every route answers malformed bodies, params and headers with a 4xx problem+json and changes nothing", async () => {
    const all = routes();
    const seen = new Set<string>();
    const before = await snapshot();
    const arb = fc.constantFrom(...all).chain((route) => mutationsFor(route).map((m) => ({ route, m })));
    await fc.assert(
      fc.asyncProperty(arb, async ({ route, m }) => {
        const req = build(route, m);
        const res = await t.request(req);
        const label = `${route.method} ${route.path} ${JSON.stringify(m).slice(0, 200)} → ${res.statusCode} ${res.body.slice(0, 200)}`;
        assert.ok(res.statusCode >= 400 && res.statusCode < 500, label);
        assert.match(String(res.headers["content-type"]), /^application\/problem\+json/, label);
        const body = res.json();
        assert.equal(body.status, res.statusCode, label);
        assert.match(body.code, /^[a-z_]+$/, label);
        seen.add(`${res.statusCode} ${body.code}`);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 1500) },
    );
    assert.equal(await snapshot(), before, "no malformed request may change the database");
    // The generator must reach every kind of refusal, or the property proves little.
    for (const expected of [
      "400 invalid_request",
      "400 malformed_json",
      "401 unauthorized",
      "404 not_found",
      "415 unsupported_media_type",
    ]) {
      assert.ok(seen.has(expected), `never saw ${expected}: ${[...seen].join(", ")}`);
    }
  });
});
