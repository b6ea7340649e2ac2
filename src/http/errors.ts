import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import { type DatabaseUnavailable, databaseUnavailable } from "../db/unavailable.ts";
import { ERRORS, type ErrorCode } from "./catalogue.ts";
import { ApiError, PROBLEM_CONTENT_TYPE, problemBody } from "./problem.ts";
import { findNul, type NulPath } from "./validation.ts";

/** Fastify's own error codes for bad input, each mapped to a status and a stable code. */
const FRAMEWORK_ERRORS: Record<string, { code: ErrorCode; detail?: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: "unsupported_media_type",
    detail: "send the body as application/json",
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: "invalid_request" },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: "payload_too_large", detail: "request body is too large" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: "malformed_json", detail: "the JSON body is empty" },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: "malformed_json",
    detail: "the body is not valid JSON",
  },
  FST_ERR_CTP_EMPTY_TYPE: { code: "unsupported_media_type" },
  FST_ERR_CTP_INVALID_TYPE: { code: "unsupported_media_type" },
  // Fastify's messages for these two quote the raw path; the details below quote nothing.
  FST_ERR_BAD_URL: { code: "malformed_request", detail: "the URL's percent-encoding is malformed" },
  FST_ERR_MAX_PARAM_LENGTH: {
    code: "uri_too_long",
    detail: "a segment of the path is over the length limit",
  },
  FST_ERR_ASYNC_CONSTRAINT: { code: "invalid_request" },
};

export function sendProblem(
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  headers: Record<string, string> = {},
  extensions: { ruleId?: string } = {},
) {
  const body = { ...problemBody(code, detail, String(reply.request.id)), ...extensions };
  return reply.code(body.status).headers(headers).type(PROBLEM_CONTENT_TYPE).send(body);
}

/** One place turns every failure into problem+json; 5xx bodies never carry internals. */
export function installErrorHandling(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof ApiError)
      return sendProblem(reply, err.code, err.message, err.headers, err.extensions);
    if (err.validation) {
      const where = err.validationContext ?? "request";
      return sendProblem(reply, "invalid_request", `${where}${describeValidation(err)}`);
    }
    keepAliveIfDrainable(request, reply);
    const known = err.code ? FRAMEWORK_ERRORS[err.code] : undefined;
    if (known) return sendProblem(reply, known.code, known.detail ?? err.message);
    if (err instanceof SyntaxError) return sendProblem(reply, "malformed_json", "the body is not valid JSON");
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Another library's client error: its message may quote the request, so it is not sent.
      const code = CODE_BY_STATUS[status] ?? "invalid_request";
      return sendProblem(reply, code, ERRORS[code].when);
    }
    const unavailable = databaseUnavailable(err);
    if (unavailable) {
      // Expected while the database restarts or a row stays locked: one line, no stack.
      request.log.warn(
        { reason: unavailable.reason, dbError: unavailable.driverMessage },
        "database unavailable",
      );
      return sendProblem(reply, "unavailable", "the database is unavailable; retry after Retry-After", {
        "retry-after": String(retryAfterSec(unavailable)),
      });
    }
    request.log.error({ err }, "unhandled error");
    if (status === 503)
      return sendProblem(reply, "unavailable", "a dependency is unavailable, retry shortly");
    return sendProblem(reply, "internal_error", "an internal error occurred; quote the requestId to support");
  });

  const allowedMethods = routeTable(app);
  app.setNotFoundHandler((request, reply) => {
    // The path is not echoed: it is the client's raw input.
    const allowed = allowedMethods(request.url).filter((m) => m !== request.method);
    if (allowed.length === 0) return sendProblem(reply, "not_found", "no route matches this path");
    const list = allowed.join(", ");
    return sendProblem(reply, "method_not_allowed", `this path answers ${list}`, { allow: list });
  });
  installRequestChecks(app);
}

/**
 * When a request refused for an unavailable database is worth trying again: a lock or statement
 * timeout, a deadlock or a serialization conflict is contention that clears in about a second; a
 * lost server takes a few to come back.
 */
export function retryAfterSec(err: DatabaseUnavailable): number {
  return err.reason === "lock_timeout" || err.reason === "statement_timeout" || err.reason === "contention"
    ? 1
    : 3;
}

function describeValidation(err: FastifyError): string {
  const first = err.validation?.[0];
  if (!first) return " is invalid";
  const path = formatPath(first.instancePath.split("/").slice(1));
  const params = first.params as Record<string, unknown>;
  if (first.keyword === "required") return `.${String(params.missingProperty)} is required`;
  if (first.keyword === "additionalProperties") {
    const field = String(params.additionalProperty);
    return SAFE_KEY.test(field) ? `${path} has an unknown field '${field}'` : `${path} has an unknown field`;
  }
  return `${path} ${first.message ?? "is invalid"}`;
}

// A key the client sent is quoted in a detail only when it looks like a field name.
const SAFE_KEY = /^[A-Za-z_$][A-Za-z0-9_$-]{0,63}$/;

/** `.a[0].b`, at most eight steps deep (a body can nest thousands). */
function formatPath(path: NulPath): string {
  const steps = path.slice(0, 8).map((key) => {
    if (typeof key === "number" || /^[0-9]{1,9}$/.test(key)) return `[${key}]`;
    return SAFE_KEY.test(key) ? `.${key}` : "[…]";
  });
  return steps.join("") + (path.length > 8 ? "…" : "");
}

const CODE_BY_STATUS: Partial<Record<number, ErrorCode>> = {
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  414: "uri_too_long",
  415: "unsupported_media_type",
  431: "headers_too_large",
};

/**
 * Fastify's `frameworkErrors`: what goes wrong while routing, before any route (and its hooks)
 * is chosen: a URL whose percent-encoding does not decode, a path segment over maxParamLength.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const known = FRAMEWORK_ERRORS[err.code] ?? { code: "invalid_request" };
  const detail = known.detail ?? ERRORS[known.code].when;
  // No route means no onSend hook either: the request id header is set here.
  return sendProblem(reply, known.code, detail, { "x-request-id": String(request.id) });
}

/**
 * A body that went wrong (too large, not JSON) makes Fastify close the connection, since the
 * client may still be sending it. When the body has arrived in full, or what remains is small
 * enough for Node to read and drop, the connection stays usable for the client's next request.
 */
const DRAIN_LIMIT_BYTES = 1024 * 1024;

function keepAliveIfDrainable(request: FastifyRequest, reply: FastifyReply) {
  if (String(reply.getHeader("connection")).toLowerCase() !== "close") return;
  const declared = Number(request.headers["content-length"]);
  if (request.raw.complete || (Number.isSafeInteger(declared) && declared <= DRAIN_LIMIT_BYTES)) {
    reply.removeHeader("connection");
  }
}

/**
 * The methods each route path answers, for telling "no such path" (404) from "not with this
 * method" (405 with Allow). Fastify's router only says "no route"; the table is kept from the
 * routes as they are registered.
 */
function routeTable(app: FastifyInstance): (url: string) => string[] {
  const routes: { pattern: RegExp; methods: string[] }[] = [];
  app.addHook("onRoute", (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    routes.push({ pattern: routePattern(route.url ?? "/"), methods });
  });
  return (url) => {
    const raw = url.split("?")[0]!;
    // ignoreTrailingSlash is on: /health/ is /health.
    const path = raw.length > 1 && raw.endsWith("/") ? raw.slice(0, -1) : raw;
    const methods = new Set(routes.filter((r) => r.pattern.test(path)).flatMap((r) => r.methods));
    return [...methods].sort();
  };
}

/** A find-my-way path as a regular expression: `:name` is one segment, `*` the rest. */
function routePattern(url: string): RegExp {
  const source = url.replace(/:\w+|\*|[.+?^${}()|[\]\\]/g, (m) =>
    m === "*" ? ".*" : m.startsWith(":") ? "[^/]+" : `\\${m}`,
  );
  return new RegExp(`^${source}$`);
}

/**
 * Checks every request before its handler, for every route: an HTTP/1.1 request without Host
 * (Node's own refusal is a bare 400, so the server lets it through to be refused here), and NUL
 * characters, which no text column can hold, in path parameters, the query and JSON bodies.
 * Refusals are sent from the hook itself rather than thrown, so that a route with an error
 * handler of its own (JSON-RPC at /rpc) does not turn them into something else.
 */
function installRequestChecks(app: FastifyInstance) {
  // Callback hooks, as the others that run on every request (metrics/http.ts): an async hook costs
  // a promise and a turn of the microtask queue each. A hook that answers does not call done.
  app.addHook("onRequest", (request, reply, done) => {
    const { httpVersionMajor, httpVersionMinor } = request.raw;
    if (httpVersionMajor === 1 && httpVersionMinor === 1 && request.headers.host === undefined) {
      sendProblem(reply, "malformed_request", "an HTTP/1.1 request needs a Host header");
      return;
    }
    done();
  });
  app.addHook("preValidation", (request, reply, done) => {
    const parts: [string, unknown][] = [
      ["params", request.params],
      ["querystring", request.query],
      // A body the route keeps as text (/rpc parses its own) is that route's to judge.
      ["body", typeof request.body === "object" ? request.body : undefined],
    ];
    for (const [part, value] of parts) {
      const path = findNul(value);
      if (path) {
        const detail = `${part}${formatPath(path)} contains a NUL character (U+0000), which text cannot hold`;
        sendProblem(reply, "invalid_request", detail);
        return;
      }
    }
    done();
  });
}
