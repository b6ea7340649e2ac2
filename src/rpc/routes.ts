/**
 * `POST /rpc`: the ERC-7677 paymaster web service, JSON-RPC 2.0, so that viem's
 * `createPaymasterClient`, permissionless and EIP-5792 wallets use the service with no glue.
 *
 * This route speaks JSON-RPC end to end: authentication (the API key in `Authorization: Bearer`
 * or, for wallets that only take a URL, `?apikey=`), rate limiting, malformed bodies and every
 * refusal come back as JSON-RPC errors with HTTP 200, never as problem+json and never as a 500.
 * CORS is open here, and only here: wallets call it from web pages.
 */

import { Type } from "@sinclair/typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { scopeAllows } from "../access/roles.ts";
import { firstNotAllowlisted } from "../allowlists/store.ts";
import { checkApiKey } from "../api-keys/check.ts";
import { KEY_PREFIX } from "../api-keys/format.ts";
import type { RoutePlugin, Services } from "../context.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { retryAfterSec } from "../http/errors.ts";
import { ApiError, rateLimited } from "../http/problem.ts";
import { tooManyFailures } from "../identity/authenticate.ts";
import { dryRunReservation } from "../ledger/ledger.ts";
import { noteRpcMethod } from "../metrics/http.ts";
import { type OperationDeps, sponsorOperation, stubOperation } from "../sponsor/operation.ts";
import { currentFeeCeilings } from "../sponsor/pricing.ts";
import type { UnknownAccounts } from "../sponsor/sender-code.ts";
import { failure, type JsonRpcId, parseRequest, rpcError, success } from "./json-rpc.ts";
import { urlKeyOf } from "./url-key.ts";
import { parseSponsorParams } from "./user-operation.ts";

export const RPC_BODY_LIMIT_BYTES = 96 * 1024;

const METHODS = ["pm_getPaymasterStubData", "pm_getPaymasterData"] as const;

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
    method: Type.Union(METHODS.map((m) => Type.Literal(m))),
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
  app.setErrorHandler((err, request, reply) => {
    const tooLarge = (err as { code?: string }).code === "FST_ERR_CTP_BODY_TOO_LARGE";
    if (!tooLarge) request.log.error({ err }, "unhandled error on /rpc");
    const error = tooLarge
      ? rpcError("payload_too_large", `the body is larger than ${RPC_BODY_LIMIT_BYTES} bytes`)
      : rpcError("internal_error", "an internal error occurred; quote the x-request-id to support");
    return sendRpc(reply, failure(null, error));
  });

  const deps = operationDeps(services);

  app.options("/rpc", { schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).headers(CORS).send(),
  );

  app.post(
    "/rpc",
    {
      config: { ownAuthentication: true },
      // The schema documents the request; the handler parses it, so that every failure is JSON-RPC.
      validatorCompiler: () => () => true,
      schema: {
        tags: ["sponsorship"],
        summary: "ERC-7677 paymaster service: pm_getPaymasterStubData, pm_getPaymasterData",
        description:
          "JSON-RPC 2.0. The project's API key in `Authorization: Bearer gsk_…` or as `?apikey=gsk_…` (for EIP-5792 wallets; never logged).",
        security: [{ bearer: [] }],
        body: RpcBody,
        response: { 200: RpcResponse },
      },
    },
    async (request, reply) => {
      const parsed = parseRequest(typeof request.body === "string" ? request.body : "");
      if (parsed.kind === "error") return sendRpc(reply, failure(parsed.id, parsed.error));
      const { id, method, params } = parsed.request;
      noteRpcMethod(request, method);
      try {
        const projectId = await authenticate(services, request);
        if (!(METHODS as readonly string[]).includes(method)) {
          return sendRpc(reply, failure(id, rpcError("method_not_found", `unknown method ${method}`)));
        }
        const p = parseSponsorParams(params);
        if (p.kind === "invalid") {
          return sendRpc(reply, failure(id, rpcError("invalid_params", p.detail)));
        }
        if (p.params.context.projectId !== undefined && p.params.context.projectId !== projectId) {
          return sendRpc(
            reply,
            failure(id, rpcError("unauthorized", "this API key belongs to another project")),
          );
        }
        const req = { projectId, apiKeyId: keyIdOf(request), ...p.params };
        const outcome =
          method === "pm_getPaymasterStubData"
            ? await stubOperation(deps, req)
            : await sponsorOperation(deps, req);
        if (outcome.kind === "refused") {
          const extra = {
            ...(outcome.callIndex === undefined ? {} : { callIndex: outcome.callIndex }),
            ...(outcome.ruleId === undefined ? {} : { ruleId: outcome.ruleId }),
          };
          return sendRpc(reply, failure(id, rpcError(outcome.code, outcome.detail, extra)));
        }
        // A final answer is stored for replays as the result's exact text.
        const body =
          outcome.kind === "stub"
            ? success(id, outcome.result)
            : `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${outcome.body}}`;
        return sendRpc(reply, body);
      } catch (err) {
        const unavailable = databaseUnavailable(err);
        if (unavailable) {
          // The REST API's 503 `unavailable` as a JSON-RPC error: one warn line, no stack.
          request.log.warn(
            { reason: unavailable.reason, dbError: unavailable.driverMessage },
            "database unavailable",
          );
          const retryAfter = retryAfterSec(unavailable);
          reply.header("retry-after", String(retryAfter));
          const error = rpcError("unavailable", "the database is unavailable; retry shortly", {
            retryAfterSec: retryAfter,
          });
          return sendRpc(reply, failure(id, error));
        }
        if (!(err instanceof ApiError)) throw err;
        const extra = err.headers["retry-after"] ? { retryAfterSec: Number(err.headers["retry-after"]) } : {};
        return sendRpc(reply, failure(id, rpcError(err.code, err.message, extra)));
      }
    },
  );
};

function sendRpc(reply: FastifyReply, body: string) {
  return reply.code(200).headers(CORS).type("application/json").send(body);
}

/**
 * The project of the API key in the Authorization header or the URL; ApiError otherwise. A
 * developer token is refused: the paymaster service is for a project's key.
 */
async function authenticate(services: Services, request: FastifyRequest): Promise<string> {
  const header = request.headers.authorization;
  const fromHeader = header?.startsWith("Bearer ") ? header.slice(7) : undefined;
  const presented = fromHeader ?? urlKeyOf(request.raw);
  if (!presented)
    throw new ApiError("unauthorized", "an API key is required (Authorization: Bearer, or ?apikey=)");
  if (!presented.startsWith(KEY_PREFIX))
    throw new ApiError("unauthorized", "the paymaster service takes a project's API key");
  // The same check as the REST API's: unknown keys count against the client address's budget.
  const check = await checkApiKey(services, presented, request.ip);
  if (check.kind === "throttled") throw tooManyFailures(check.refusal);
  if (check.kind === "invalid") throw new ApiError("unauthorized", "the API key is invalid or revoked");
  const { key } = check;
  const refusal = await services.rateLimiter.consume(key.id, key.rateLimit);
  if (refusal) throw rateLimited(refusal);
  if (!scopeAllows(key.scopes, "sponsor:authorize")) {
    throw new ApiError(
      "forbidden",
      `this API key's scopes (${key.scopes.join(", ")}) do not allow sponsoring`,
    );
  }
  request.principal = {
    kind: "apiKey",
    keyId: key.id,
    projectId: key.projectId,
    scopes: key.scopes,
    rateLimit: key.rateLimit,
  };
  return key.projectId;
}

function keyIdOf(request: FastifyRequest): number | null {
  return request.principal?.kind === "apiKey" ? request.principal.keyId : null;
}

function operationDeps(services: Services): OperationDeps {
  const { db, config } = services;
  return {
    config,
    signer: services.signer,
    reservations: services.reservations,
    feeCeilings: (chainId) => currentFeeCeilings(services.feeOracle, config.chains, chainId),
    refreshFees: () => services.feeOracle.refresh(),
    async project(projectId) {
      const rows = await db.query<{
        name: string;
        icon: string | null;
        ttl: number;
        balance: string;
        unknown_accounts: UnknownAccounts;
      }>(
        `SELECT name, sponsor_icon AS icon, validity_ttl_sec AS ttl, gas_tank_balance::text AS balance,
                unknown_accounts
         FROM projects WHERE id = $1`,
        [projectId],
      );
      const r = rows[0];
      return r
        ? {
            name: r.name,
            icon: r.icon,
            ttlSec: r.ttl,
            balanceWei: BigInt(r.balance),
            unknownAccounts: r.unknown_accounts,
          }
        : { name: "", icon: null, ttlSec: 300, balanceWei: 0n, unknownAccounts: "refuse" };
    },
    senderCode: services.senderCode,
    firstNotAllowlisted: (projectId, calls) => firstNotAllowlisted(db, projectId, calls),
    dryRun: (r) => dryRunReservation(db, r),
    approve: services.approvals.check,
    now: services.now,
  };
}

export type { JsonRpcId };
