import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, notFound } from "../http/problem.ts";
import { bearer, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { decodeDepositCursor, listDeposits, listFundingAccounts, provisionFundingAccount } from "./store.ts";

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

const Deposit = Type.Object(
  {
    id: Type.Integer({ description: "The credit's ledger entry id" }),
    chain_id: Type.Integer({
      description: "The chain whose tank the credit went to, the chain of the transfer when it came from one",
    }),
    tx_hash: Type.Union([Type.String({ pattern: "^0x[0-9a-f]{64}$" }), Type.Null()]),
    block_number: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: "Block of the transfer, when the deposit watcher recorded it",
    }),
    amount: Wei,
    credited_at: Timestamp,
    status: Type.Union([Type.Literal("credited"), Type.Literal("reversed")], {
      description: "`reversed`: a reorganisation removed the transfer's block and the credit was taken back",
    }),
    reversed_amount: {
      ...Wei,
      description: "What a reorganisation took back of the credit (0 while credited)",
    },
    reversed_at: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: "Deposit" },
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

  app.get(
    "/projects/:id/deposits",
    {
      schema: {
        tags,
        security: bearer,
        summary: "The project's credited deposits, newest first, by cursor",
        description:
          "Every deposit credited to the gas tank. A credit a chain reorganisation took back stays listed " +
          "with `status: reversed`. Each page that has more after it carries `nextCursor`; pass it back as " +
          "`cursor` for the next page.",
        params: ProjectParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
            cursor: Type.Optional(
              Type.String({ maxLength: 64, description: "`nextCursor` of the previous page" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Object({
            deposits: Type.Array(Deposit),
            nextCursor: Type.Optional(
              Type.String({
                description: "Present when more deposits follow: the `cursor` of the next page",
              }),
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { limit, cursor } = request.query;
      const afterId = cursor === undefined ? null : decodeDepositCursor(cursor);
      if (cursor !== undefined && afterId === null)
        throw new ApiError("invalid_cursor", "the cursor is not one this service issued");
      return listDeposits(services.reads, request.params.id, { limit, afterId });
    },
  );
};
