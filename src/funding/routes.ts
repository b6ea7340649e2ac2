import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { notFound } from "../http/problem.ts";
import { bearer, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { listFundingAccounts, provisionFundingAccount } from "./store.ts";

const FundingAccount = Type.Object(
  {
    project_id: Type.String(),
    chain_id: Type.Integer(),
    address: Type.String({ description: "Send the native token here to fund the gas tank" }),
    created_at: Timestamp,
    total_credited: Wei,
  },
  { $id: "FundingAccount" },
);

export const fundingRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["funding"];

  app.get(
    "/projects/:id/funding-accounts",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        response: responses({ 200: Type.Array(FundingAccount) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return listFundingAccounts(db, request.params.id);
    },
  );

  app.get(
    "/projects/:id/funding-accounts/:chainId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "The project's deposit address on a chain, provisioned on first request",
        params: Type.Object(
          {
            id: Type.String({ maxLength: 200 }),
            chainId: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: FundingAccount }),
      },
    },
    async (request) => {
      const { id, chainId } = request.params;
      await authorizeProject(db, request, id, "project:read");
      if (!services.config.chains.some((c) => c.chainId === chainId && c.active)) throw notFound("chain");
      return db.transaction((tx) => provisionFundingAccount(tx, services.deposits, id, chainId));
    },
  );
};
