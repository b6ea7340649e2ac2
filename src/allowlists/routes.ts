import { Type } from "@sinclair/typebox";
import { getAddress, isAddress } from "viem";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, invalid, notFound } from "../http/problem.ts";
import { Address, bearer, Name, ProjectParams, responses, Selector, Timestamp } from "../http/schemas.ts";
import { addEntry, disableEntry, listEntries, MAX_ENTRIES_PER_PROJECT, patchEntry } from "./store.ts";

const Entry = Type.Object(
  {
    target_contract: Type.String(),
    function_selector: Type.String(),
    name: Type.Union([Type.String(), Type.Null()], { description: "The name given to the entry, if any" }),
    enabled: Type.Boolean({ description: "false: paused (DELETE, or PATCH with enabled false)" }),
    created_at: Timestamp,
  },
  { $id: "AllowlistEntry" },
);
const Pair = Type.Object(
  { targetContract: Address, functionSelector: Selector },
  { additionalProperties: false },
);
const NamedPair = Type.Object(
  { targetContract: Address, functionSelector: Selector, name: Type.Optional(Name) },
  { additionalProperties: false },
);
const PairChange = Type.Object(
  {
    targetContract: Address,
    functionSelector: Selector,
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
      const target = normaliseAddress(request.body.targetContract);
      const selector = request.body.functionSelector.toLowerCase();
      const name = request.body.name ?? null;
      const result = await db.transaction((tx) => addEntry(tx, projectId, target, selector, name));
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
      const { targetContract, functionSelector, ...change } = request.body;
      const entry = await patchEntry(
        db,
        projectId,
        normaliseAddress(targetContract),
        functionSelector.toLowerCase(),
        change,
      );
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
      const target = normaliseAddress(request.body.targetContract);
      const entry = await disableEntry(db, projectId, target, request.body.functionSelector.toLowerCase());
      return entry ?? Promise.reject(notFound("allowlist entry"));
    },
  );
};
