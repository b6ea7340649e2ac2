import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { bearer, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { events, overview } from "./store.ts";

const Overview = Type.Object({
  totalSponsored: Type.Integer({ description: "Operations settled on chain (success or reverted)" }),
  totalGasSaved: Wei,
  activeUsers: Type.Integer({ description: "Distinct senders with a settled operation in the last 30 days" }),
  today: Type.Object({ sponsored: Type.Integer(), dailyCapRemaining: Wei }),
  topContracts: Type.Array(
    Type.Object({ address: Type.String(), calls: Type.Integer(), gasUsed: Type.String() }),
  ),
});
const Status = Type.Union(["pending", "success", "reverted", "expired"].map((s) => Type.Literal(s)));
const Event = Type.Object(
  {
    id: Type.Integer(),
    sender: Type.String(),
    target: Type.String(),
    status: Status,
    estimated_gas: Type.Integer(),
    actual_gas: Type.Integer(),
    created_at: Timestamp,
    selector: Type.String(),
    auth_id: Type.String(),
    max_gas_cost: Wei,
    actual_gas_cost: Wei,
    tx_hash: Type.Union([Type.String(), Type.Null()]),
    user_op_hash: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: "TransactionEvent" },
);

export const analyticsRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["analytics"];

  app.get(
    "/projects/:id/analytics/overview",
    { schema: { tags, security: bearer, params: ProjectParams, response: responses({ 200: Overview }) } },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return overview(db, request.params.id, services.now());
    },
  );

  app.get(
    "/projects/:id/analytics/events",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Sponsorship events, newest first",
        params: ProjectParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
            offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Type.Object({ events: Type.Array(Event), total: Type.Integer() }) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return events(db, request.params.id, request.query.limit, request.query.offset);
    },
  );
};
