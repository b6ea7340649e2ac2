import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, notFound } from "../http/problem.ts";
import { Address, bearer, Name, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { DAILY_CAP_RULE_ID } from "../ledger/ledger.ts";
import { POLICY_KINDS } from "./kinds.ts";
import {
  MAX_OPERATIONS,
  MAX_RULES_PER_PROJECT,
  MAX_SENDERS_PER_LIST,
  MAX_WINDOW_SEC,
  MIN_WINDOW_SEC,
  RULE_ID_PATTERN,
  RULE_KINDS,
  WINDOWS,
} from "./rules.ts";
import { deleteRule, listRules, patchRule, putRule, ruleUsage } from "./store.ts";

const Kind = Type.Union(
  RULE_KINDS.map((k) => Type.Literal(k)),
  { description: "What the rule limits" },
);
const WindowName = Type.Union(
  WINDOWS.map((w) => Type.Literal(w)),
  {
    description:
      "The counting window of a cap: a UTC calendar day, ISO week (from Monday 00:00 UTC) or month; `interval` = consecutive windows of windowSeconds counted from the Unix epoch; `lifetime` = never resets",
  },
);
const NullableString = Type.Union([Type.String(), Type.Null()]);

const Rule = Type.Object(
  {
    id: Type.String(),
    name: Type.Union([Type.String(), Type.Null()], { description: "The name given to the rule, if any" }),
    paused: Type.Boolean({
      description: "A paused rule keeps its settings and counters and refuses nothing",
    }),
    kind: Kind,
    chain_id: Type.Union([Type.Integer(), Type.Null()], {
      description: "The chain the rule applies on; null: every chain, each chain's counters apart",
    }),
    max_wei: Type.Union([Wei, Type.Null()]),
    max_operations: Type.Union([Type.Integer(), Type.Null()]),
    window: Type.Union([WindowName, Type.Null()]),
    window_seconds: Type.Union([Type.Integer(), Type.Null()]),
    starts_at: NullableString,
    ends_at: NullableString,
    senders: Type.Union([Type.Array(Type.String()), Type.Null()]),
    builtin: Type.Boolean({ description: "The daily cap (id daily_cap), changed with PATCH /projects/:id" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "PolicyRule" },
);

const RuleBody = Type.Object(
  {
    kind: Kind,
    name: Type.Optional(Name),
    paused: Type.Optional(Type.Boolean({ description: "Store the rule paused (default false)" })),
    chainId: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }), Type.Null()], {
        description:
          "The chain the rule applies on (one served here); absent or null: every chain, each counted apart",
      }),
    ),
    maxWei: Type.Optional(
      Type.String({
        pattern: Wei.pattern,
        description: "Spend caps and the operation cost cap: wei, decimal string",
      }),
    ),
    maxOperations: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_OPERATIONS, description: "Count caps: operations per window" }),
    ),
    window: Type.Optional(WindowName),
    windowSeconds: Type.Optional(
      Type.Integer({
        minimum: MIN_WINDOW_SEC,
        maximum: MAX_WINDOW_SEC,
        description: "Length of an `interval` window",
      }),
    ),
    startsAt: Type.Optional(Type.String({ format: "date-time", description: "Campaign start (inclusive)" })),
    endsAt: Type.Optional(Type.String({ format: "date-time", description: "Campaign end (exclusive)" })),
    senders: Type.Optional(
      Type.Array(Address, {
        minItems: 1,
        maxItems: MAX_SENDERS_PER_LIST,
        description: "Sender allowlist or blocklist: smart account addresses",
      }),
    ),
  },
  { additionalProperties: false },
);

const RuleParams = Type.Object(
  {
    id: Type.String({ maxLength: 200 }),
    ruleId: Type.String({ pattern: RULE_ID_PATTERN, description: "The rule's id, chosen by the client" }),
  },
  { additionalProperties: false },
);

const Usage = Type.Object({
  subject: Type.String({ description: "The sender, or * for a project-wide cap" }),
  chain_id: Type.Integer({ description: "The chain counted: a rule's counters are kept per chain" }),
  window_start: Timestamp,
  spent_wei: Wei,
  operations: Type.Integer(),
  reached_at: Type.Union([Timestamp, Type.Null()]),
});

export const policyRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["policies"];

  // Reference data: each rule kind with its label, fields and refusal (the registry in kinds.ts).
  // The dashboard builds its rule form from it.
  const kinds = RULE_KINDS.map((kind) => ({ kind, ...POLICY_KINDS[kind] }));
  app.get(
    "/policies/kinds",
    {
      schema: {
        tags,
        summary:
          "The policy rule kinds: label, the fields each takes, what a cap counts, the refusal it answers",
        response: responses({
          200: Type.Array(
            Type.Object({
              kind: Type.String(),
              label: Type.String(),
              fields: Type.Array(Type.String()),
              counts: Type.Union([Type.Literal("wei"), Type.Literal("operations"), Type.Null()]),
              refusal: Type.Object({ code: Type.String(), detail: Type.String() }),
            }),
          ),
        }),
      },
    },
    async () => kinds,
  );

  app.get(
    "/projects/:id/policies",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        response: responses({ 200: Type.Array(Rule) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return (await listRules(db, request.params.id)) ?? Promise.reject(notFound("project"));
    },
  );

  app.put(
    "/projects/:id/policies/:ruleId",
    {
      schema: {
        tags,
        security: bearer,
        summary: `Create or replace a policy rule (at most ${MAX_RULES_PER_PROJECT}); a replaced rule keeps its usage`,
        params: RuleParams,
        body: RuleBody,
        response: responses({ 200: Rule, 201: Rule }),
      },
    },
    async (request, reply) => {
      const { id: projectId, ruleId } = request.params;
      await authorizeProject(db, request, projectId, "allowlist:write");
      const { chainId } = request.body;
      if (chainId != null && !services.config.chains.some((c) => c.chainId === chainId)) {
        throw new ApiError("invalid_policy", `chain ${chainId} is not served here (GET /blockchain/chains)`);
      }
      const result = await db.transaction((tx) => putRule(tx, projectId, ruleId, request.body));
      if (result.kind === "no_project") throw notFound("project");
      if (result.kind === "invalid") throw new ApiError("invalid_policy", result.detail);
      return reply.code(result.created ? 201 : 200).send(result.rule);
    },
  );

  app.patch(
    "/projects/:id/policies/:ruleId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Rename, pause or resume a rule; its settings and what it has counted stay as they are",
        params: RuleParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.Union([Name, Type.Null()])),
            paused: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: responses({ 200: Rule }),
      },
    },
    async (request) => {
      const { id: projectId, ruleId } = request.params;
      await authorizeProject(db, request, projectId, "allowlist:write");
      if (ruleId === DAILY_CAP_RULE_ID) {
        throw new ApiError("invalid_policy", "the daily cap is changed with PATCH /projects/:id (dailyCap)");
      }
      return (
        (await patchRule(db, projectId, ruleId, request.body)) ?? Promise.reject(notFound("policy rule"))
      );
    },
  );

  app.delete(
    "/projects/:id/policies/:ruleId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Remove a policy rule and its usage counters",
        params: RuleParams,
        response: responses({ 200: Rule }),
      },
    },
    async (request) => {
      const { id: projectId, ruleId } = request.params;
      await authorizeProject(db, request, projectId, "allowlist:write");
      return (await deleteRule(db, projectId, ruleId)) ?? Promise.reject(notFound("policy rule"));
    },
  );

  app.get(
    "/projects/:id/policies/:ruleId/usage",
    {
      schema: {
        tags,
        security: bearer,
        summary: "What a cap has counted in its current window, per sender (or * project-wide), most first",
        params: RuleParams,
        querystring: Type.Object(
          { limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }) },
          { additionalProperties: false },
        ),
        response: responses({ 200: Type.Array(Usage) }),
      },
    },
    async (request) => {
      const { id: projectId, ruleId } = request.params;
      await authorizeProject(db, request, projectId, "project:read");
      const usage = await ruleUsage(db, projectId, ruleId, services.now(), request.query.limit);
      return usage ?? Promise.reject(notFound("policy rule"));
    },
  );
};
