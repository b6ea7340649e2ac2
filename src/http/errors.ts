import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, PROBLEM_CONTENT_TYPE, problemBody } from "./problem.ts";

/** Fastify's own error codes for bad input, each mapped to a status and a stable code. */
const FRAMEWORK_ERRORS: Record<string, { status: number; code: string; detail?: string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: "unsupported_media_type",
    detail: "send the body as application/json",
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: "invalid_request" },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: "payload_too_large", detail: "request body is too large" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: "malformed_json", detail: "the JSON body is empty" },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    status: 400,
    code: "malformed_json",
    detail: "the body is not valid JSON",
  },
  FST_ERR_CTP_EMPTY_TYPE: { status: 415, code: "unsupported_media_type" },
  FST_ERR_CTP_INVALID_TYPE: { status: 415, code: "unsupported_media_type" },
  FST_ERR_BAD_URL: { status: 400, code: "invalid_request", detail: "the URL is malformed" },
  FST_ERR_ASYNC_CONSTRAINT: { status: 400, code: "invalid_request" },
};

export function sendProblem(
  reply: FastifyReply,
  status: number,
  code: string,
  detail: string,
  headers: Record<string, string> = {},
) {
  return reply
    .code(status)
    .headers(headers)
    .type(PROBLEM_CONTENT_TYPE)
    .send(problemBody(status, code, detail, String(reply.request.id)));
}

/** One place turns every failure into problem+json; 5xx bodies never carry internals. */
export function installErrorHandling(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof ApiError) return sendProblem(reply, err.status, err.code, err.message, err.headers);
    if (err.validation) {
      const where = err.validationContext ?? "request";
      return sendProblem(reply, 400, "invalid_request", `${where}${describeValidation(err)}`);
    }
    const known = err.code ? FRAMEWORK_ERRORS[err.code] : undefined;
    if (known) return sendProblem(reply, known.status, known.code, known.detail ?? err.message);
    if (err instanceof SyntaxError)
      return sendProblem(reply, 400, "malformed_json", "the body is not valid JSON");
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return sendProblem(reply, status, "invalid_request", err.message);
    }
    request.log.error({ err }, "unhandled error");
    if (status === 503)
      return sendProblem(reply, 503, "unavailable", "a dependency is unavailable, retry shortly");
    return sendProblem(
      reply,
      500,
      "internal_error",
      "an internal error occurred; quote the requestId to support",
    );
  });

  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, 404, "not_found", `no route for ${request.method} ${request.url.split("?")[0]}`),
  );
}

function describeValidation(err: FastifyError): string {
  const first = err.validation?.[0];
  if (!first) return " is invalid";
  const path = first.instancePath ? first.instancePath.replaceAll("/", ".") : "";
  const params = first.params as Record<string, unknown>;
  if (first.keyword === "required") return `.${String(params.missingProperty)} is required`;
  if (first.keyword === "additionalProperties") {
    return `${path} has an unknown field '${String(params.additionalProperty)}'`;
  }
  return `${path} ${first.message ?? "is invalid"}`;
}
