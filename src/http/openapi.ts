import type { TSchema } from "@sinclair/typebox";
import type { RouteOptions } from "fastify";
import { POLICY_REFUSAL_CODES } from "../policies/kinds.ts";
import { ERRORS, type ErrorCode } from "./catalogue.ts";
import { problemBody } from "./problem.ts";

/**
 * What the OpenAPI document says of each route beyond its schemas: a stable operationId, a
 * summary, who may call it, and every error code it can answer. The route files describe their
 * inputs and successes; this table describes the rest, so that a client generator gets named
 * operations and a client author sees, per route, which refusals to handle.
 *
 * Codes every route of a kind can answer are added from the route's shape (a body, path
 * parameters, credentials, a database read); `errors` lists the route's own. The response
 * validator in the tests checks every answered `code` against this table.
 */
export interface RouteDoc {
  operationId: string;
  summary?: string;
  /** Who may call it: no credentials, a bearer credential, or the JSON-RPC endpoint's own. */
  access: "public" | "bearer" | "rpc";
  /** Refusals of this route beyond those its shape implies. */
  errors?: ErrorCode[];
  /** The route never reads the database (liveness, configuration). */
  noDatabase?: boolean;
}

const member: ErrorCode[] = ["not_found", "forbidden"];

/** The refusals of a project's policy rules (src/policies/kinds.ts), each carrying `ruleId`. */
const POLICY_CODES: ErrorCode[] = [...POLICY_REFUSAL_CODES];

export const ROUTE_DOCS: Record<string, RouteDoc> = {
  "GET /health": { operationId: "getHealth", access: "public", noDatabase: true },
  "GET /health/ready": { operationId: "getReadiness", access: "public" },
  // Prometheus; its own token (METRICS_TOKEN) when set, not an API key or a developer token.
  "GET /metrics": { operationId: "getMetrics", access: "public", errors: ["unauthorized"], noDatabase: true },
  "GET /blockchain/chains": { operationId: "listChains", access: "public", noDatabase: true },
  "GET /blockchain/chains/:chainId/parity": {
    operationId: "getChainParity",
    access: "bearer",
    errors: ["forbidden", "not_found"],
  },
  "POST /orgs": {
    operationId: "createOrganization",
    access: "bearer",
    errors: ["forbidden", "conflict", "quota_exceeded"],
  },
  "GET /orgs": { operationId: "listOrganizations", access: "bearer", errors: ["forbidden"] },
  "GET /orgs/:orgId/members": {
    operationId: "listMembers",
    summary: "Members of an organization, with their roles",
    access: "bearer",
    errors: member,
  },
  "POST /orgs/:orgId/members": {
    operationId: "upsertMember",
    access: "bearer",
    errors: [...member, "last_owner"],
  },
  "PATCH /orgs/:orgId/members/:developerId": {
    operationId: "changeMemberRole",
    access: "bearer",
    errors: [...member, "last_owner"],
  },
  "GET /orgs/:orgId/funds/parity": {
    operationId: "getOrganizationParity",
    access: "bearer",
    errors: member,
  },
  "POST /projects": {
    operationId: "createProject",
    access: "bearer",
    errors: [...member, "conflict", "quota_exceeded"],
  },
  "GET /projects": { operationId: "listProjects", access: "bearer", errors: ["forbidden"] },
  "GET /projects/funds/parity-report": {
    operationId: "getParityReport",
    access: "bearer",
    errors: ["forbidden"],
  },
  "GET /projects/:id": {
    operationId: "getProject",
    summary: "A project with its settings",
    access: "bearer",
    errors: member,
  },
  "PATCH /projects/:id": { operationId: "updateProject", access: "bearer", errors: member },
  "GET /projects/:id/balance": {
    operationId: "getBalance",
    summary: "The gas tank: balance, reserved and available wei, and what is left of today's cap",
    access: "bearer",
    errors: member,
  },
  "POST /projects/:id/apikeys": { operationId: "createApiKey", access: "bearer", errors: member },
  "GET /projects/:id/apikeys": {
    operationId: "listApiKeys",
    summary: "The project's API keys, by preview (never the key itself)",
    access: "bearer",
    errors: member,
  },
  "PATCH /projects/:id/apikeys/:keyId": { operationId: "renameApiKey", access: "bearer", errors: member },
  "DELETE /projects/:id/apikeys/:keyId": { operationId: "revokeApiKey", access: "bearer", errors: member },
  "GET /projects/:id/allowlist": {
    operationId: "listAllowlist",
    summary: "The (contract, function) pairs the project sponsors, enabled and disabled",
    access: "bearer",
    errors: member,
  },
  "POST /projects/:id/allowlist": {
    operationId: "addAllowlistEntry",
    access: "bearer",
    errors: [...member, "allowlist_full"],
  },
  "PATCH /projects/:id/allowlist": {
    operationId: "changeAllowlistEntry",
    access: "bearer",
    errors: member,
  },
  "DELETE /projects/:id/allowlist": {
    operationId: "removeAllowlistEntry",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/funding-accounts": {
    operationId: "listFundingAccounts",
    summary: "The project's deposit addresses, one per chain provisioned so far",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/funding-accounts/:chainId": {
    operationId: "getFundingAccount",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/deposits": {
    operationId: "listDeposits",
    access: "bearer",
    errors: [...member, "invalid_cursor"],
  },
  "GET /projects/:id/analytics/overview": {
    operationId: "getAnalyticsOverview",
    summary: "Totals of the project's sponsorships: counts by status, gas and cost",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/analytics/events": {
    operationId: "listEvents",
    access: "bearer",
    errors: [...member, "invalid_cursor"],
  },
  "GET /projects/:id/refusals": {
    operationId: "listRefusals",
    access: "bearer",
    errors: [...member, "invalid_cursor"],
  },
  "GET /projects/:id/analytics/refusals": {
    operationId: "getRefusalCounts",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/analytics/money": {
    operationId: "getMoney",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/analytics/daily": {
    operationId: "getDailyAnalytics",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/analytics/senders": {
    operationId: "listTopSenders",
    access: "bearer",
    errors: member,
  },
  "GET /policies/kinds": { operationId: "listPolicyKinds", access: "public", noDatabase: true },
  "GET /projects/:id/policies": {
    operationId: "listPolicies",
    summary: "The project's policy rules, the daily cap among them when set",
    access: "bearer",
    errors: member,
  },
  "PUT /projects/:id/policies/:ruleId": {
    operationId: "putPolicy",
    access: "bearer",
    errors: [...member, "invalid_policy"],
  },
  "PATCH /projects/:id/policies/:ruleId": {
    operationId: "changePolicy",
    access: "bearer",
    errors: [...member, "invalid_policy"],
  },
  "DELETE /projects/:id/policies/:ruleId": { operationId: "deletePolicy", access: "bearer", errors: member },
  "GET /projects/:id/policies/:ruleId/usage": {
    operationId: "getPolicyUsage",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/funds/parity": {
    operationId: "getProjectParity",
    summary: "Whether the project's cached balance equals the sum of its ledger",
    access: "bearer",
    errors: member,
  },
  "POST /sponsor/authorize": {
    operationId: "authorizeSponsorship",
    access: "bearer",
    errors: [
      "forbidden",
      "not_allowlisted",
      "account_not_supported",
      "insufficient_balance",
      "daily_cap_exceeded",
      ...POLICY_CODES,
      "idempotency_key_reused",
      "unsupported_chain",
      "chain_not_configured",
      "fee_oracle_stale",
      "chain_unavailable",
      "approval_denied",
      "approval_unavailable",
    ],
  },
  "POST /sponsor/check": {
    operationId: "checkSponsorship",
    summary:
      "Dry run: would authorize grant this request now, and if not, which code and policy rule refuse it? Reserves nothing",
    access: "bearer",
    errors: ["forbidden"],
  },
  // Webhooks (src/webhooks/).
  "GET /webhooks/event-types": { operationId: "listWebhookEventTypes", access: "public", noDatabase: true },
  "GET /projects/:id/webhooks": {
    operationId: "listWebhooks",
    summary: "The project's event endpoints (never their secrets)",
    access: "bearer",
    errors: member,
  },
  "POST /projects/:id/webhooks": {
    operationId: "createWebhook",
    access: "bearer",
    errors: [...member, "webhooks_full"],
  },
  "GET /projects/:id/webhooks/:webhookId": {
    operationId: "getWebhook",
    summary: "One event endpoint (never its secret)",
    access: "bearer",
    errors: member,
  },
  "PATCH /projects/:id/webhooks/:webhookId": {
    operationId: "updateWebhook",
    access: "bearer",
    errors: member,
  },
  "DELETE /projects/:id/webhooks/:webhookId": {
    operationId: "deleteWebhook",
    access: "bearer",
    errors: member,
  },
  "POST /projects/:id/webhooks/:webhookId/rotate-secret": {
    operationId: "rotateWebhookSecret",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/webhooks/:webhookId/deliveries": {
    operationId: "listWebhookDeliveries",
    access: "bearer",
    errors: member,
  },
  "POST /projects/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver": {
    operationId: "redeliverWebhook",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/approval-webhook": {
    operationId: "getApprovalWebhook",
    summary: "Whether an approval webhook is set, and its URL, timeout and fail mode (never its secret)",
    access: "bearer",
    errors: member,
  },
  "PUT /projects/:id/approval-webhook": {
    operationId: "setApprovalWebhook",
    access: "bearer",
    errors: member,
  },
  "DELETE /projects/:id/approval-webhook": {
    operationId: "removeApprovalWebhook",
    access: "bearer",
    errors: member,
  },
  "GET /projects/:id/balance-alert": {
    operationId: "getBalanceAlert",
    summary: "The low-balance threshold of the gas tank",
    access: "bearer",
    errors: member,
  },
  "PUT /projects/:id/balance-alert": { operationId: "setBalanceAlert", access: "bearer", errors: member },
  // JSON-RPC answers its refusals in the body of a 200 (data.code); only what fails before the
  // JSON-RPC layer is problem+json.
  "POST /rpc": { operationId: "paymasterRpc", access: "rpc" },
  // The web dashboard (src/dashboard/): static files, public (the page signs in, then calls the
  // API above with the developer's token), and the development sign-in, which exists only with
  // the local issuer outside production.
  "GET /dashboard": { operationId: "getDashboard", access: "public", noDatabase: true },
  "GET /dashboard/:file": {
    operationId: "getDashboardFile",
    access: "public",
    errors: ["not_found"],
    noDatabase: true,
  },
  "POST /auth/dev-token": {
    operationId: "createDevToken",
    summary: "Development sign-in: a developer token from the local issuer (absent with OIDC)",
    access: "public",
    errors: ["forbidden"],
    noDatabase: true,
  },
};

/** The statuses whose bodies are problem+json, in the order a reader meets them. */
function codesFor(route: RouteOptions, doc: RouteDoc): ErrorCode[] {
  const schema = (route.schema ?? {}) as { body?: unknown; params?: unknown; querystring?: unknown };
  const codes: ErrorCode[] = [];
  if (doc.access === "rpc") {
    codes.push("unsupported_media_type", "payload_too_large");
  } else {
    if (schema.body) codes.push("malformed_json", "unsupported_media_type", "payload_too_large");
    // Every route refuses a NUL in its query string, whether or not it reads one.
    codes.push("invalid_request");
    if (schema.params) codes.push("uri_too_long");
    if (doc.access === "bearer") codes.push("unauthorized", "identity_conflict", "rate_limited");
  }
  // Any request can be refused by the HTTP parser before routing: malformed, too slow to send
  // its headers, or with headers too large.
  codes.push(...(doc.errors ?? []), "malformed_request", "request_timeout", "headers_too_large");
  codes.push("internal_error");
  if (!doc.noDatabase) codes.push("unavailable");
  return [...new Set(codes)];
}

const EXAMPLE_REQUEST_ID = "5f0c6e9e-7d0a-4c47-9a43-0b8e3f7f2a11";

/** One response per status, with an example per code the route can answer with it. */
function problemResponses(codes: ErrorCode[]): Record<number, TSchema> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERRORS[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<number, TSchema> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const retry = status === 429 || status === 503;
    out[status] = {
      description: group.map((c) => `\`${c}\`: ${ERRORS[c].when}`).join("\n\n"),
      ...(retry
        ? {
            headers: {
              "retry-after": { type: "integer", description: "Seconds to wait before retrying" },
            },
          }
        : {}),
      content: {
        "application/problem+json": {
          schema: { $ref: "Problem" },
          examples: Object.fromEntries(
            group.map((c) => [
              c,
              { summary: ERRORS[c].title, value: problemBody(c, ERRORS[c].when, EXAMPLE_REQUEST_ID) },
            ]),
          ),
        },
      },
    } as unknown as TSchema;
  }
  return out;
}

/** The documented codes of a route by status, for tests that check what a route answered. */
export function documentedCodes(route: RouteOptions, doc: RouteDoc): ErrorCode[] {
  return codesFor(route, doc);
}

/**
 * Completes a route's schema for the OpenAPI document as Fastify registers it. A route without
 * an entry in ROUTE_DOCS is a programming error: the app refuses to start.
 */
export function documentRoute(route: RouteOptions): void {
  if (route.url.startsWith("/docs") || route.method === "HEAD" || route.method === "OPTIONS") return;
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  const key = `${methods[0]} ${route.url}`;
  const doc = ROUTE_DOCS[key];
  if (!doc) throw new Error(`route ${key} has no entry in ROUTE_DOCS (src/http/openapi.ts)`);
  const schema = (route.schema ?? {}) as Record<string, unknown>;
  schema.operationId = doc.operationId;
  if (doc.summary) schema.summary = doc.summary;
  if (doc.access === "public") schema.security = [];
  if (doc.access === "rpc") schema.security = [{ bearer: [] }, { apiKeyQuery: [] }];
  schema.response = { ...problemResponses(codesFor(route, doc)), ...(schema.response as object) };
  route.schema = schema;
}
