import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import { normaliseAddress } from "../allowlists/routes.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, notFound } from "../http/problem.ts";
import { Address, bearer, Name, responses, Timestamp } from "../http/schemas.ts";
import { functionsOf } from "./abi.ts";
import { deleteContract, listContracts, MAX_CONTRACTS_PER_PROJECT, putContract } from "./store.ts";

/** ABI entries one upload may hold: functions, events and errors of a large contract fit. */
const MAX_ABI_ENTRIES = 2000;
/**
 * The upload's own body limit, above the API's 64 KB: a large contract's ABI as compilers write
 * it (names, internal types, whitespace) runs to a few hundred KB.
 */
const ABI_BODY_LIMIT_BYTES = 512 * 1024;

const Contract = Type.Object(
  {
    address: Type.String(),
    name: Type.Union([Type.String(), Type.Null()]),
    functions: Type.Array(
      Type.Object({ selector: Type.String(), signature: Type.String({ description: "e.g. mint(uint256)" }) }),
    ),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "Contract" },
);
const ContractParams = Type.Object(
  { id: Type.String({ maxLength: 200 }), address: Address },
  { additionalProperties: false },
);

export const contractRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["allowlist"];

  app.get(
    "/projects/:id/contracts",
    {
      schema: {
        tags,
        security: bearer,
        params: Type.Object({ id: Type.String({ maxLength: 200 }) }, { additionalProperties: false }),
        response: responses({ 200: Type.Array(Contract) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return listContracts(db, request.params.id);
    },
  );

  app.put(
    "/projects/:id/contracts/:address",
    {
      bodyLimit: ABI_BODY_LIMIT_BYTES,
      schema: {
        tags,
        security: bearer,
        summary: `Name a contract and its functions from its ABI (at most ${MAX_CONTRACTS_PER_PROJECT} contracts); replaces an earlier upload`,
        params: ContractParams,
        body: Type.Object(
          {
            name: Type.Optional(Name),
            abi: Type.Array(Type.Unknown(), {
              maxItems: MAX_ABI_ENTRIES,
              description: "The contract's JSON ABI (as solc or a block explorer gives it)",
            }),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Contract, 201: Contract }),
      },
    },
    async (request, reply) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "allowlist:write");
      const address = normaliseAddress(request.params.address);
      const parsed = functionsOf(request.body.abi);
      if (parsed.kind === "invalid") throw new ApiError("invalid_abi", parsed.detail);
      const stored = await db.transaction((tx) =>
        putContract(tx, projectId, address, request.body.name ?? null, parsed.functions),
      );
      if (!stored) {
        throw new ApiError(
          "contracts_full",
          `a project names at most ${MAX_CONTRACTS_PER_PROJECT} contracts`,
        );
      }
      return reply.code(stored.created ? 201 : 200).send(stored.record);
    },
  );

  app.delete(
    "/projects/:id/contracts/:address",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Forget a contract's names (its allowlist entries are not touched)",
        params: ContractParams,
        response: responses({ 200: Contract }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "allowlist:write");
      const gone = await deleteContract(db, request.params.id, normaliseAddress(request.params.address));
      return gone ?? Promise.reject(notFound("contract"));
    },
  );
};
