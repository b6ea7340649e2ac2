import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ErrorCode } from "./catalogue.ts";
import { ApiError, PROBLEM_CONTENT_TYPE, problemBody } from "./problem.ts";

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
  FST_ERR_BAD_URL: { code: "invalid_request", detail: "the URL is malformed" },
  FST_ERR_ASYNC_CONSTRAINT: { code: "invalid_request" },
};

export function sendProblem(
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  headers: Record<string, string> = {},
) {
  const body = problemBody(code, detail, String(reply.request.id));
  return reply.code(body.status).headers(headers).type(PROBLEM_CONTENT_TYPE).send(body);
}

/** One place turns every failure into problem+json; 5xx bodies never carry internals. */
export function installErrorHandling(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof ApiError) return sendProblem(reply, err.code, err.message, err.headers);
    if (err.validation) {
      const where = err.validationContext ?? "request";
      return sendProblem(reply, "invalid_request", `${where}${describeValidation(err)}`);
    }
    const known = err.code ? FRAMEWORK_ERRORS[err.code] : undefined;
    if (known) return sendProblem(reply, known.code, known.detail ?? err.message);
    if (err instanceof SyntaxError) return sendProblem(reply, "malformed_json", "the body is not valid JSON");
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return sendProblem(reply, "invalid_request", err.message);
    }
    request.log.error({ err }, "unhandled error");
    if (status === 503)
      return sendProblem(reply, "unavailable", "a dependency is unavailable, retry shortly");
    return sendProblem(reply, "internal_error", "an internal error occurred; quote the requestId to support");
  });

  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, "not_found", `no route for ${request.method} ${request.url.split("?")[0]}`),
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
