import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { forbidden, invalid, notFound } from "../http/problem.ts";
import { bearer, Name, NullableTimestamp, ProjectParams, responses, Timestamp } from "../http/schemas.ts";
import { SCOPES, type Scope } from "./format.ts";
import { createApiKey, listApiKeys, renameApiKey, revokeApiKey } from "./store.ts";

const ScopeSchema = Type.Union(SCOPES.map((s) => Type.Literal(s)));
const ApiKeyRecord = Type.Object(
  {
    id: Type.Integer(),
    name: Type.Union([Type.String(), Type.Null()], { description: "The name given to the key, if any" }),
    key_preview: Type.String(),
    rate_limit: Type.Integer(),
    scopes: Type.Array(ScopeSchema),
    issued_at: Timestamp,
    last_used_at: NullableTimestamp,
    revoked_at: NullableTimestamp,
  },
  { $id: "ApiKey" },
);
const CreatedKey = Type.Object({
  apiKey: Type.String({ description: "The full key. Shown only in this response: store it now." }),
  keyPreview: Type.String(),
  rateLimit: Type.Integer(),
  id: Type.Integer(),
  scopes: Type.Array(ScopeSchema),
  name: Type.Union([Type.String(), Type.Null()]),
});
const KeyParams = Type.Object(
  { id: Type.String({ maxLength: 200 }), keyId: Type.String({ pattern: "^[1-9][0-9]{0,15}$" }) },
  { additionalProperties: false },
);

export const apiKeyRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["api keys"];

  app.post(
    "/projects/:id/apikeys",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Issue an API key; the full key appears only in this response",
        params: ProjectParams,
        body: Type.Object(
          {
            rateLimit: Type.Integer({ minimum: 1, maximum: 1_000_000, description: "Requests per minute" }),
            scopes: Type.Optional(
              Type.Array(ScopeSchema, { minItems: 1, maxItems: 3, uniqueItems: true, default: undefined }),
            ),
            name: Type.Optional(Name),
          },
          { additionalProperties: false },
        ),
        response: responses({ 201: CreatedKey }),
      },
    },
    async (request, reply) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "apikeys:write");
      const scopes: Scope[] = request.body.scopes ?? ["sponsor"];
      const principal = request.principal!;
      if (principal.kind === "apiKey" && !scopes.every((s) => principal.scopes.includes(s))) {
        throw forbidden("a key cannot issue a key with scopes it does not have");
      }
      // Nor a budget it does not have: a key limited to N requests per minute could otherwise
      // mint itself a key allowed 1,000,000. Developers keep the schema's bounds.
      if (principal.kind === "apiKey" && request.body.rateLimit > principal.rateLimit) {
        throw invalid(
          `body/rateLimit must not exceed the issuing key's own rate limit (${principal.rateLimit} requests per minute)`,
        );
      }
      const { apiKey, record } = await createApiKey(
        db,
        projectId,
        request.body.rateLimit,
        scopes,
        request.body.name ?? null,
      );
      return reply.code(201).send({
        apiKey,
        keyPreview: record.key_preview,
        rateLimit: record.rate_limit,
        id: record.id,
        scopes: record.scopes,
        name: record.name,
      });
    },
  );

  app.get(
    "/projects/:id/apikeys",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        response: responses({ 200: Type.Array(ApiKeyRecord) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "apikeys:read");
      await services.apiKeys.flush();
      return listApiKeys(db, request.params.id);
    },
  );

  app.patch(
    "/projects/:id/apikeys/:keyId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Rename a key (null removes its name); revoked keys keep their name for the record",
        params: KeyParams,
        body: Type.Object({ name: Type.Union([Name, Type.Null()]) }, { additionalProperties: false }),
        response: responses({ 200: ApiKeyRecord }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "apikeys:write");
      const renamed = await renameApiKey(
        db,
        request.params.id,
        Number(request.params.keyId),
        request.body.name,
      );
      return renamed ?? Promise.reject(notFound("API key"));
    },
  );

  app.delete(
    "/projects/:id/apikeys/:keyId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Revoke a key; every instance refuses it within 5 seconds",
        params: KeyParams,
        response: responses({ 200: ApiKeyRecord }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "apikeys:write");
      const revoked = await revokeApiKey(db, request.params.id, Number(request.params.keyId));
      if (!revoked) throw notFound("API key");
      services.apiKeys.forget(revoked.id);
      return revoked;
    },
  );
};
