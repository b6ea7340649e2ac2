import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { startTestApp, type TestApp } from "./support/app.ts";

/**
 * Every route × every kind of caller, as one table (DESIGN.md §3: deny by default; another
 * tenant's project is 404). Each cell is the status the caller must get.
 */
const PRINCIPALS = [
  "owner",
  "admin",
  "developer",
  "viewer",
  "nonmember",
  "key:sponsor",
  "key:read",
  "key:manage",
  "none",
] as const;
type Who = (typeof PRINCIPALS)[number];
type Row = Record<Who, number>;

const row = (values: number[]): Row => Object.fromEntries(PRINCIPALS.map((p, i) => [p, values[i]!])) as Row;
//                          own  adm  dev  view  non  kSp  kRd  kMg  none
const READ_PROJECT = row([200, 200, 200, 200, 404, 403, 200, 200, 401]);
const KEYS_READ = row([200, 200, 200, 200, 404, 403, 403, 200, 401]);
const PUBLIC = row([200, 200, 200, 200, 200, 200, 200, 200, 200]);

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
let t: TestApp;
const creds = {} as Record<Who, string | undefined>;
let memberId = 0;
let counter = 0;

before(async () => {
  // The operator is deliberately no member of any organization: operators see the service, not tenants.
  t = await startTestApp({ env: { OPERATOR_EMAILS: "nonmember@matrix.example" } });
  for (const who of ["owner", "admin", "developer", "viewer", "nonmember"] as const) {
    creds[who] = await t.token(`${who}@matrix.example`);
  }
  const org = await t.request({
    method: "POST",
    url: "/orgs",
    token: creds.owner,
    payload: { name: "M", slug: "matrix" },
  });
  assert.equal(org.statusCode, 201);
  for (const role of ["admin", "developer", "viewer"] as const) {
    const res = await t.request({
      method: "POST",
      url: "/orgs/matrix/members",
      token: creds.owner,
      payload: { email: `${role}@matrix.example`, role },
    });
    assert.equal(res.statusCode, 201);
  }
  const target = await t.request({
    method: "POST",
    url: "/orgs/matrix/members",
    token: creds.owner,
    payload: { email: "target@matrix.example", role: "viewer" },
  });
  memberId = target.json().developer_id;
  const p = await t.request({
    method: "POST",
    url: "/projects",
    token: creds.owner,
    payload: { id: "mxp", name: "M", owner: "matrix" },
  });
  assert.equal(p.statusCode, 201);
  // Key 1 exists only to be revoked by the DELETE row of the matrix.
  const victim = await t.request({
    method: "POST",
    url: "/projects/mxp/apikeys",
    token: creds.owner,
    payload: { rateLimit: 1 },
  });
  assert.equal(victim.json().id, 1);
  for (const scope of ["sponsor", "read", "manage"] as const) {
    const k = await t.request({
      method: "POST",
      url: "/projects/mxp/apikeys",
      token: creds.owner,
      payload: { rateLimit: 100_000, scopes: [scope] },
    });
    creds[`key:${scope}`] = k.json().apiKey;
  }
  const allow = await t.request({
    method: "POST",
    url: "/projects/mxp/allowlist",
    token: creds.owner,
    payload: { targetContract: GAME, functionSelector: "0xa0712d68" },
  });
  assert.equal(allow.statusCode, 201);
  await creditDeposit(t.db, { projectId: "mxp", reference: "matrix", amountWei: 10n ** 22n });
});
after(() => t.close());

interface RouteCase {
  name: string;
  request: () => {
    method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
    url: string;
    payload?: Record<string, unknown>;
  };
  expect: Row;
  /** Runs before each call, as the owner (recreates what a previous call removed). */
  setup?: () => Promise<void>;
}

const ensureEntry = async () => {
  await t.request({
    method: "POST",
    url: "/projects/mxp/allowlist",
    token: creds.owner,
    payload: { targetContract: GAME, functionSelector: "0x12345678" },
  });
};

const RULE = { kind: "sender_count_cap", maxOperations: 5, window: "day" };
const ensureRule = async () => {
  await t.request({ method: "PUT", url: "/projects/mxp/policies/matrix", token: creds.owner, payload: RULE });
};
const dropRule = async () => {
  await t.request({ method: "DELETE", url: "/projects/mxp/policies/matrix", token: creds.owner });
};
const CHECK_BODY = {
  projectId: "mxp",
  user: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  target: GAME,
  selector: "0xa0712d68",
  estimatedGas: 100_000,
  chainId: 14601,
};

// Webhooks: read with project:read, changed by admins and owners only (never an API key: the
// secrets involved are as sensitive as the project's settings).
const WEBHOOK_WRITE_CREATED = row([201, 201, 403, 403, 404, 403, 403, 403, 401]);
const WEBHOOK_WRITE = row([200, 200, 403, 403, 404, 403, 403, 403, 401]);
let endpointId = 0;
let deliveryId = 0;
const ensureEndpoint = async () => {
  const res = await t.request({
    method: "POST",
    url: "/projects/mxp/webhooks",
    token: creds.owner,
    payload: { url: "https://hooks.example.com/matrix", eventTypes: ["*"] },
  });
  endpointId = res.json().id;
  t.secrets.add(res.json().secret);
};
const dropEndpoints = async () => {
  const list = await t.request({ method: "GET", url: "/projects/mxp/webhooks", token: creds.owner });
  for (const e of list.json() as { id: number }[]) {
    await t.request({ method: "DELETE", url: `/projects/mxp/webhooks/${e.id}`, token: creds.owner });
  }
};
/** An endpoint with one delivery (a deposit credit is an event every "*" endpoint gets). */
const ensureDelivery = async () => {
  if (deliveryId) return;
  await ensureEndpoint();
  await creditDeposit(t.db, { projectId: "mxp", reference: `matrix-delivery-${++counter}`, amountWei: 1n });
  const log = await t.request({
    method: "GET",
    url: `/projects/mxp/webhooks/${endpointId}/deliveries`,
    token: creds.owner,
  });
  deliveryId = log.json().deliveries[0].id;
};
const APPROVAL = { url: "https://approvals.example.com/matrix", timeoutMs: 500, failMode: "open" };
const ensureApproval = async () => {
  await t.request({
    method: "PUT",
    url: "/projects/mxp/approval-webhook",
    token: creds.owner,
    payload: APPROVAL,
  });
};

const ROUTES: RouteCase[] = [
  { name: "GET /health", request: () => ({ method: "GET", url: "/health" }), expect: PUBLIC },
  { name: "GET /health/ready", request: () => ({ method: "GET", url: "/health/ready" }), expect: PUBLIC },
  // Open without METRICS_TOKEN (test/observability.test.ts covers the token).
  { name: "GET /metrics", request: () => ({ method: "GET", url: "/metrics" }), expect: PUBLIC },
  {
    name: "GET /blockchain/chains",
    request: () => ({ method: "GET", url: "/blockchain/chains" }),
    expect: PUBLIC,
  },
  {
    name: "GET /policies/kinds",
    request: () => ({ method: "GET", url: "/policies/kinds" }),
    expect: PUBLIC,
  },
  {
    name: "GET /webhooks/event-types",
    request: () => ({ method: "GET", url: "/webhooks/event-types" }),
    expect: PUBLIC,
  },
  {
    name: "GET /blockchain/chains/:chainId/parity",
    request: () => ({ method: "GET", url: "/blockchain/chains/14601/parity" }),
    expect: row([403, 403, 403, 403, 200, 403, 403, 403, 401]),
  },
  {
    // JSON-RPC answers HTTP 200 to everyone; who may sponsor is in the JSON-RPC result or error
    // (test/rpc.test.ts checks those).
    name: "POST /rpc",
    request: () => ({
      method: "POST",
      url: "/rpc",
      payload: { jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: [] },
    }),
    expect: PUBLIC,
  },
  {
    name: "GET /orgs",
    request: () => ({ method: "GET", url: "/orgs" }),
    expect: row([200, 200, 200, 200, 200, 403, 403, 403, 401]),
  },
  {
    name: "POST /orgs",
    request: () => ({ method: "POST", url: "/orgs", payload: { name: "N", slug: `new-org-${counter++}` } }),
    expect: row([201, 201, 201, 201, 201, 403, 403, 403, 401]),
  },
  {
    name: "GET /orgs/:orgId/members",
    request: () => ({ method: "GET", url: "/orgs/matrix/members" }),
    expect: row([200, 200, 200, 200, 404, 403, 403, 403, 401]),
  },
  {
    name: "POST /orgs/:orgId/members",
    request: () => ({
      method: "POST",
      url: "/orgs/matrix/members",
      payload: { email: `invitee${counter++}@matrix.example`, role: "viewer" },
    }),
    expect: row([201, 201, 403, 403, 404, 403, 403, 403, 401]),
  },
  {
    name: "PATCH /orgs/:orgId/members/:developerId",
    request: () => ({
      method: "PATCH",
      url: `/orgs/matrix/members/${memberId}`,
      payload: { role: "viewer" },
    }),
    expect: row([200, 403, 403, 403, 404, 403, 403, 403, 401]),
  },
  {
    name: "GET /orgs/:orgId/funds/parity",
    request: () => ({ method: "GET", url: "/orgs/matrix/funds/parity" }),
    expect: row([200, 200, 200, 200, 404, 403, 403, 403, 401]),
  },
  {
    name: "POST /projects",
    request: () => ({
      method: "POST",
      url: "/projects",
      payload: { id: `np-${counter++}`, name: "N", owner: "matrix" },
    }),
    expect: row([201, 201, 403, 403, 404, 403, 403, 403, 401]),
  },
  {
    name: "GET /projects",
    // A sponsor-only key reads no project fields here either (as on GET /projects/:id).
    request: () => ({ method: "GET", url: "/projects" }),
    expect: row([200, 200, 200, 200, 200, 403, 200, 200, 401]),
  },
  {
    name: "GET /projects/funds/parity-report",
    request: () => ({ method: "GET", url: "/projects/funds/parity-report" }),
    expect: row([200, 200, 200, 200, 200, 403, 200, 200, 401]),
  },
  {
    name: "GET /projects/:id",
    request: () => ({ method: "GET", url: "/projects/mxp" }),
    expect: READ_PROJECT,
  },
  {
    name: "PATCH /projects/:id",
    request: () => ({ method: "PATCH", url: "/projects/mxp", payload: { name: "Matrix" } }),
    expect: row([200, 200, 403, 403, 404, 403, 403, 403, 401]),
  },
  {
    name: "GET /projects/:id/balance",
    request: () => ({ method: "GET", url: "/projects/mxp/balance" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/funding-accounts",
    request: () => ({ method: "GET", url: "/projects/mxp/funding-accounts" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/deposits",
    request: () => ({ method: "GET", url: "/projects/mxp/deposits" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/funding-accounts/:chainId",
    request: () => ({ method: "GET", url: "/projects/mxp/funding-accounts/14601" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/apikeys",
    request: () => ({ method: "GET", url: "/projects/mxp/apikeys" }),
    expect: KEYS_READ,
  },
  {
    name: "POST /projects/:id/apikeys",
    request: () => ({
      method: "POST",
      url: "/projects/mxp/apikeys",
      payload: { rateLimit: 10, scopes: ["manage"] },
    }),
    expect: row([201, 201, 201, 403, 404, 403, 403, 201, 401]),
  },
  {
    name: "PATCH /projects/:id/apikeys/:keyId",
    request: () => ({ method: "PATCH", url: "/projects/mxp/apikeys/1", payload: { name: "Matrix" } }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "DELETE /projects/:id/apikeys/:keyId",
    request: () => ({ method: "DELETE", url: "/projects/mxp/apikeys/1" }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "GET /projects/:id/allowlist",
    request: () => ({ method: "GET", url: "/projects/mxp/allowlist" }),
    expect: READ_PROJECT,
  },
  {
    name: "POST /projects/:id/allowlist",
    request: () => ({
      method: "POST",
      url: "/projects/mxp/allowlist",
      payload: { targetContract: GAME, functionSelector: "0xa0712d68" },
    }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "PATCH /projects/:id/allowlist",
    setup: ensureEntry,
    request: () => ({
      method: "PATCH",
      url: "/projects/mxp/allowlist",
      payload: { targetContract: GAME, functionSelector: "0x12345678", name: "Matrix" },
    }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "DELETE /projects/:id/allowlist",
    setup: ensureEntry,
    request: () => ({
      method: "DELETE",
      url: "/projects/mxp/allowlist",
      payload: { targetContract: GAME, functionSelector: "0x12345678" },
    }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "GET /projects/:id/analytics/money",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/money" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/analytics/overview",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/overview" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/analytics/events",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/events" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/refusals",
    request: () => ({ method: "GET", url: "/projects/mxp/refusals" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/analytics/refusals",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/refusals" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/analytics/daily",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/daily" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/analytics/senders",
    request: () => ({ method: "GET", url: "/projects/mxp/analytics/senders" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/policies",
    request: () => ({ method: "GET", url: "/projects/mxp/policies" }),
    expect: READ_PROJECT,
  },
  {
    // Policies are changed by whoever may change the allowlist.
    name: "PUT /projects/:id/policies/:ruleId",
    setup: dropRule,
    request: () => ({ method: "PUT", url: "/projects/mxp/policies/matrix", payload: RULE }),
    expect: row([201, 201, 201, 403, 404, 403, 403, 201, 401]),
  },
  {
    name: "PATCH /projects/:id/policies/:ruleId",
    setup: ensureRule,
    request: () => ({ method: "PATCH", url: "/projects/mxp/policies/matrix", payload: { name: "Matrix" } }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "DELETE /projects/:id/policies/:ruleId",
    setup: ensureRule,
    request: () => ({ method: "DELETE", url: "/projects/mxp/policies/matrix" }),
    expect: row([200, 200, 200, 403, 404, 403, 403, 200, 401]),
  },
  {
    name: "GET /projects/:id/policies/:ruleId/usage",
    setup: ensureRule,
    request: () => ({ method: "GET", url: "/projects/mxp/policies/matrix/usage" }),
    expect: READ_PROJECT,
  },
  {
    name: "GET /projects/:id/webhooks",
    request: () => ({ method: "GET", url: "/projects/mxp/webhooks" }),
    expect: READ_PROJECT,
  },
  {
    name: "POST /projects/:id/webhooks",
    setup: dropEndpoints,
    request: () => ({
      method: "POST",
      url: "/projects/mxp/webhooks",
      payload: { url: "https://hooks.example.com/created", eventTypes: ["balance.low"] },
    }),
    expect: WEBHOOK_WRITE_CREATED,
  },
  {
    name: "GET /projects/:id/webhooks/:webhookId",
    setup: ensureDelivery,
    request: () => ({ method: "GET", url: `/projects/mxp/webhooks/${endpointId}` }),
    expect: READ_PROJECT,
  },
  {
    name: "PATCH /projects/:id/webhooks/:webhookId",
    setup: ensureDelivery,
    request: () => ({
      method: "PATCH",
      url: `/projects/mxp/webhooks/${endpointId}`,
      payload: { enabled: true },
    }),
    expect: WEBHOOK_WRITE,
  },
  {
    name: "POST /projects/:id/webhooks/:webhookId/rotate-secret",
    setup: ensureDelivery,
    request: () => ({ method: "POST", url: `/projects/mxp/webhooks/${endpointId}/rotate-secret` }),
    expect: WEBHOOK_WRITE,
  },
  {
    name: "GET /projects/:id/webhooks/:webhookId/deliveries",
    setup: ensureDelivery,
    request: () => ({ method: "GET", url: `/projects/mxp/webhooks/${endpointId}/deliveries` }),
    expect: READ_PROJECT,
  },
  {
    name: "POST /projects/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver",
    setup: ensureDelivery,
    request: () => ({
      method: "POST",
      url: `/projects/mxp/webhooks/${endpointId}/deliveries/${deliveryId}/redeliver`,
    }),
    expect: row([202, 202, 403, 403, 404, 403, 403, 403, 401]),
  },
  {
    name: "DELETE /projects/:id/webhooks/:webhookId",
    setup: async () => {
      deliveryId = 0;
      await ensureEndpoint();
    },
    request: () => ({ method: "DELETE", url: `/projects/mxp/webhooks/${endpointId}` }),
    expect: WEBHOOK_WRITE,
  },
  {
    name: "GET /projects/:id/approval-webhook",
    request: () => ({ method: "GET", url: "/projects/mxp/approval-webhook" }),
    expect: READ_PROJECT,
  },
  {
    name: "PUT /projects/:id/approval-webhook",
    request: () => ({ method: "PUT", url: "/projects/mxp/approval-webhook", payload: APPROVAL }),
    expect: WEBHOOK_WRITE,
  },
  {
    name: "DELETE /projects/:id/approval-webhook",
    setup: ensureApproval,
    request: () => ({ method: "DELETE", url: "/projects/mxp/approval-webhook" }),
    expect: WEBHOOK_WRITE,
  },
  {
    name: "GET /projects/:id/balance-alert",
    request: () => ({ method: "GET", url: "/projects/mxp/balance-alert" }),
    expect: READ_PROJECT,
  },
  {
    name: "PUT /projects/:id/balance-alert",
    request: () => ({ method: "PUT", url: "/projects/mxp/balance-alert", payload: { thresholdWei: null } }),
    expect: WEBHOOK_WRITE,
  },
  {
    // The development sign-in (local issuer, loopback clients, never in production): public.
    name: "POST /auth/dev-token",
    request: () => ({ method: "POST", url: "/auth/dev-token", payload: { email: "dev@matrix.example" } }),
    expect: row([201, 201, 201, 201, 201, 201, 201, 201, 201]),
  },
  { name: "GET /dashboard", request: () => ({ method: "GET", url: "/dashboard" }), expect: PUBLIC },
  {
    name: "GET /dashboard/:file",
    request: () => ({ method: "GET", url: "/dashboard/app.js" }),
    expect: PUBLIC,
  },
  {
    name: "POST /sponsor/check",
    request: () => ({ method: "POST", url: "/sponsor/check", payload: CHECK_BODY }),
    expect: row([401, 401, 401, 401, 401, 200, 403, 403, 401]),
  },
  {
    name: "GET /projects/:id/funds/parity",
    request: () => ({ method: "GET", url: "/projects/mxp/funds/parity" }),
    expect: READ_PROJECT,
  },
  {
    name: "POST /sponsor/authorize",
    request: () => ({
      method: "POST",
      url: "/sponsor/authorize",
      payload: {
        projectId: "mxp",
        user: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        target: GAME,
        selector: "0xa0712d68",
        estimatedGas: 100_000,
        chainId: 14601,
      },
    }),
    expect: row([401, 401, 401, 401, 401, 200, 403, 403, 401]),
  },
];

describe("access matrix: every route × every caller", () => {
  it("covers every route the app serves", () => {
    const spec = t.app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const served = Object.entries(spec.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
    );
    const covered = new Set(ROUTES.map((r) => r.name));
    assert.deepEqual(
      served.filter((r) => !covered.has(r)),
      [],
    );
  });

  for (const route of ROUTES) {
    it(route.name, async () => {
      const got = {} as Row;
      for (const who of PRINCIPALS) {
        await route.setup?.();
        const res = await t.request({ ...route.request(), token: creds[who] });
        got[who] = res.statusCode;
        if (res.statusCode >= 400) assert.match(String(res.headers["content-type"]), /problem\+json/);
      }
      assert.deepEqual(got, route.expect);
    });
  }

  it("a project of another tenant answers 404 exactly like a missing one", async () => {
    const a = await t.request({ method: "GET", url: "/projects/mxp", token: creds.nonmember });
    const b = await t.request({ method: "GET", url: "/projects/does-not-exist", token: creds.nonmember });
    assert.equal(a.statusCode, 404);
    assert.equal(a.json().detail, b.json().detail);
  });
});
