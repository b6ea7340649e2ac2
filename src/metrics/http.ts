/**
 * What every HTTP request leaves behind: its request id (the caller's, when it is safe to log),
 * log lines that say who called and how it ended, and the request metrics.
 *
 * - `x-request-id`: a caller's id is kept when it is 1 to 128 characters of [A-Za-z0-9._:-]
 *   (nothing that could forge a log line or a header); anything else gets a fresh UUID. The id is
 *   echoed in the response (app.ts) and is the `reqId` of every log line of the request.
 * - Log lines: one per request at `info`, "request completed", with the method, the URL (API
 *   keys already cut out of it, identity/url-key.ts), the client's address, the status and the time
 *   taken; an "incoming request" line on arrival only at `debug` (Fastify's own pair costs a
 *   second serialisation and write per request; the README's Performance section has the figures).
 *   Of the requests answered below 400 without a refusal code, one in REQUEST_LOG_EVERY has its
 *   line (default 1: every one); errors and refusals always do. Writing the line was about 42 us
 *   of the service's 477 us of CPU per authorization under the bench, 9 %
 *   (bench/results-2026-11-29-stop42.txt).
 *   Once the caller is known, the request's logger carries `projectId` and `apiKeyId` (an API
 *   key's id, never the key) or `developerId`; the completion line also carries the route
 *   template and, for a refusal, its stable `code`. Every line a request logs carries its reqId.
 * - Metrics: requests and latency by route template, and the outcome of every authorization
 *   (REST and JSON-RPC) by code.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Metrics } from "./metrics.ts";
import { infoWithBindings } from "./request-logger.ts";

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Fastify's genReqId: the caller's x-request-id when it is safe, a fresh UUID otherwise. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && SAFE_REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * Fastify's trustProxy from the TRUST_PROXY setting. A hop count becomes a function: Fastify 5
 * trusts no one when given a bare number (it cannot check the nearest peer), while the setting
 * promises Express's meaning, the nearest `hops` peers are proxies. Only use a count where
 * nothing reaches the service except through the load balancer; a list of ranges checks that.
 */
export function trustProxyOption(
  setting: false | number | readonly string[],
): false | string[] | ((address: string, hop: number) => boolean) {
  if (setting === false) return false;
  if (typeof setting === "number") return (_address, hop) => hop < setting;
  return [...setting];
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const RPC_METHODS = new Set(["pm_getPaymasterStubData", "pm_getPaymasterData"]);
const CODE = /^[a-z][a-z0-9_]{0,63}$/;
const PROJECT_ID = /^[A-Za-z0-9._:-]{1,64}$/;

declare module "fastify" {
  interface FastifyRequest {
    /** The stable code of the refusal this request was answered with; null until known. */
    errorCode: string | null;
    /** The JSON-RPC method of a /rpc request, as parsed by that route. */
    rpcMethod: string | null;
    /** Whether the caller is already bound to this request's logger. */
    callerLogged: boolean;
  }
}

/** Called by the /rpc route once it has parsed the method, for the authorization metrics. */
export function noteRpcMethod(request: FastifyRequest, method: string): void {
  request.rpcMethod = method;
}

export function installRequestObservability(
  app: FastifyInstance,
  metrics: Metrics,
  options: { successLogEvery: number },
): void {
  // Successful requests answered since the last one logged (REQUEST_LOG_EVERY, 1 or more).
  let unlogged = 0;
  app.decorateRequest("errorCode", null);
  app.decorateRequest("rpcMethod", null);
  app.decorateRequest("callerLogged", false);

  // Callback hooks: each runs on every request, where an async one costs a promise and a turn of
  // the microtask queue.
  app.addHook("onRequest", (request, _reply, done) => {
    if (request.log.level === "debug" || request.log.level === "trace")
      request.log.debug({ req: request }, "incoming request");
    done();
  });

  // After authentication (an onRequest hook): what the handler logs says who called.
  app.addHook("preValidation", (request, reply, done) => {
    bindCaller(request, reply, {});
    done();
  });

  app.addHook("onSend", (request, reply, payload, done) => {
    request.errorCode = errorCodeOf(request, reply, payload);
    done(null, payload);
  });

  const observeResponse = (request: FastifyRequest, reply: FastifyReply): void => {
    const route = request.routeOptions.url ?? "unmatched";
    const method = METHODS.has(request.method) ? request.method : "other";
    const code = request.errorCode;
    const success = !code && reply.statusCode < 400;
    if (!success || ++unlogged >= options.successLogEvery) {
      if (success) unlogged = 0;
      infoWithBindings(
        reply.log,
        callerBindings(request, { route, ...(code ? { code } : {}) }),
        { req: request, res: { statusCode: reply.statusCode }, responseTime: reply.elapsedTime },
        "request completed",
      );
    }
    metrics.httpRequest(route, method, reply.statusCode, reply.elapsedTime / 1000);
    if (method !== "POST") return;
    if (route === "/sponsor/authorize") {
      metrics.authorizeOutcome("rest", "authorize", reply.statusCode === 200 ? "ok" : (code ?? "other"));
    } else if (route === "/sponsor/check") {
      // The dry run's own refusals (401, 429, 400); its "would refuse" answers are 200s.
      metrics.authorizeOutcome("rest", "check", reply.statusCode === 200 ? "ok" : (code ?? "other"));
    } else if (route === "/rpc") {
      const rpcMethod = request.rpcMethod && RPC_METHODS.has(request.rpcMethod) ? request.rpcMethod : "other";
      metrics.authorizeOutcome("rpc", rpcMethod, code ?? (reply.statusCode === 200 ? "ok" : "other"));
    }
  };
  app.addHook("onResponse", (request, reply, done) => {
    observeResponse(request, reply);
    done();
  });
}

/** Adds the caller (once) and `extra` to the request's and the reply's loggers. */
function bindCaller(request: FastifyRequest, reply: FastifyReply, extra: Record<string, string>): void {
  const bindings = callerBindings(request, extra);
  if (Object.keys(bindings).length === 0) return;
  const log = request.log.child(bindings);
  request.log = log;
  reply.log = log;
}

/** `extra`, with the caller when the request's logger does not carry it yet (then it does). */
function callerBindings(
  request: FastifyRequest,
  extra: Record<string, string>,
): Record<string, string | number> {
  const bindings: Record<string, string | number> = { ...extra };
  if (!request.callerLogged) {
    const principal = request.principal;
    if (principal?.kind === "apiKey") {
      bindings.projectId = principal.projectId;
      bindings.apiKeyId = principal.keyId;
    } else if (principal?.kind === "developer") {
      bindings.developerId = principal.developerId;
      const id = (request.params as { id?: unknown } | undefined)?.id;
      if (
        typeof id === "string" &&
        request.routeOptions.url?.startsWith("/projects/:id") &&
        PROJECT_ID.test(id)
      )
        bindings.projectId = id;
    }
    request.callerLogged = principal !== null && principal !== undefined;
  }
  return bindings;
}

/**
 * The stable code of a refusal, read from what the client receives: a problem+json body, or a
 * JSON-RPC error (HTTP 200) from /rpc. Only refusals are parsed, and they are small.
 */
function errorCodeOf(request: FastifyRequest, reply: FastifyReply, payload: unknown): string | null {
  if (typeof payload !== "string") return null;
  const type = String(reply.getHeader("content-type") ?? "");
  try {
    if (type.startsWith("application/problem+json"))
      return safeCode((JSON.parse(payload) as { code?: unknown }).code);
    if (request.routeOptions.url === "/rpc" && payload.includes('"error"')) {
      const body = JSON.parse(payload) as { error?: { data?: { code?: unknown } } };
      return safeCode(body.error?.data?.code);
    }
  } catch {
    return null;
  }
  return null;
}

function safeCode(code: unknown): string | null {
  return typeof code === "string" && CODE.test(code) ? code : null;
}
