import { Type } from "@sinclair/typebox";
import { getAddress, isAddress } from "viem";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, invalid, notFound } from "../http/problem.ts";
import { Address, bearer, Name, ProjectParams, responses, Selector, Timestamp } from "../http/schemas.ts";
import { homeChainOf } from "../projects/store.ts";
import {
  addEntry,
  disableEntry,
  type Pair as EntryKey,
  listEntries,
  MAX_ENTRIES_PER_PROJECT,
  patchEntry,
} from "./store.ts";

const Entry = Type.Object(
  {
    chain_id: Type.Union([Type.Integer(), Type.Null()], {
      description: "The chain the entry allows calls on; null: every chain served",
    }),
    target_contract: Type.String(),
    function_selector: Type.String(),
    name: Type.Union([Type.String(), Type.Null()], { description: "The name given to the entry, if any" }),
    enabled: Type.Boolean({ description: "false: paused (DELETE, or PATCH with enabled false)" }),
    created_at: Timestamp,
  },
  { $id: "AllowlistEntry" },
);
const ChainChoice = Type.Optional(
  Type.Union([Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }), Type.Null()], {
    description:
      "The chain the entry is for: a chain id, or null for every chain. Absent: the project's home chain " +
      "(a contract address on one chain is not the same contract on another)",
  }),
);
const Pair = Type.Object(
  { targetContract: Address, functionSelector: Selector, chainId: ChainChoice },
  { additionalProperties: false },
);
const NamedPair = Type.Object(
  { targetContract: Address, functionSelector: Selector, chainId: ChainChoice, name: Type.Optional(Name) },
  { additionalProperties: false },
);
const PairChange = Type.Object(
  {
    targetContract: Address,
    functionSelector: Selector,
    chainId: ChainChoice,
    name: Type.Optional(Type.Union([Name, Type.Null()])),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 3 },
);

/**
 * Addresses are stored lower-case. A mixed-case address must carry a valid EIP-55 checksum:
 * a typo in a checksummed address is caught rather than allowlisting a contract nobody meant.
 */
export function normaliseAddress(value: string): string {
  const mixed =
    value.slice(2) !== value.slice(2).toLowerCase() && value.slice(2) !== value.slice(2).toUpperCase();
  if (mixed && (!isAddress(value, { strict: true }) || getAddress(value) !== value)) {
    throw invalid(`'${value}' fails its EIP-55 checksum`);
  }
  return value.toLowerCase();
}

export const allowlistRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["allowlist"];
  /** The entry's key from a body: the chain named (one served here, or null), else the home chain. */
  const pairOf = async (
    projectId: string,
    body: { targetContract: string; functionSelector: string; chainId?: number | null },
  ): Promise<EntryKey> => {
    let chain = body.chainId;
    if (chain === undefined) chain = await homeChainOf(db, projectId);
    else if (chain !== null && !services.config.chains.some((c) => c.chainId === chain)) {
      throw invalid(`chain ${chain} is not served here (GET /blockchain/chains lists the chains)`);
    }
    return {
      chain: chain ?? null,
      target: normaliseAddress(body.targetContract),
      selector: body.functionSelector.toLowerCase(),
    };
  };

  app.get(
    "/projects/:id/allowlist",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        response: responses({ 200: Type.Array(Entry) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return listEntries(db, request.params.id);
    },
  );

  app.post(
    "/projects/:id/allowlist",
    {
      schema: {
        tags,
        security: bearer,
        summary: `Allow a (contract, function) pair; re-adding enables it again (at most ${MAX_ENTRIES_PER_PROJECT})`,
        params: ProjectParams,
        body: NamedPair,
        response: responses({ 200: Entry, 201: Entry }),
      },
    },
    async (request, reply) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "allowlist:write");
      const pair = await pairOf(projectId, request.body);
      const name = request.body.name ?? null;
      const result = await db.transaction((tx) => addEntry(tx, projectId, pair, name));
      if (!result) {
        throw new ApiError(
          "allowlist_full",
          `a project holds at most ${MAX_ENTRIES_PER_PROJECT} allowlist entries`,
        );
      }
      return reply.code(result.created ? 201 : 200).send(result.entry);
    },
  );

  app.patch(
    "/projects/:id/allowlist",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Rename a pair, or pause (enabled false) or resume it, without removing it",
        params: ProjectParams,
        body: PairChange,
        response: responses({ 200: Entry }),
      },
    },
    async (request) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "allowlist:write");
      const { targetContract: _t, functionSelector: _s, chainId: _c, ...change } = request.body;
      if (change.name === undefined && change.enabled === undefined) {
        throw invalid("nothing to change: give name or enabled");
      }
      const entry = await patchEntry(db, projectId, await pairOf(projectId, request.body), change);
      return entry ?? Promise.reject(notFound("allowlist entry"));
    },
  );

  app.delete(
    "/projects/:id/allowlist",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Disable a pair; authorizations for it are refused from then on",
        params: ProjectParams,
        body: Pair,
        response: responses({ 200: Entry }),
      },
    },
    async (request) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "allowlist:write");
      const entry = await disableEntry(db, projectId, await pairOf(projectId, request.body));
      return entry ?? Promise.reject(notFound("allowlist entry"));
    },
  );
};
