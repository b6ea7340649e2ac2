/**
 * The refusal log of a project: `GET /projects/:id/refusals` (the detailed sample, newest first,
 * cursor-paged) and `GET /projects/:id/analytics/refusals` (exact counts per UTC day and code,
 * beside the sponsorships of the same days). Same doors as the events: members of the project's
 * organization, or a key of the project with the read scope.
 */
import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import { DayRangeQuery, dayRange, instantRange } from "../analytics/routes.ts";
import type { RoutePlugin } from "../context.ts";
import { ERRORS } from "../http/catalogue.ts";
import { ApiError } from "../http/problem.ts";
import { bearer, ProjectParams, responses, Timestamp } from "../http/schemas.ts";
import { decodeRefusalCursor, listRefusals, refusalCounts } from "./store.ts";

const Code = Type.Union(
  Object.keys(ERRORS).map((c) => Type.Literal(c)),
  {
    description:
      "A stable refusal code (the `code` of the problem+json, or `data.code` of the JSON-RPC error)",
  },
);
const Reason = Type.String({ description: "The code in plain words, for people" });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

const Refusal = Type.Object(
  {
    id: Type.Integer(),
    created_at: Timestamp,
    code: Type.String(),
    reason: Reason,
    status: Type.Integer({
      description: "HTTP status answered (200 for /rpc, whose refusals are JSON-RPC errors)",
    }),
    rpc_code: Nullable(Type.Integer({ description: "JSON-RPC error code, for refusals of /rpc" })),
    route: Type.String({
      description: "authorize, check, pm_getPaymasterStubData, pm_getPaymasterData, or rpc (another method)",
    }),
    api_key_id: Nullable(Type.Integer({ description: "The id of the API key that made the request" })),
    sender: Nullable(
      Type.String({ description: "The sender (`user` of authorize), when the request had one" }),
    ),
    target: Nullable(Type.String()),
    selector: Nullable(Type.String()),
    chain_id: Nullable(Type.Integer()),
    estimated_gas: Nullable(
      Type.String({
        pattern: "^[0-9]+$",
        description: "estimatedGas, or the sum of the operation's gas limits",
      }),
    ),
    rule_id: Nullable(Type.String({ description: "The policy rule that refused it" })),
    request_id: Nullable(Type.String({ description: "The x-request-id of the refused request" })),
  },
  { $id: "Refusal" },
);

export const refusalRoutes: RoutePlugin = async (app, { services }) => {
  // Who may read is checked on the primary (`db`); what is read may come from a replica (`reads`).
  const { db, reads } = services;

  app.get(
    "/projects/:id/refusals",
    {
      schema: {
        tags: ["analytics"],
        security: bearer,
        summary: "Refused sponsorship requests with what was asked, newest first (a bounded sample)",
        description:
          "Refusals of POST /sponsor/authorize, POST /sponsor/check and POST /rpc made with one of the project's API " +
          "keys. Each instance keeps at most REFUSAL_DETAIL_PER_MINUTE of them per project and minute, for " +
          "REFUSAL_RETENTION_DAYS; GET /projects/:id/analytics/refusals has the exact counts. Requests without a valid " +
          "key are never attributed to a project. Rows appear about a second after the refusal (they are written in " +
          "batches). `from` is inclusive, `to` exclusive; pass `nextCursor` back as `cursor` with the same filters.",
        params: ProjectParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
            cursor: Type.Optional(
              Type.String({ maxLength: 96, description: "`nextCursor` of the previous page" }),
            ),
            code: Type.Optional(Code),
            from: Type.Optional(Type.String({ format: "date-time", description: "created_at at or after" })),
            to: Type.Optional(Type.String({ format: "date-time", description: "created_at before" })),
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Object({
            refusals: Type.Array(Refusal),
            nextCursor: Type.Optional(
              Type.String({
                description: "Present when more refusals follow: the `cursor` of the next page",
              }),
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { limit, cursor, code, from, to } = request.query;
      const after = cursor === undefined ? null : decodeRefusalCursor(cursor);
      if (cursor !== undefined && after === null)
        throw new ApiError("invalid_cursor", "the cursor is not one this service issued");
      const filters = { code, ...instantRange(from, to) };
      return listRefusals(reads, request.params.id, { limit, after, filters });
    },
  );

  app.get(
    "/projects/:id/analytics/refusals",
    {
      schema: {
        tags: ["analytics"],
        security: bearer,
        summary: "Refusals per UTC day and per code (exact counts), beside the authorizations granted",
        description:
          "`from` and `to` are UTC days (YYYY-MM-DD), both included, at most 366 days apart; by default the last 30 " +
          "days, today included. `refused` counts every refusal made with one of the project's API keys (written " +
          "about a second after it); `authorized` counts the authorizations granted on the same days, so " +
          "refused ÷ (authorized + refused) is the share refused.",
        params: ProjectParams,
        querystring: DayRangeQuery,
        response: responses({
          200: Type.Object({
            from: Type.String({ format: "date" }),
            to: Type.String({ format: "date" }),
            refused: Type.Integer(),
            authorized: Type.Integer(),
            byCode: Type.Array(
              Type.Object({ code: Type.String(), reason: Reason, refused: Type.Integer() }),
              {
                description: "Codes that refused something in the range, most frequent first",
              },
            ),
            days: Type.Array(
              Type.Object({
                day: Type.String({ format: "date" }),
                refused: Type.Integer(),
                authorized: Type.Integer(),
                byCode: Type.Record(Type.String(), Type.Integer(), {
                  description: "Refusals of the day per code",
                  examples: [{ not_allowlisted: 3, rate_limited: 12 }],
                }),
              }),
              { description: "One row per UTC day, oldest first; days without activity are zeros" },
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { from, to } = dayRange(request.query, services.now());
      return { from, to, ...(await refusalCounts(reads, request.params.id, from, to)) };
    },
  );
};
