/**
 * `POST /rpc`: the ERC-7677 paymaster web service, JSON-RPC 2.0, so that viem's
 * `createPaymasterClient`, permissionless and EIP-5792 wallets use the service with no glue.
 *
 * This file is the transport: body framing, CORS, authentication and the mapping of every
 * failure to a JSON-RPC error (HTTP 200, never problem+json and never a 500). The methods are
 * one file each in methods/, found through methods/registry.ts. The caller authenticates through
 * the same hook as the REST API (identity/authenticate.ts), which on this route also reads an API
 * key from `?apikey=` (for wallets that only take a URL) and runs once the body is read, so that
 * its refusals carry the request's id. CORS is open here, and only here: wallets call it from
 * web pages.
 */

import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { scopeAllows } from "../access/roles.ts";
import type { RoutePlugin } from "../context.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { retryAfterSec } from "../http/errors.ts";
import { ApiError } from "../http/problem.ts";
import { noteRpcMethod } from "../metrics/http.ts";
import { captureRefusals, noteRpcParams } from "../refusals/capture.ts";
import { sponsorDeps } from "../sponsor/deps.ts";
import { failure, type JsonRpcError, type JsonRpcId, parseRequest, rpcError } from "./json-rpc.ts";
import { RPC_METHODS } from "./methods/registry.ts";

export const RPC_BODY_LIMIT_BYTES = 96 * 1024;

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "POST, OPTIONS",
  "access-control-allow-headers": "authorization, content-type",
  "access-control-max-age": "600",
};

const RpcBody = Type.Object(
  {
    jsonrpc: Type.Literal("2.0"),
    id: Type.Union([Type.String(), Type.Integer(), Type.Null()]),
    method: Type.Union([...RPC_METHODS.keys()].map((m) => Type.Literal(m))),
    params: Type.Array(Type.Unknown(), {
      description:
        "[userOperation (EntryPoint v0.7/v0.8 JSON-RPC form), entryPoint, chainId (hex), context ({projectId?})]",
    }),
  },
  { description: "One JSON-RPC 2.0 request (batches are refused)" },
);

const RpcResponse = Type.Object(
  {
    jsonrpc: Type.Literal("2.0"),
    id: Type.Union([Type.String(), Type.Integer(), Type.Null()]),
    result: Type.Optional(Type.Unknown()),
    error: Type.Optional(
      Type.Object({
        code: Type.Integer(),
        message: Type.String(),
        data: Type.Object({
          code: Type.String({ description: "The same stable code as the REST API's" }),
          ruleId: Type.Optional(
            Type.String({ description: "The project's policy rule that refused the operation" }),
          ),
        }),
      }),
    ),
  },
  { description: "JSON-RPC 2.0 response; errors are answered with HTTP 200 too" },
);

export const rpcRoutes: RoutePlugin = async (app, { services }) => {
  // This plugin's own body handling: the raw text, so that bad JSON is a JSON-RPC parse error.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string", bodyLimit: RPC_BODY_LIMIT_BYTES }, (_req, body, done) =>
    done(null, body),
  );
  // Everything the authentication hook or a method throws, as a JSON-RPC error.
  app.setErrorHandler((err, request, reply) =>
    sendRpc(reply, failure(requestIdOf(request), asRpcError(err, request, reply))),
  );

  const deps = sponsorDeps(services);
  // Refusals answered as JSON-RPC errors go to the project's refusal log, like the REST API's.
  captureRefusals(app, services.refusals, services.now);

  app.options("/rpc", { schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).headers(CORS).send(),
  );

  app.post(
    "/rpc",
    {
      config: { credentials: { fromUrl: true, afterBody: true } },
      // The schema documents the request; the handler parses it, so that every failure is JSON-RPC.
      validatorCompiler: () => () => true,
      schema: {
        tags: ["sponsorship"],
        summary: `ERC-7677 paymaster service: ${[...RPC_METHODS.keys()].join(", ")}`,
        description:
          "JSON-RPC 2.0. The project's API key in `Authorization: Bearer gsk_…` or as `?apikey=gsk_…` (for EIP-5792 wallets; never logged).",
        security: [{ bearer: [] }],
        body: RpcBody,
        response: { 200: RpcResponse },
      },
    },
    async (request, reply) => {
      const parsed = parseRequest(bodyText(request));
      if (parsed.kind === "error") return sendRpc(reply, failure(parsed.id, parsed.error));
      const { id, method, params } = parsed.request;
      noteRpcMethod(request, method);
      const key = sponsorKeyOf(request);
      const handler = RPC_METHODS.get(method);
      if (!handler)
        return sendRpc(reply, failure(id, rpcError("method_not_found", `unknown method ${method}`)));
      let answer: Awaited<ReturnType<typeof handler.handle>>;
      try {
        answer = await handler.handle({
          request,
          deps,
          projectId: key.projectId,
          apiKeyId: key.keyId,
          params,
        });
      } catch (err) {
        noteRpcParams(request, params);
        throw err;
      }
      // Only a refusal notes what was asked (for the refusal log); a result costs nothing more.
      if (answer.kind === "error") noteRpcParams(request, params);
      return sendRpc(
        reply,
        answer.kind === "error"
          ? failure(id, answer.error)
          : `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${answer.json}}`,
      );
    },
  );
};

function sendRpc(reply: FastifyReply, body: string) {
  return reply.code(200).headers(CORS).type("application/json").send(body);
}

function bodyText(request: FastifyRequest): string {
  return typeof request.body === "string" ? request.body : "";
}

/** The id of the request being answered, when its body got that far; null otherwise. */
function requestIdOf(request: FastifyRequest): JsonRpcId {
  const parsed = parseRequest(bodyText(request));
  return parsed.kind === "request" ? parsed.request.id : parsed.id;
}

/**
 * The caller's API key, which must be allowed to sponsor. A developer token is refused: the
 * paymaster service is for a project's key.
 */
function sponsorKeyOf(request: FastifyRequest) {
  const principal = request.principal;
  if (!principal)
    throw new ApiError("unauthorized", "an API key is required (Authorization: Bearer, or ?apikey=)");
  if (principal.kind !== "apiKey")
    throw new ApiError("unauthorized", "the paymaster service takes a project's API key");
  if (!scopeAllows(principal.scopes, "sponsor:authorize")) {
    throw new ApiError(
      "forbidden",
      `this API key's scopes (${principal.scopes.join(", ")}) do not allow sponsoring`,
    );
  }
  return principal;
}

/** A refusal (ApiError), an unavailable database, an oversized body, or anything else (logged). */
function asRpcError(err: unknown, request: FastifyRequest, reply: FastifyReply): JsonRpcError {
  if (err instanceof ApiError) {
    const retryAfter = err.headers["retry-after"];
    if (retryAfter) reply.header("retry-after", retryAfter);
    return rpcError(err.code, err.message, retryAfter ? { retryAfterSec: Number(retryAfter) } : {});
  }
  const unavailable = databaseUnavailable(err);
  if (unavailable) {
    // The REST API's 503 `unavailable` as a JSON-RPC error: one warn line, no stack.
    request.log.warn(
      { reason: unavailable.reason, dbError: unavailable.driverMessage },
      "database unavailable",
    );
    const retryAfter = retryAfterSec(unavailable);
    reply.header("retry-after", String(retryAfter));
    return rpcError("unavailable", "the database is unavailable; retry shortly", {
      retryAfterSec: retryAfter,
    });
  }
  if ((err as { code?: string }).code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    return rpcError("payload_too_large", `the body is larger than ${RPC_BODY_LIMIT_BYTES} bytes`);
  }
  request.log.error({ err }, "unhandled error on /rpc");
  return rpcError("internal_error", "an internal error occurred; quote the x-request-id to support");
}

export type { JsonRpcId };
